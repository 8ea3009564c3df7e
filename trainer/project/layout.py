"""A voice project: ``<workspace>/projects/<name>/project.json`` and the folders the project owns.

The file says which base model folder the project fine-tunes (and so its generation, asked of the one
registry), where each of its folders is, and what each step produced and from what (``trainer.project.steps``).
It is rewritten atomically at every change. Folder paths are stored relative to the project's folder (the demo's
projects point at the demo's own folders, ``../../v2/runs``), the model folder relative to the workspace when it
is inside it, so a workspace can be moved.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from data_tools.config import ConfigError, load_config
from data_tools.fileio import atomic_write_text
from generations.registry import by_id, generation_of_config, generation_of_folder
from generations.spec import Generation
from trainer.project.schema import FOLDER_NAMES, FORMAT, ProjectError, read_project_file, shown

PROJECTS_DIR = "projects"
PROJECT_FILE = "project.json"
LOCK_FILE = ".project.lock"
LOCK_TIMEOUT_S = 10.0
NAME_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The folders a project owns: recordings in, clips and proofreading (its saved manifests in ingest/manifests, where
# the proofreading store writes them), prepared data of the project's generation, training runs, evaluations and
# exported models.
FOLDERS = FOLDER_NAMES
OUTSIDE_NOTE = "outside the workspace"


def check_name(name: str) -> str:
    """A project name usable as one folder name (letters, digits, ``.``, ``_``, ``-``; at most 64)."""
    text = str(name or "").strip()
    if not text:
        raise ProjectError("give the project a name")
    if not NAME_RULE.match(text) or ".." in text:
        raise ProjectError(f"project name {text!r} is not a safe folder name: use letters, digits, '.', '_' or '-' "
                           "(at most 64, starting with a letter or digit)")
    return text


def projects_root(workspace: Path | str) -> Path:
    return Path(workspace).resolve() / PROJECTS_DIR


def default_folders(generation: str) -> dict[str, str]:
    return {"recordings": "recordings", "ingest": "ingest", "manifests": "ingest/manifests",
            "prepared": f"prepared/{generation}", "runs": "runs", "evaluations": "evaluations", "exports": "exports"}


def generation_of_model_dir(folder: Path) -> Generation:
    """The generation of a base model folder: the registry's folder rule, else its config.yaml's (IndexTTS-1.5
    folders have no folder rule)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ProjectError(f"base model folder not found: {folder}")
    found = generation_of_folder(folder)
    if found is not None:
        return found
    try:
        return generation_of_config(load_config(folder / "config.yaml"))
    except (ConfigError, OSError) as exc:
        raise ProjectError(f"{folder} is no IndexTTS model folder: {' '.join(str(exc).split())}") from None


def _now() -> tuple[float, str]:
    now = datetime.now(UTC)
    return now.timestamp(), now.isoformat(timespec="seconds")


