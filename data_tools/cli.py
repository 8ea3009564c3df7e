"""The project's command-line convention, shared by every CLI (data_tools/ is the bottom layer)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_USAGE = 2


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse that reports bad input as exactly one line ``error: ...`` on stderr and exits 2.

    Plain argparse prints the whole usage block first, which buries the one line that says what is wrong.
    """

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(EXIT_USAGE)
