"""Damaged and hostile project files: a bad ``project.json`` is one line (what and where) from the loader, the CLI
and the Project tab, and the other projects still open; a project never reads, hashes or writes through ``../``,
absolute paths or links out of the workspace for the files it owns; two creates at once give one project.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainer.project import (
    ProjectError,
    create_project,
    defaults_for,
    load_project,
    open_project,
    record_step,
    step_states,
)
from trainer.project.cli import main as project_cli

Damage = Callable[[dict[str, Any]], bytes]


def _json(change: Callable[[dict[str, Any]], object]) -> Damage:
    """A damage that edits the good file's JSON (``change`` returns the new top level, or None: edited in place)."""
    def damage(good: dict[str, Any]) -> bytes:
        edited = change(good)
        return json.dumps(good if edited is None else edited).encode()
    return damage


def _set(*keys_and_value: object) -> Damage:
    *keys, value = keys_and_value

    def change(data: dict[str, Any]) -> None:
        for key in keys[:-1]:
            data = data.setdefault(key, {})
        data[keys[-1]] = value
    return _json(change)


def _record(**fields: object) -> dict[str, object]:
    return {"at": 1.0, "when": "2026-01-01T00:00:00+00:00", "outputs": {"projects/bad/runs": "listing:x"},
            "inputs": {}, "counts": {}, "note": "", "source": "cli", **fields}


DAMAGES: dict[str, Damage] = {
    "top-level-list": _json(lambda good: [good]),
    "top-level-string": _json(lambda good: "project"),
    "top-level-null": lambda good: b"null",
    "format-as-string": _set("format", "1"),
    "model-dir-null": _set("model_dir", None),
    "model-dir-number": _set("model_dir", 5),
    "model-dir-object": _set("model_dir", {"path": "v2/checkpoints"}),
    "generation-list": _set("generation", ["2"]),
    "generation-number": _set("generation", 2),
    "tokenizer-object": _set("tokenizer", {"path": "bpe.model"}),
    "folders-list": _set("folders", [["runs", "runs"]]),
    "folder-number": _set("folders", "runs", 7),
    "folder-null": _set("folders", "runs", None),
    "steps-list": _set("steps", ["train"]),
    "step-record-string": _set("steps", "train", "done"),
    "step-outputs-list": _set("steps", "train", _record(outputs=["runs/latest.pth"])),
    "step-at-text": _set("steps", "train", _record(at="soon")),
    "step-count-text": _set("steps", "recordings", _record(counts={"files": "many"})),
    "unknown-step-with-line-break": _set("steps", "tra\nin", _record()),
    "pending-out-dir-null": _set("pending", "prepare", {"at": 1.0, "when": "", "inputs": {}, "out_dir": None}),
    "huge-path": _set("model_dir", "v2/" + "x" * 200_000),
    "nul-in-path": _set("folders", "runs", "ru\x00ns"),
    "deep-nesting": lambda good: b'{"format": 1, "steps": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
    "invalid-utf8": lambda good: b'{"format": 1, "name": "\xff\xfe"}',
    "truncated-json": lambda good: json.dumps(good).encode()[:40],
    "empty-file": lambda good: b"",
}