@dataclass
class Project:
    """One project as its file holds it; ``workspace`` and ``name`` place it."""

    workspace: Path
    name: str
    model_dir: str  # relative to the workspace when inside it
    generation: str  # a registry id
    folders: dict[str, str]  # relative to the project's folder
    tokenizer: str = ""  # the text tokenizer the project trains with ("" : the model folder's own)
    created: str = ""
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return projects_root(self.workspace) / self.name

    @property
    def file(self) -> Path:
        return self.folder / PROJECT_FILE

    @property
    def model_path(self) -> Path:
        return self.resolve(self.model_dir, self.workspace)

    @property
    def generation_name(self) -> str:
        return by_id(self.generation).name

    def dir(self, key: str) -> Path:
        """The absolute path of one of the project's folders (``FOLDERS``)."""
        if key not in FOLDERS:
            raise ProjectError(f"no project folder {key!r} (one of {', '.join(FOLDERS)})")
        return Path(os.path.normpath(self.folder / self.folders.get(key, default_folders(self.generation)[key])))

    @staticmethod
    def resolve(text: str, base: Path) -> Path:
        path = Path(text)
        return Path(os.path.normpath(path if path.is_absolute() else Path(base) / path))

    def portable(self, path: Path | str) -> str:
        """How a path is written in the file: relative to the workspace when inside it, else absolute."""
        path = Path(os.path.normpath(Path(path).resolve()))
        try:
            return path.relative_to(Path(self.workspace).resolve()).as_posix()
        except ValueError:
            return str(path)

    def absolute(self, recorded: str) -> Path:
        return self.resolve(recorded, self.workspace)

    def in_workspace(self, path: Path | str) -> bool:
        """Whether ``path`` lies inside the workspace, links followed (a link out of it is outside)."""
        return inside(path, self.workspace)

    def readable(self, path: Path | str) -> bool:
        """Whether the project may read ``path``: inside the workspace, or inside the model folder or the
        tokenizer the user picked (which may lie outside it). Anything else is never opened nor hashed."""
        roots = [self.model_path, *([self.absolute(self.tokenizer)] if self.tokenizer else [])]
        return self.in_workspace(path) or any(inside(path, root) for root in roots)

    def where(self, path: Path | str) -> str:
        """``path`` as the studio and the CLI show it: marked when it lies outside the workspace."""
        return str(path) if self.in_workspace(path) else f"{path} ({OUTSIDE_NOTE})"

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "created": self.created, "model_dir": self.model_dir,
                "generation": self.generation, "tokenizer": self.tokenizer, "folders": self.folders,
                "steps": self.steps, "pending": self.pending}

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.file, json.dumps(self.to_json(), indent=2, ensure_ascii=False, sort_keys=True) + "\n")

    def change(self, steps: dict[str, dict[str, Any]] | None = None,
               pending: dict[str, dict[str, Any] | None] | None = None) -> None:
        """Set step records and pending notes (None: drop it) over what the file holds now, under the project's
        lock, so a record the CLI or another page wrote meanwhile is kept; this object follows the file."""
        with _locked(self.folder):
            fresh_steps, fresh_pending = dict(self.steps), dict(self.pending)
            with contextlib.suppress(OSError, ProjectError):  # no or a damaged file: ours
                on_disk = read_project_file(self.file)
                fresh_steps = {step: asdict(record) for step, record in on_disk.steps.items()}
                fresh_pending = {step: asdict(note) for step, note in on_disk.pending.items()}
            fresh_steps.update(steps or {})
            for step, note in (pending or {}).items():
                if note is None:
                    fresh_pending.pop(step, None)
                else:
                    fresh_pending[step] = note
            self.steps, self.pending = fresh_steps, fresh_pending
            self.save()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The project's lock (an flock on a file beside project.json), waited for at most LOCK_TIMEOUT_S."""
    folder.mkdir(parents=True, exist_ok=True)
    try:  # never through a link: the lock file is the project's own
        fd = os.open(folder / LOCK_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise ProjectError(f"{folder / LOCK_FILE}: cannot open the project's lock: {exc.strerror or exc}") from None
    with os.fdopen(fd, "a") as handle:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ProjectError(f"{folder}: the project file is locked by another process for over "
                                       f"{LOCK_TIMEOUT_S:g} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def create_project(workspace: Path | str, name: str, model_dir: Path | str, *, tokenizer: Path | str | None = None,
                   folders: dict[str, Path] | None = None) -> Project:
    """A new project fine-tuning ``model_dir`` (its generation asked of the registry); its folders are made.

    ``folders`` (absolute paths) replaces some of the default folders (the demo's projects use the demo's own).
    """
    name = check_name(name)
    workspace = Path(workspace).resolve()
    target = projects_root(workspace) / name
    if os.path.lexists(target / PROJECT_FILE):
        raise _exists(name, target)
    model = Path(model_dir)
    model = (model if model.is_absolute() else workspace / model).resolve()
    generation = generation_of_model_dir(model)
    if tokenizer and not Project.resolve(str(tokenizer), workspace).is_file():
        raise ProjectError(f"tokenizer not found: {tokenizer}")
    project = Project(workspace=workspace, name=name, model_dir="", generation=generation.id,
                      folders=default_folders(generation.id), created=_now()[1])
    project.model_dir = project.portable(model)
    project.tokenizer = project.portable(Project.resolve(str(tokenizer), workspace)) if tokenizer else ""
    for key, path in (folders or {}).items():
        if key not in FOLDERS:
            raise ProjectError(f"no project folder {key!r} (one of {', '.join(FOLDERS)})")
        if not inside(path, workspace):
            raise ProjectError(f"project folder {key}: {path} is {OUTSIDE_NOTE} (a project's folders stay in it)")
        project.folders[key] = os.path.relpath(Path(path).resolve(), target)
    _claim(project)
    for key in FOLDERS:  # its own folders; folders it points at elsewhere are made by the step that writes them
        if project.dir(key).is_relative_to(target):
            project.dir(key).mkdir(parents=True, exist_ok=True)
    return project


def _exists(name: str, target: Path) -> ProjectError:
    return ProjectError(f"project {name!r} exists already ({target / PROJECT_FILE})")


def _claim(project: Project) -> None:
    """Write a new project's file only if there is none: the whole file is linked into place in one step, which
    fails when a project.json exists, so of two creates at once exactly one wins and the other is refused."""
    project.folder.mkdir(parents=True, exist_ok=True)
    if not inside(project.folder, project.workspace):
        raise ProjectError(f"{project.folder}: the project's folder leads {OUTSIDE_NOTE}")
    text = json.dumps(project.to_json(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    draft = project.folder / f".{PROJECT_FILE}.{os.getpid()}.{time.monotonic_ns()}.new"
    try:
        atomic_write_text(draft, text)
        try:
            os.link(draft, project.file)
        except FileExistsError:
            raise
        except OSError:  # a filesystem without hard links: an exclusive create (a reader may see it half-written)
            fd = os.open(project.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
    except FileExistsError:
        raise _exists(project.name, project.folder) from None
    finally:
        with contextlib.suppress(OSError):
            draft.unlink()


def load_project(workspace: Path | str, name: str) -> Project:
    """The project ``name`` of the workspace; ProjectError (one line) when it is missing or unreadable."""
    name = check_name(name)
    workspace = Path(workspace).resolve()
    folder = projects_root(workspace) / name
    path = folder / PROJECT_FILE
    if os.path.lexists(folder) and os.path.realpath(folder) != os.path.join(os.path.realpath(folder.parent), name):
        raise ProjectError(f"{folder}: the project's folder is a link; a project's files are never followed "
                           "elsewhere")
    try:
        parsed = read_project_file(path)
    except FileNotFoundError:
        known = ", ".join(project_names(workspace)) or "none yet"
        raise ProjectError(f"no project {name!r} in {projects_root(workspace)} (projects: {known})") from None
    project = Project(workspace=workspace, name=name, model_dir=parsed.model_dir, generation=parsed.generation,
                      folders=dict(parsed.folders), tokenizer=parsed.tokenizer, created=parsed.created,
                      steps={step: asdict(record) for step, record in parsed.steps.items()},
                      pending={step: asdict(note) for step, note in parsed.pending.items()})
    try:
        _check_confined(project)
    except ProjectError as exc:
        raise ProjectError(f"{path}: {exc}") from None
    return project


def inside(path: Path | str, root: Path | str) -> bool:
    """Whether ``path`` lies inside ``root`` (or is it), every link followed: ``..`` and links out are outside."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _check_confined(project: Project) -> None:
    """The files a project owns stay in the workspace: its folders (relative paths; the demo's projects point at
    the demo's own folders beside them), what its steps produced and where a started step writes. Its inputs, the
    base model and the tokenizer may lie anywhere (the user picked them); they are shown as outside."""
    for key, text in project.folders.items():
        if not project.in_workspace(project.dir(key)):
            raise ProjectError(f"folders.{key}: {shown(text)} leads {OUTSIDE_NOTE}")
    for step, record in project.steps.items():
        for recorded in record["outputs"]:
            if not project.in_workspace(project.absolute(recorded)):
                raise ProjectError(f"steps.{step}.outputs: {shown(recorded)} is {OUTSIDE_NOTE} (a step's "
                                   "outputs are the project's own)")
    for step, note in project.pending.items():
        if not project.in_workspace(project.absolute(note["out_dir"])):
            raise ProjectError(f"pending.{step}.out_dir: {shown(note['out_dir'])} is {OUTSIDE_NOTE}")


@dataclass(frozen=True)
class ProjectListing:
    name: str
    error: str  # one line: why its file cannot be used ("" : it loads)


def project_listing(workspace: Path | str) -> list[ProjectListing]:
    """The workspace's projects, sorted by name, each loaded: a damaged one is listed with its one-line error."""
    listing = []
    for name in project_names(workspace):
        try:
            load_project(workspace, name)
            listing.append(ProjectListing(name, ""))
        except ProjectError as exc:
            listing.append(ProjectListing(name, " ".join(str(exc).split())))
    return listing


def project_names(workspace: Path | str) -> list[str]:
    """The workspace's projects, sorted by name."""
    root = projects_root(workspace)
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob(f"*/{PROJECT_FILE}")
                  if NAME_RULE.match(p.parent.name) and ".." not in p.parent.name)


def now() -> tuple[float, str]:
    """(epoch seconds, ISO time) of a record."""
    return _now()
