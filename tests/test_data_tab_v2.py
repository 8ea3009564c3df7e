"""The Data tab on IndexTTS2 paired manifests: check (with the padded code_len fix) and leak-free split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.pairs_factory import PairsBuilder


def paired_manifest(root: Path) -> Path:
    builder = PairsBuilder(root)
    for k in range(6):
        builder.utterance(f"u{k}", text_len=5, code_len=20)
    builder.utterance("padded", codes=np.concatenate([np.arange(10), np.full(30, 5)]).astype(np.int32))
    for k in range(6):
        builder.pair(f"u{k}", f"u{(k + 1) % 6}", target_duration=0.4)
    builder.pair("padded", "u0", target_duration=0.2)
    return builder.write("pairs.jsonl")


def test_check_then_write_corrected_manifest(tmp_path: Path) -> None:
    from webui.context import StudioContext
    from webui.data import check_section
    from webui.jobs.process_tools import wait_until
    from webui.jobs.report_jobs import job_result, start_job

    manifest = paired_manifest(tmp_path / "data")
    ctx = StudioContext.create(tmp_path)
    job = check_section.CHECK_JOB
    start_job(ctx, job, check_section.check_argv(ctx.python, f"{manifest}::am", "", "", "", "any", True, tmp_path,
                                            job.report_path(ctx)))
    assert wait_until(lambda: job_result(ctx, job).ended, 240, interval_s=0.1)
    view = check_section.check_view_of(job_result(ctx, job))
    assert "ERRORS" in view.verdict
    assert [(f["id"], f["old"], f["new"]) for f in view.code_len_fixes] == [("padded__u0", 40, 10)]
    assert "padded-code-len" in set(view.problems["code"])
    message = check_section.fix_code_len_action(view.code_len_fixes)
    fixed = manifest.with_name("pairs.codelen_fixed.jsonl")
    assert "WRITTEN" in message and str(fixed) in message
    assert json.loads(fixed.read_text(encoding="utf-8").splitlines()[-1])["target_code_len"] == 10
    assert json.loads(manifest.read_text(encoding="utf-8").splitlines()[-1])["target_code_len"] == 40
    assert "nothing to correct" in check_section.fix_code_len_action([])


def test_split_of_a_paired_manifest(tmp_path: Path) -> None:
    from webui.data import tab_data

    manifest = paired_manifest(tmp_path / "data")
    view = tab_data.split_action(str(manifest), str(tmp_path / "split"), 0.3, 1, 0, tmp_path)
    assert "SPLIT" in view.message, view.message
    train = [json.loads(x) for x in Path(view.train_path).read_text(encoding="utf-8").splitlines()]
    val = [json.loads(x) for x in Path(view.val_path).read_text(encoding="utf-8").splitlines()]
    train_targets = {row["target_id"] for row in train}
    assert val and not train_targets & ({row["target_id"] for row in val} | {row["prompt_id"] for row in val})


def test_prepare_v2_runs_supervised_into_pairs(demo_workspace, tmp_path: Path) -> None:
    from dataclasses import replace

    from generations.indextts2.ui import prepare_section as section
    from webui.context import StudioContext
    from webui.jobs.process_tools import wait_until

    ctx = StudioContext.create(tmp_path)
    form = replace(section.default_form(demo_workspace.root), out_dir="prepared", batch_seconds=6)
    message, view = section.start(ctx, form)
    assert "STARTED" in message, message
    assert wait_until(lambda: not section.poll(ctx).running, 240, interval_s=0.2)
    view = section.poll(ctx)
    assert "FINISHED" in view.status, view.log
    assert 'data-done="12" data-total="12"' in view.progress
    assert "data_tools.prepare_v2" in view.log and "pairs:" in view.log
    pairs = [json.loads(x) for x in (tmp_path / "prepared" / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 24 and all(p["speaker"] in p["target_id"] for p in pairs)


def test_prepare_v2_bad_form_starts_nothing(demo_workspace, tmp_path: Path) -> None:
    from dataclasses import replace

    from generations.indextts2.ui import prepare_section as section
    from webui.context import StudioContext

    ctx = StudioContext.create(tmp_path)
    form = replace(section.default_form(demo_workspace.root), out_dir=str(tmp_path / "out"))
    for change, expected in (({"codec": "missing.pth"}, "semantic codec not found"),
                             ({"input": "no/such"}, "input not found"),
                             ({"w2v_bert": "./nowhere"}, "w2v-BERT folder not found"),
                             ({"pairs_per_target": 0}, "pairs per target")):
        message, view = section.start(ctx, replace(form, **change))
        assert expected in message and not view.running
    assert not (tmp_path / "jobs" / "prepare_v2" / "run.json").exists()
    argv = replace(form, w2v_bert="facebook/w2v-bert-2.0").argv("python", tmp_path)
    assert argv[argv.index("--w2v-bert") + 1] == "facebook/w2v-bert-2.0"


def test_prepare_v2_on_several_processes_runs_under_torchrun(demo_workspace, tmp_path: Path) -> None:
    from dataclasses import replace

    from generations.indextts2.ui import prepare_section as section
    from webui.form_inputs import InputProblem

    form = replace(section.default_form(demo_workspace.root), out_dir=str(tmp_path / "out"))
    one = form.argv("python", tmp_path)
    assert one[:3] == ["python", "-m", "data_tools.prepare_v2"]
    four = replace(form, processes=4).argv("python", tmp_path)
    assert four[:7] == ["python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                        "--shutdown-timeout"]
    assert four[four.index("-m", 3):] == ["-m", *one[2:]]  # the same preparation command inside
    for bad in (0, 1.5):
        with pytest.raises(InputProblem, match="processes / GPUs must be a whole number"):
            replace(form, processes=bad).argv("python", tmp_path)
