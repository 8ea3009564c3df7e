"""bench/: headlines are recorded for run_all, and run_all's table lands between README's markers only."""

from __future__ import annotations

import json

import pytest

from bench import run_all
from bench.report import RESULTS_ENV, headline


def test_headline_prints_and_records_one_json_line(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(results))
    headline("demo", "trainer / bare", 0.91, "x", ">= 0.95", False, "3 repeats")
    headline("demo", "codes/s", 120.0, "codes/s")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "RESULT trainer / bare: 0.91 x  (goal >= 0.95)  [goal NOT met]  3 repeats"
    assert out[1] == "RESULT codes/s: 120 codes/s"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["met"] for r in rows] == [False, None] and rows[0]["goal"] == ">= 0.95"


def test_table_marks_goals_and_problems():
    bench = run_all.Bench("train_throughput")
    rows = [{"measure": "trainer / bare", "value": 0.97, "unit": "x", "goal": ">= 0.95", "met": True, "note": ""},
            {"measure": "padding", "value": 15.4, "unit": "%", "goal": "<= 10%", "met": False, "note": "demo"}]
    text = run_all.table([(bench, rows, "", 1.0), (run_all.Bench("gpu_mfu"), [], "not run: needs a CUDA GPU", 0.0)])
    assert "| train_throughput | trainer / bare | 0.97 x | >= 0.95 | yes |" in text
    assert "| train_throughput | padding | 15.4 % (demo) | <= 10% | **no** |" in text
    assert "| gpu_mfu | - | not run: needs a CUDA GPU | - | - |" in text


def test_readme_table_replaces_only_the_marked_block(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{run_all.START}\nold table\n{run_all.END}\noutro\n", encoding="utf-8")
    monkeypatch.setattr(run_all, "README", readme)
    run_all.write_readme("| new |")
    assert readme.read_text(encoding="utf-8") == f"intro\n{run_all.START}\n| new |\n{run_all.END}\noutro\n"
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="markers"):
        run_all.write_readme("| new |")


def test_every_listed_benchmark_exists_and_the_readme_has_the_markers():
    missing = [b.name for b in run_all.BENCHES if not (run_all.REPO / "bench" / f"{b.name}.py").exists()]
    assert missing == [], missing
    text = run_all.README.read_text(encoding="utf-8")
    assert run_all.START in text and run_all.END in text
