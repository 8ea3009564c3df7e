"""Reading a trainer command line: the argparse parser built from ``trainer.options.OPTIONS``.

``parse_argv(argv)`` gives ``{name: value}`` with every option's default filled in; bad input exits 2 with one
line (``data_tools.cli.OneLineErrorParser``). Each kind is checked as it is read: numbers (and their minimum),
paths (``~`` expanded, line breaks refused, by the rule the studio's form uses), devices. The way back, values to
argv, is ``trainer.options.options_to_argv``: ``parse_argv(options_to_argv(values)) == values``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import Any

from data_tools.cli import OneLineErrorParser
from data_tools.paths import PathError, expand_text
from trainer.options import OPTIONS, Option

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def _number_type(option: Option) -> Callable[[str], Any]:
    convert = int if option.kind == "int" else float
    what = "an integer" if option.kind == "int" else "a number"

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if option.kind == "float" and value != value:  # NaN
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        if option.minimum is not None and value < option.minimum:
            bound = int(option.minimum) if option.kind == "int" else option.minimum
            raise argparse.ArgumentTypeError(f"must be >= {bound}, got {text}")
        return value

    return parse



def _path_type(option: Option) -> Callable[[str], str]:
    """``~`` expanded and line breaks refused, by the one rule the studio's form uses too."""

    def parse(text: str) -> str:
        try:
            return expand_text(text, option.flag)
        except PathError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option.flag}: ")) from None

    return parse



def _device_type(text: str) -> str:
    if not DEVICE_PATTERN.match(text):
        raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")
    return text



def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="python -m trainer.train",
        description="Fine-tune the IndexTTS GPT on a codes manifest.",
        allow_abbrev=False,
    )
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in OPTIONS:
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        group = groups[option.group]
        kwargs: dict[str, Any] = {"dest": option.name, "help": option.help.replace("%", "%%")}
        if option.kind == "bool":
            kwargs.update(action=argparse.BooleanOptionalAction, default=option.default)
        elif option.repeatable:
            kwargs.update(action="append", default=None, metavar=option.kind.upper())
            if option.kind == "path":
                kwargs["type"] = _path_type(option)
        else:
            kwargs.update(default=option.default)
            if option.kind in ("int", "float"):
                kwargs["type"] = _number_type(option)
            elif option.kind == "choice":
                kwargs["choices"] = option.choices
            elif option.name in ("device", "eval_device"):
                kwargs["type"] = _device_type
            elif option.kind == "path":
                kwargs["type"] = _path_type(option)
            if option.kind in ("path", "str"):
                kwargs["metavar"] = "PATH" if option.kind == "path" else option.name.upper()
        group.add_argument(option.flag, **kwargs)
    return parser



def parse_argv(argv: Sequence[str]) -> dict[str, Any]:
    """Parse trainer argv into ``{name: value}`` with defaults filled (bad input: exit 2, one line)."""
    namespace = build_parser().parse_args(list(argv))
    values = vars(namespace)
    for option in OPTIONS:
        if option.repeatable and values[option.name] is None:
            values[option.name] = list(option.default)
    return {option.name: values[option.name] for option in OPTIONS}
