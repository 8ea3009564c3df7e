"""The typed schema of ``project.json``: the one place its fields are checked, for the CLI and the studio alike.

``read_project_file(path)`` reads the file without ever blocking (a FIFO, a device or a folder named
project.json is refused before it is opened) and checks every field against ``ProjectFile``: a wrong type, a
null, a path with a NUL byte or of absurd length, a step that does not exist, is one ``ProjectError`` line that
says what and where (``<file>: steps.train.outputs: ...``). Unknown keys are dropped.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, NewType, get_args, get_origin, get_type_hints

from data_tools.fileio import MAX_PATH_CHARS, UnusableFile, open_regular

FORMAT = 1
MAX_FILE_BYTES = 32 << 20  # a project of thousands of records is a few MiB
STEP_NAMES = ("recordings", "proofread", "prepare", "train", "listen", "export")  # trainer.project.steps.STEPS
FOLDER_NAMES = ("recordings", "ingest", "manifests", "prepared", "runs", "evaluations", "exports")
# A path as the file writes it: relative (to the workspace, or to the project's folder for ``folders``) or
# absolute; never empty, never holding a NUL byte, at most MAX_PATH_CHARS characters.
PathText = NewType("PathText", str)


class ProjectError(ValueError):
    """A project request that cannot be served (bad name, no such project, unreadable file): one line."""


@dataclass
class StepRecord:
    """What a step produced and from what (``trainer.project.steps.record_step``)."""

    at: float = 0.0
    when: str = ""
    outputs: dict[PathText, str] = field(default_factory=dict)  # path -> content digest
    inputs: dict[PathText, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    note: str = ""
    source: str = ""


@dataclass
class PendingStep:
    """A step the studio started and ``refresh`` completes when its report appears in ``out_dir``."""

    at: float
    out_dir: PathText
    when: str = ""
    inputs: dict[PathText, str] = field(default_factory=dict)


@dataclass
class ProjectFile:
    format: int
    model_dir: PathText
    generation: str
    name: str = ""
    created: str = ""
    tokenizer: str = ""  # "" : the model folder's own; else a PathText
    folders: dict[str, PathText] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    pending: dict[str, PendingStep] = field(default_factory=dict)


KEYS_OF = {"folders": FOLDER_NAMES, "steps": STEP_NAMES, "pending": STEP_NAMES}


def shown(value: object, limit: int = 60) -> str:
    """A value as an error line quotes it: repr'd (no line breaks), cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _type_name(value: object) -> str:
    names = {type(None): "null", dict: "an object", list: "a list", str: "a string", bool: "true/false",
             int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def check_path_text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ProjectError(f"{where}: must be a path (a string), not {_type_name(value)}")
    if not value.strip():
        raise ProjectError(f"{where}: an empty path")
    if "\x00" in value:
        raise ProjectError(f"{where}: the path holds a NUL byte ({shown(value)})")
    if len(value) > MAX_PATH_CHARS:
        raise ProjectError(f"{where}: a path of {len(value)} characters (at most {MAX_PATH_CHARS})")
    return value


def _check(value: object, hint: Any, where: str) -> Any:
    """``value`` checked against the type ``hint`` (str, int, float, PathText, dict[K, V], a dataclass)."""
    if hint is PathText:
        return check_path_text(value, where)
    if hint is str:
        if not isinstance(value, str):
            raise ProjectError(f"{where}: must be a string, not {_type_name(value)}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, int if hint is int else (int, float)):
            raise ProjectError(f"{where}: must be a {'whole ' if hint is int else ''}number, not {_type_name(value)}")
        return hint(value)
    if get_origin(hint) is dict:
        key_hint, value_hint = get_args(hint)
        if not isinstance(value, dict):
            raise ProjectError(f"{where}: must be an object, not {_type_name(value)}")
        allowed = KEYS_OF.get(where)
        checked = {}
        for key, item in value.items():
            if allowed is not None and key not in allowed:
                raise ProjectError(f"{where}: no such entry {shown(key)} (one of {', '.join(allowed)})")
            checked[_check(key, key_hint, f"{where} key {shown(key)}")] = _check(item, value_hint,
                                                                                f"{where}.{shown(key, 40)}")
        return checked
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return _record(value, hint, where)
    raise TypeError(f"schema field type {hint!r} is not handled")  # a programming error, not bad input


def _record(value: object, cls: type, where: str) -> Any:
    if not isinstance(value, dict):
        raise ProjectError(f"{where}: must be an object, not {_type_name(value)}")
    hints = get_type_hints(cls)
    found = {}
    for item in fields(cls):
        place = f"{where}.{item.name}" if where else item.name
        if item.name not in value:
            if item.default is MISSING and item.default_factory is MISSING:
                raise ProjectError(f"{place}: missing")
            continue
        found[item.name] = _check(value[item.name], hints[item.name], place)
    return cls(**found)


def parse_project(data: object) -> ProjectFile:
    """The file's parsed JSON checked against ``ProjectFile`` (ProjectError without the file's name)."""
    if not isinstance(data, dict):
        raise ProjectError(f"not a project file: the top level must be an object, not {_type_name(data)}")
    if data.get("format") != FORMAT or isinstance(data.get("format"), bool):
        raise ProjectError(f"not a project file of format {FORMAT} (format: {shown(data.get('format'))})")
    parsed: ProjectFile = _record(data, ProjectFile, "")
    if parsed.tokenizer:
        check_path_text(parsed.tokenizer, "tokenizer")
    from generations.registry import by_id

    try:
        by_id(parsed.generation)
    except (KeyError, ValueError):
        raise ProjectError(f"generation: {shown(parsed.generation)} is no known model generation") from None
    return parsed


def read_project_file(path: Path) -> ProjectFile:
    """``path`` read and checked; ProjectError ``<path>: unreadable project file: <why>`` (one line) for anything
    that is not a readable, well-formed project file. A FIFO, a device, a folder or a link named project.json is
    refused unopened. FileNotFoundError when there is none."""
    try:
        return _read(path)
    except ProjectError as exc:
        raise ProjectError(f"{path}: unreadable project file: {' '.join(str(exc).split())}") from None


def _read(path: Path) -> ProjectFile:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise ProjectError(getattr(exc, "strerror", None) or str(exc)) from None
    if stat.S_ISLNK(info.st_mode):
        raise ProjectError("it is a link (a project's file is never followed elsewhere)")
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "not a regular file"
        raise ProjectError(f"it is {kind}, not a file")
    if info.st_size > MAX_FILE_BYTES:
        raise ProjectError(f"{info.st_size} bytes (at most {MAX_FILE_BYTES})")
    try:
        with open_regular(path) as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except UnusableFile as exc:
        raise ProjectError(str(exc)) from None
    except OSError as exc:
        raise ProjectError(exc.strerror or str(exc)) from None
    if not raw.strip():
        raise ProjectError("the file is empty")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProjectError(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ProjectError(f"broken JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ProjectError("JSON nested too deeply") from None
    except ValueError as exc:  # e.g. a number of more digits than Python converts
        raise ProjectError(f"broken JSON ({str(exc)[:120]})") from None
    return parse_project(data)
