"""Refusals: one exception type for "bad input, exit 2", and the wrapper that prints it as one line."""

from __future__ import annotations

import sys
from collections.abc import Callable

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_REFUSED = 2
EXIT_STOPPED = 130


class UsageError(Exception):
    """Bad input or an incompatible file: the CLI prints ``error: <message>`` (one line) and exits 2."""


def _refusal_types() -> tuple[type[BaseException], ...]:
    """Exception types of the layers below that mean "bad input" (each carries a one-line message).

    The trainer's own refusals (checkpoints, synthesis, ...) subclass ``UsageError``, so this module needs
    to know no layer above data_tools.
    """
    from data_tools.config import ConfigError
    from data_tools.manifest import ManifestError
    from data_tools.text_tokenizer import TokenizerError

    return (UsageError, ConfigError, ManifestError, TokenizerError)


def one_line(message: object) -> str:
    return " ".join(str(message).split()) or "unknown error"


def exception_line(exc: BaseException) -> str:
    """``exc``'s message on one line; its type's name when it has none (a check's sentence is never empty)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def refuse(message: object) -> int:
    """Print the refusal line and return the exit code (the caller returns it from main)."""
    sys.stdout.flush()
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()
    return EXIT_REFUSED


def run_cli(main: Callable[[], int]) -> int:
    """Run ``main``; refusals become exit 2 with one line, anything else propagates (exit 1, traceback)."""
    refusals = _refusal_types()
    try:
        return main()
    except refusals as exc:
        return refuse(exc)
