"""The project's command-line convention, shared by every CLI (data_tools/ is the bottom layer)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

EXIT_USAGE = 2


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse that reports bad input as exactly one line ``error: ...`` on stderr and exits 2.

    Plain argparse prints the whole usage block first, which buries the one line that says what is wrong.
    """

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def usage_error(message: object) -> int:
    """Say ``error: <message>`` in one line on stderr; returns the exit code of a refusal (2)."""
    sys.stderr.write(f"error: {' '.join(str(message).split())}\n")
    return EXIT_USAGE


def run_refusing(run: Callable[[], int], refused: tuple[type[Exception], ...],
                 writing: str | os.PathLike[str] | None = None) -> int:
    """``run()``'s exit code; one of ``refused`` (bad input) becomes its one ``error:`` line and exit 2, and so
    does an OSError while writing to ``writing`` (a full disk, no permission). Anything else propagates."""
    try:
        return run()
    except refused as exc:
        return usage_error(exc)
    except OSError as exc:
        if writing is None:
            raise
        return usage_error(f"cannot write to {os.fspath(writing)}: {exc.strerror or exc}")


@contextlib.contextmanager
def progress_bar(quiet: bool, desc: str, **tqdm_args: Any) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr (a no-op with ``quiet``); closed on exit."""
    if quiet:
        yield lambda _done, _total: None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, desc=desc, file=sys.stderr, **tqdm_args)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield progress
    finally:
        bar.close()
