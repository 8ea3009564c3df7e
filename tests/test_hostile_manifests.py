"""Files given as manifests that are no JSON-lines manifest at all: the checker, the pre-flight and the trainer
each refuse them in one line that names the file (and the line), from one rule (``data_tools.manifest_sniff``).

Exit contracts: the checker says "problems found" (1), never "a bug in the checker" (3); the pre-flight and the
trainer exit 2 with one ``error: ...`` line.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from data_tools.check_data import EXIT_PROBLEMS
from data_tools.check_data import main as check_main
from tests.test_train_cli import refusal
from tests.trainer_helpers import run_main
from trainer.options import options_to_argv
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight

TABLE_25 = Path(__file__).resolve().parents[2] / "shared/reference/indextts25/fixtures_audio/" \
    "multilingual_zh_ja_yue_char_del.tiktoken"
ENTRY = {"id": "a", "text": "hello", "codes": "codes/a.npy", "cond_mel": "mels/a.npy"}

# name -> (the file's bytes, what the one line must say, the line it must name or None for the whole file)
HOSTILE: dict[str, tuple[bytes, str, int | None]] = {
    "empty": (b"", "empty file", None),
    "newlines-only": (b"\n\n\n", "only blank lines", None),
    "cr-only": ((json.dumps(ENTRY) + "\r").encode() * 2, "CR only", 1),
    "utf16": ((json.dumps(ENTRY) + "\n").encode("utf-16"), "UTF-16", 1),
    "utf16-no-bom": ((json.dumps(ENTRY) + "\n").encode("utf-16-le"), "UTF-16", 1),
    "gzip": (gzip.compress((json.dumps(ENTRY) + "\n").encode()), "gzip", None),
    "binary": (bytes(range(256)) * 4, "binary data", 1),
    "json-array": (json.dumps([ENTRY, ENTRY]).encode() + b"\n", "a JSON array", 1),
    "pretty-printed": (json.dumps(ENTRY, indent=2).encode() + b"\n", "pretty-printed", 1),
    "overlong-line": (b"\n" + json.dumps({**ENTRY, "text": "x" * (3 << 20)}).encode() + b"\n", "longer than", 2),
    "no-known-fields": (b'{"name": "a", "wav": "a.wav"}\n', "no line is a training manifest entry", 1),
}


def _write(tmp_path: Path, case: str) -> tuple[Path, str]:
    data, _words, line = HOSTILE[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(data)
    return path, f"{path}:{line}: " if line is not None else f"{path}: "


def _one_line_with(text: str, where: str, words: str) -> None:
    hits = [line for line in text.splitlines() if where in line]
    assert len(hits) == 1 and words in hits[0], text


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_checker_reports_a_hostile_manifest_as_a_problem(tmp_path, case, capsys) -> None:
    path, where = _write(tmp_path, case)
    tokenizer = ["--tokenizer", str(TABLE_25)] if TABLE_25.is_file() else []  # once crashed: loaded as SentencePiece
    code = check_main(["--manifest", str(path), "--quiet", "--workers", "1", *tokenizer])
    out = capsys.readouterr()
    assert code == EXIT_PROBLEMS, out.out + out.err
    assert "Traceback" not in out.err
    _one_line_with(out.out, where, HOSTILE[case][1])


@pytest.fixture
def demo(tmp_path, demo_workspace):
    values = parse_argv(demo_workspace.train_argv(max_steps=2))
    values["output_dir"] = str(tmp_path / "run")
    return values


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_preflight_and_trainer_refuse_a_hostile_manifest_in_one_line(tmp_path, demo, case, capsys) -> None:
    path, where = _write(tmp_path, case)
    demo["train_manifest"] = [str(path)]
    report = run_preflight(demo)
    failed = {c.name: c.message for c in report.checks if not c.ok}
    assert list(failed) == ["data"], report.lines()
    assert failed["data"].startswith(where) and HOSTILE[case][1] in failed["data"]
    capsys.readouterr()
    assert run_main(options_to_argv(demo)) == 2
    line = refusal(capsys)
    assert line == f"error: {failed['data']}"
    assert not (Path(demo["output_dir"]) / "latest.pth").exists()


def test_a_broken_first_line_is_a_line_problem_not_a_file_refusal(tmp_path) -> None:
    from data_tools.manifest import manifest_format_refusal

    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "a",\n' + json.dumps(ENTRY) + "\n", encoding="utf-8")
    assert manifest_format_refusal(path) is None  # the checker reports line 1's malformed JSON, then checks line 2
    path.write_text('{"id": "a",\n  "text": "x"}\n', encoding="utf-8")
    assert "pretty-printed" in str(manifest_format_refusal(path))


@pytest.mark.skipif(not TABLE_25.is_file(), reason="the shared 2.5 table fixture is not here")
def test_the_2_5_table_with_a_codes_manifest_is_a_usage_error_not_a_checker_bug(tmp_path, capsys) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(ENTRY) + "\n", encoding="utf-8")
    assert check_main(["--manifest", str(path), "--quiet", "--workers", "1", "--tokenizer", str(TABLE_25)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --tokenizer {TABLE_25} cannot tokenise {path}"), err
