"""The project's command-line convention, shared by every CLI (data_tools/ is the bottom layer)."""

from __future__ import annotations

import argparse
import contextlib
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