@pytest.fixture
def two_projects(demo_workspace, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A workspace with the projects ``good`` and ``bad`` (both fine yet); the good file's JSON."""
    model = demo_workspace.root / "v2" / "checkpoints"
    create_project(tmp_path, "good", model)
    bad = create_project(tmp_path, "bad", model)
    return tmp_path, json.loads(bad.file.read_text(encoding="utf-8"))


def _one_line(text: str) -> str:
    assert text.strip() and "\n" not in text.strip(), text
    return text


def _assert_bad_is_one_line_and_good_still_works(ws: Path, capsys) -> None:
    from webui.context import StudioContext
    from webui.project.tab_project import project_choices, project_view

    file = str(ws / "projects" / "bad" / "project.json")
    with pytest.raises(ProjectError) as refused:
        load_project(ws, "bad")
    assert file in _one_line(str(refused.value))

    code = project_cli(["show", "bad", "--workspace", str(ws)])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.startswith("error: ") and err.count("\n") == 1 and file in err, err

    labels = dict((name, label) for label, name in project_choices(ws))
    assert set(labels) == {"bad", "good"} and labels["good"] == "good"
    assert "damaged" in _one_line(labels["bad"])
    view = project_view(ws, "bad")
    assert view.next_tab is None and file in _one_line(view.summary) and not view.steps
    assert StudioContext.create(ws).project("bad") is None

    assert open_project(ws, "good").name == "good"  # the other project still opens
    assert project_view(ws, "good").next_tab is not None
    assert project_cli(["show", "good", "--workspace", str(ws)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_damaged_project_file_is_one_line_and_the_others_still_open(case, two_projects, capsys):
    ws, good = two_projects
    (ws / "projects" / "bad" / "project.json").write_bytes(DAMAGES[case](good))
    _assert_bad_is_one_line_and_good_still_works(ws, capsys)


def test_a_folder_named_project_json_is_one_line(two_projects, capsys):
    ws, _ = two_projects
    file = ws / "projects" / "bad" / "project.json"
    file.unlink()
    file.mkdir()
    _assert_bad_is_one_line_and_good_still_works(ws, capsys)


@pytest.mark.timeout(30)
def test_a_fifo_named_project_json_is_refused_without_blocking(two_projects, capsys):
    ws, _ = two_projects
    file = ws / "projects" / "bad" / "project.json"
    file.unlink()
    os.mkfifo(file)
    _assert_bad_is_one_line_and_good_still_works(ws, capsys)


def test_the_schema_names_the_steps_and_folders_the_project_has():
    from trainer.project import FOLDERS, STEPS
    from trainer.project.schema import FOLDER_NAMES, STEP_NAMES

    assert STEP_NAMES == STEPS and FOLDER_NAMES == FOLDERS


# ----- paths leading out -----------------------------------------------------------------------------------


def _snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` outside ``skip``: path -> (size, mtime)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (Path(folder) / d).resolve().is_relative_to(skip.resolve())]
        for name in files:
            info = os.lstat(Path(folder) / name)
            found[str(Path(folder) / name)] = (info.st_size, info.st_mtime_ns)
    return found


def _edit(ws: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    file = ws / "projects" / name / "project.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    change(data)
    file.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace (``tmp_path / "ws"``) that no project may touch."""
    folder = tmp_path / "outside"
    (folder / "runs" / "run1").mkdir(parents=True)
    (folder / "runs" / "run1" / "train_config.yaml").write_text("epochs: 1\n", encoding="utf-8")
    (folder / "runs" / "run1" / "latest.pth").write_bytes(b"weights")
    (folder / "secret.txt").write_text("do not read\n", encoding="utf-8")
    return folder


@pytest.fixture
def voice(demo_workspace, tmp_path: Path):
    return create_project(tmp_path / "ws", "voice", demo_workspace.root / "v2" / "checkpoints")


def _link_runs_out(ws: Path, outside: Path) -> None:
    runs = ws / "projects" / "voice" / "runs"
    runs.rmdir()
    runs.symlink_to(outside / "runs", target_is_directory=True)


ESCAPES: dict[str, Callable[[Path, Path], None]] = {
    "folder-up-and-out": lambda ws, out: _edit(ws, "voice", lambda d: d["folders"].update(runs="../../../outside/runs")),
    "folder-absolute": lambda ws, out: _edit(ws, "voice", lambda d: d["folders"].update(runs=str(out / "runs"))),
    "folder-is-a-link-out": _link_runs_out,
    "output-absolute": lambda ws, out: _edit(ws, "voice", lambda d: d["steps"].update(
        train=_record(outputs={str(out / "runs" / "run1" / "latest.pth"): "sha256:x"}))),
    "output-up-and-out": lambda ws, out: _edit(ws, "voice", lambda d: d["steps"].update(
        train=_record(outputs={"../outside/secret.txt": "sha256:x"}))),
    "pending-out-dir-out": lambda ws, out: _edit(ws, "voice", lambda d: d["pending"].update(
        prepare={"at": 0.0, "when": "", "inputs": {}, "out_dir": str(out)})),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_a_project_owned_path_leading_out_of_the_workspace_is_refused(case, voice, outside, tmp_path, capsys):
    ws = tmp_path / "ws"
    ESCAPES[case](ws, outside)
    before = _snapshot(tmp_path, voice.folder)
    with pytest.raises(ProjectError) as refused:
        open_project(ws, "voice")
    assert "outside the workspace" in _one_line(str(refused.value)) or "link" in str(refused.value)
    assert project_cli(["show", "voice", "--workspace", str(ws)]) == 2
    assert "outside the workspace" in capsys.readouterr().err
    assert _snapshot(tmp_path, voice.folder) == before


def test_inputs_outside_the_workspace_are_never_hashed(voice, outside, tmp_path, monkeypatch):
    from trainer.project import digests

    ws = tmp_path / "ws"
    made = voice.dir("runs") / "run1" / "latest.pth"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"weights")
    (made.parent / "train_config.yaml").write_text("epochs: 1\n", encoding="utf-8")
    record_step(voice, "train", [made], [outside / "secret.txt"])  # a user-given input outside: recorded unread
    _edit(ws, "voice", lambda d: d["steps"]["train"]["inputs"].update(
        {str(outside / "runs" / "run1" / "latest.pth"): "sha256:planted"}))
    hashed: list[Path] = []
    real = digests.file_digest
    monkeypatch.setattr(digests, "file_digest", lambda path: hashed.append(Path(path)) or real(path))
    states = {state.step: state for state in step_states(open_project(ws, "voice"))}
    assert hashed and not [p for p in hashed if not p.resolve().is_relative_to(ws.resolve())], hashed
    assert states["train"].state == "done", states["train"]


def test_links_inside_the_projects_folders_leading_out_are_neither_recorded_nor_handed_on(voice, outside, tmp_path):
    ws = tmp_path / "ws"
    (voice.dir("runs") / "linked").symlink_to(outside / "runs" / "run1", target_is_directory=True)
    (voice.dir("manifests") / "manifest_20260101_000000.jsonl").symlink_to(outside / "secret.txt")
    project = open_project(ws, "voice")
    assert "train" not in project.steps and "proofread" not in project.steps
    assert defaults_for(project, "checkpoints")["runs"] == [] and defaults_for(project, "prepare")["input"] == ""


def test_a_base_model_outside_the_workspace_is_allowed_and_shown_as_such(voice, tmp_path, capsys):
    from webui.project.tab_project import project_view

    ws = tmp_path / "ws"
    assert "outside the workspace" in project_view(ws, "voice").summary
    assert project_cli(["show", "voice", "--workspace", str(ws)]) == 0
    assert "outside the workspace" in capsys.readouterr().out


def _prepared_manifest(demo_workspace, folder: Path) -> Path:
    shutil.copytree(demo_workspace.root / "v2" / "data", folder, ignore=shutil.ignore_patterns("val_*", "exact_*"),
                    dirs_exist_ok=True)
    return folder / "train_pairs.jsonl"


def test_opening_a_project_whose_prepared_data_lies_elsewhere_writes_only_in_its_folder(demo_workspace, voice,
                                                                                       tmp_path):
    ws = tmp_path / "ws"
    manifest = _prepared_manifest(demo_workspace, ws / "shared-prep")  # in the workspace, outside the project
    _edit(ws, "voice", lambda d: d["folders"].update(prepared="../../shared-prep"))
    record_step(load_project(ws, "voice"), "prepare", [manifest], [], {"pairs": 1})
    before = _snapshot(tmp_path, voice.folder)
    train = defaults_for(open_project(ws, "voice"), "train")
    assert _snapshot(tmp_path, voice.folder) == before
    assert train["val_manifest"] and all(Path(p).resolve().is_relative_to(voice.folder.resolve())
                                         for p in train["train_manifest"] + train["val_manifest"])


def test_split_prepared_never_writes_through_a_link_out(demo_workspace, voice, outside, tmp_path):
    from trainer.project.handoff import split_prepared

    manifest = _prepared_manifest(demo_workspace, voice.dir("prepared"))
    (manifest.parent / "split").symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path, voice.folder)
    assert split_prepared(manifest) == ([manifest], [])
    assert split_prepared(manifest, within=voice.folder) == ([manifest], [])
    assert _snapshot(tmp_path, voice.folder) == before


def test_the_lock_file_is_never_followed_out(voice, outside, tmp_path):
    ws = tmp_path / "ws"
    target = outside / "made-by-the-project"
    (voice.folder / ".project.lock").unlink(missing_ok=True)
    (voice.folder / ".project.lock").symlink_to(target)
    (voice.dir("recordings") / "a.wav").write_bytes(b"RIFF")  # opening records the recordings step
    with pytest.raises(ProjectError):
        open_project(ws, "voice")
    assert not target.exists()


# ----- two creates at once ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_two_creates_at_once_give_one_project_and_one_refusal(demo_workspace, tmp_path, monkeypatch):
    from trainer.project import layout

    models = {"first": demo_workspace.root / "v2" / "checkpoints", "second": demo_workspace.root / "v25" / "checkpoints"}
    both_checked = threading.Barrier(2, timeout=20)
    real = layout.generation_of_model_dir

    def after_both_looked(folder: Path):  # both creates have seen no project.json before either writes one
        both_checked.wait()
        return real(folder)

    monkeypatch.setattr(layout, "generation_of_model_dir", after_both_looked)
    results: dict[str, object] = {}

    def create(who: str) -> None:
        try:
            results[who] = create_project(tmp_path, "voice", models[who])
        except ProjectError as exc:
            results[who] = exc

    threads = [threading.Thread(target=create, args=(who,)) for who in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    made = {who: r for who, r in results.items() if not isinstance(r, Exception)}
    refused = {who: r for who, r in results.items() if isinstance(r, ProjectError)}
    assert len(made) == 1 and len(refused) == 1, results
    (winner, project), (_, refusal) = next(iter(made.items())), next(iter(refused.items()))
    assert "exists" in _one_line(str(refusal)) and "'voice'" in str(refusal)
    again = load_project(tmp_path, "voice")
    assert again.generation == project.generation and again.model_path == models[winner].resolve()
    assert sorted(p.name for p in again.folder.glob("prepared/*")) == [project.generation]


def test_recording_a_step_output_outside_the_workspace_is_refused_in_one_line(voice, outside, tmp_path, capsys):
    ws = tmp_path / "ws"
    code = project_cli(["record", "voice", "train", "--output", str(outside / "runs" / "run1" / "latest.pth"),
                        "--workspace", str(ws)])
    err = capsys.readouterr().err
    assert code == 2 and "outside the workspace" in _one_line(err) and load_project(ws, "voice").steps == {}
