"""``python -m trainer.project``: create, show and record, with one-line refusals (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainer.project import load_project
from trainer.project.cli import main

REPO = Path(__file__).resolve().parents[1]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_create_show_and_record_a_step_run_from_a_shell(demo_workspace, tmp_path: Path, capsys):
    ws = str(tmp_path)
    model = str(demo_workspace.root / "v25" / "checkpoints")
    code, out, _ = run(capsys, "create", "voice", "--model-dir", model, "--workspace", ws)
    assert code == 0 and "IndexTTS-2.5" in out
    manifest = tmp_path / "clips.jsonl"
    manifest.write_text('{"id": "a"}\n', encoding="utf-8")
    prepared = tmp_path / "projects" / "voice" / "prepared" / "2.5" / "pairs.jsonl"
    prepared.write_text('{"id": "a"}\n', encoding="utf-8")
    code, out, _ = run(capsys, "record", "voice", "prepare", "--output", str(prepared), "--input", str(manifest),
                       "--count", "pairs=1", "--workspace", ws)
    assert code == 0, out
    record = load_project(tmp_path, "voice").steps["prepare"]
    assert record["source"] == "cli" and record["counts"] == {"pairs": 1}
    assert record["inputs"] == {"clips.jsonl": record["inputs"]["clips.jsonl"]}  # workspace-relative
    code, out, _ = run(capsys, "show", "voice", "--json", "--workspace", ws)
    shown = {step["step"]: step["state"] for step in json.loads(out)["steps"]}
    assert code == 0 and shown["prepare"] == "done" and shown["train"] == "to do"
    code, out, _ = run(capsys, "show", "voice", "--workspace", ws)
    assert code == 0 and "next: Recordings" in out


def test_bad_input_is_one_error_line_and_exit_2(demo_workspace, tmp_path: Path, capsys):
    ws = str(tmp_path)
    model = str(demo_workspace.root / "v2" / "checkpoints")
    for argv, expected in ((["create", "my voice", "--model-dir", model], "not a safe folder name"),
                           (["create", "v", "--model-dir", str(tmp_path / "none")], "base model folder not found"),
                           (["show", "ghost"], "no project 'ghost'"),
                           (["record", "ghost", "train", "--output", "x"], "no project 'ghost'"),
                           (["record", "v", "dance", "--output", "x"], "invalid choice: 'dance'")):
        try:
            code, _, err = run(capsys, *argv, "--workspace", ws)
        except SystemExit as exit_:  # argparse refusals
            code, err = exit_.code, capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and expected in err and err.count("\n") == 1, (argv, err)
    assert run(capsys, "create", "v", "--model-dir", model, "--workspace", ws)[0] == 0
    code, _, err = run(capsys, "record", "v", "train", "--output", str(tmp_path / "gone.pth"), "--workspace", ws)
    assert code == 2 and "output not found" in err and load_project(tmp_path, "v").steps == {}
    code, _, err = run(capsys, "record", "v", "train", "--output", ws, "--count", "many", "--workspace", ws)
    assert code == 2 and "KEY=N" in err


def test_the_module_runs_as_a_command(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "trainer.project", "show", "nobody", "--workspace", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: no project 'nobody'") and not done.stdout
