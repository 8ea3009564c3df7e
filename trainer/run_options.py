"""The run's options as one typed, frozen object built from the options table (``trainer.options.OPTIONS``).

``RunOptions`` has one attribute per declared option, of its declared type (``str``/``path``/``choice`` ->
str, ``int`` -> int, ``float`` -> float, ``bool`` -> bool, repeatable -> list of str, which callers treat as
read-only: a change goes through ``replace``). It is built once, right
after parsing (``parse_run_options``) or from a plain dict (``RunOptions.from_dict``), and the run plan, the
run and the training loop take it. A name that is not a declared option fails at once, with one line naming
the closest real option: reading it (``opts.bach_size``, ``opts["bach_size"]``, ``opts.get("bach_size")``),
building from it, or changing it (``opts.replace(bach_size=2)``).

The plain dict stays the format of the boundaries: ``to_dict()`` gives what ``train_config.yaml``
(``write_train_config``), ``options_to_argv`` and the UI's form use, unchanged byte for byte. Mapping-style
reads (``opts["x"]``, ``opts.get("x", d)``) remain for the generation modules that take the options as a
mapping; they are as strict as the attributes.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.options import OPTIONS, Option
from trainer.options_parser import parse_argv

_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
_SCALAR_TYPES: dict[str, type] = {"str": str, "path": str, "choice": str, "int": int, "float": float, "bool": bool}


class UnknownOption(AttributeError, KeyError):
    """A name that is not a declared trainer option (an AttributeError for attribute reads, a KeyError for
    mapping reads); the message names the closest real option."""

    def __init__(self, name: object) -> None:
        super().__init__(unknown_option_message(name))
        self.option_name = name

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class OptionTypeError(TypeError):
    """A value of the wrong type for its option; the message names the option and the type it needs."""


def unknown_option_message(name: object) -> str:
    close = difflib.get_close_matches(str(name), list(_BY_NAME), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"no trainer option named {name!r}{hint}"


def _declared_type(option: Option) -> Any:
    return list[str] if option.repeatable else _SCALAR_TYPES[option.kind]


def _checked(option: Option, value: Any) -> Any:
    """``value`` as the option's declared type (a Path becomes str, an int a float for float options)."""
    where = f"option {option.name!r}"
    if option.repeatable:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise OptionTypeError(f"{where} takes a list of str, got {type(value).__name__}")
        items = list(value)
        bad = next((item for item in items if not isinstance(item, str | Path)), None)
        if bad is not None:
            raise OptionTypeError(f"{where} takes a list of str, got an item of type {type(bad).__name__}")
        return [str(item) for item in items]
    wanted = _SCALAR_TYPES[option.kind]
    if wanted is str and isinstance(value, Path):
        return str(value)
    if wanted is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if wanted is int and isinstance(value, bool):
        raise OptionTypeError(f"{where} takes int, got bool")
    if not isinstance(value, wanted):
        raise OptionTypeError(f"{where} takes {wanted.__name__}, got {type(value).__name__}")
    return value


class _RunOptionsBase(Mapping[str, Any]):
    """Behaviour of the generated ``RunOptions``; its fields come from the table."""

    __slots__ = ()

    def __post_init__(self) -> None:
        for option in OPTIONS:
            object.__setattr__(self, option.name, _checked(option, getattr(self, option.name)))

    def __getattr__(self, name: str) -> Any:  # only reached when ``name`` is not a field
        if name.startswith("__") and name.endswith("__"):  # protocol probes (copy, pickle) stay plain
            raise AttributeError(name)
        raise UnknownOption(name)

    # -- strict mapping reads, for the modules that take the options as a mapping -------------------------
    def __getitem__(self, name: str) -> Any:
        if name not in _BY_NAME:
            raise UnknownOption(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:  # ``default`` is never used: every option has a value
        return self[name]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or name not in _BY_NAME:
            raise UnknownOption(name)
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(_BY_NAME)

    def __len__(self) -> int:
        return len(_BY_NAME)

    # -- conversions ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """``{name: value}`` in declaration order (lists copied): the YAML's, the argv's and the form's format."""
        return {option.name: list(getattr(self, option.name)) if option.repeatable else getattr(self, option.name)
                for option in OPTIONS}

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` (each a declared option, of its type)."""
        for name in changes:
            if name not in _BY_NAME:
                raise UnknownOption(name)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunOptions:
        """Options from ``{name: value}``; names left out take their defaults, an unknown name is refused."""
        for name in values:
            if name not in _BY_NAME:
                raise UnknownOption(name)
        return cls(**dict(values))


RunOptions = dataclasses.make_dataclass(
    "RunOptions",
    [(option.name, _declared_type(option),
      dataclasses.field(default_factory=lambda option=option: list(option.default)) if option.repeatable
      else dataclasses.field(default=option.default))
     for option in OPTIONS],
    bases=(_RunOptionsBase,),
    frozen=True,
    eq=False,  # Mapping's equality: equal to another RunOptions or a dict with the same values
    slots=True,
)
RunOptions.__module__ = __name__  # pickle finds the class here
RunOptions.__doc__ = "Every trainer option as a typed, frozen attribute (see the module's docstring)."


def as_run_options(values: RunOptions | Mapping[str, Any]) -> RunOptions:
    """``values`` as RunOptions: itself, or built from a plain dict (strictly: unknown names are refused)."""
    return values if isinstance(values, RunOptions) else RunOptions.from_dict(values)


def parse_run_options(argv: Sequence[str]) -> RunOptions:
    """Trainer argv -> RunOptions (bad flags: exit 2 with one line, as ``parse_argv``)."""
    return RunOptions.from_dict(parse_argv(argv))


def stored_run_options(values: Mapping[str, Any]) -> RunOptions:
    """The options a run stored (its ``train_config.yaml``): names the table no longer declares (a run of an
    older studio) are left out, as evaluation reads them; a value of the wrong type raises OptionTypeError."""
    return RunOptions.from_dict({name: value for name, value in values.items() if name in _BY_NAME})
