"""Dataclasses back from the JSON a CLI wrote with ``dataclasses.asdict`` (its report read by the UI).

``from_json(DataReport, data)`` rebuilds nested dataclasses, lists, dicts and optional fields from their
type hints, so the tab that ran the checker as a job shows its report exactly as if it had called the
library. Keys the class does not declare (e.g. ``exit_code``) are ignored; a missing field keeps its
default, and a value of the wrong shape raises ValueError with a one-line reason.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _convert(options[0], value, where) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(hint) or (Any,)
        return [_convert(item, entry, f"{where}[{index}]") for index, entry in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {type(value).__name__}")
        _key, item = typing.get_args(hint) or (str, Any)
        return {key: _convert(item, entry, f"{where}.{key}") for key, entry in value.items()}
    return value


def from_json(cls: type[T], data: Any, where: str = "report") -> T:
    """An instance of the dataclass ``cls`` from ``data`` (a dict as ``dataclasses.asdict`` made it)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    values = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in data:
            values[field.name] = _convert(hints[field.name], data[field.name], f"{where}.{field.name}")
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None
