"""The Data, Tokenizer and Checkpoints tabs' callbacks, called as plain functions (no browser).

Each callback must turn bad input into a one-line message (never raise), and turn library results into
the tables and plots the tab shows. The demo workspace is shared by the session and never modified:
tests that write use ``tmp_path`` as their workspace.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from webui import form_inputs, plots
from webui.jobs.job_view import job_view, progress_from_log

# -- shared helpers ----------------------------------------------------------------------------------------


def test_histogram_from_counts_keeps_bin_order_and_rejects_bad_edges():
    frame = plots.histogram_from_counts([0.5, 1.0, 2.0, 10.0], [3, 0, 7], unit="s")
    assert list(frame["bin"]) == ["0.5–1 s", "1–2 s", "2–10 s"]
    assert list(frame["count"]) == [3, 0, 7]
    with pytest.raises(ValueError, match="one more edge"):
        plots.histogram_from_counts([0, 1], [1, 2])


def test_badge_escapes_text_and_picks_tone():
    html = plots.badge_html("ERRORS", "<script>x</script>")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'data-tone="error"' in html
    assert 'data-tone="ok"' in plots.badge_html("COMPLETE")
    assert 'data-tone="warn"' in plots.badge_html("PARTIAL")


def test_paths_typed_in_boxes(tmp_path: Path):
    # One path per line (a comma may be part of a file name); quotes around a path are dropped.
    assert form_inputs.split_paths(" a.jsonl\n'b, c.jsonl'\n\n c.jsonl ") == ["a.jsonl", "b, c.jsonl", "c.jsonl"]
    assert form_inputs.resolve_path("", tmp_path) is None
    assert form_inputs.resolve_path("x/y.txt", tmp_path) == tmp_path / "x" / "y.txt"
    assert form_inputs.resolve_path("~/x", tmp_path) == Path.home() / "x"  # the trainer's rule for ~
    with pytest.raises(form_inputs.InputProblem, match=r"manifest not found: .*nope\.jsonl"):
        form_inputs.existing_file("nope.jsonl", tmp_path, "manifest")
    with pytest.raises(form_inputs.InputProblem, match="is not a file"):
        form_inputs.existing_file(str(tmp_path), tmp_path, "manifest")
    with pytest.raises(form_inputs.InputProblem, match=r"^manifest: cannot expand '~nosuchuser_zz/a.jsonl': no user"):
        form_inputs.existing_file("~nosuchuser_zz/a.jsonl", tmp_path, "manifest")
    with pytest.raises(form_inputs.InputProblem, match=r"^output directory: one path only, got a line break"):
        form_inputs.resolve_path("runs/a\nruns/b", tmp_path, "output directory")


def test_every_tab_says_one_line_for_an_unknown_user_in_a_path(tmp_path: Path):
    from webui.testing.listen import ListenError, resolve_model
    from webui.tokenizer.tokenizer_jobs import _model_prefix
    from webui.training.samples_view import gallery_for

    with pytest.raises(ListenError, match=r"^model: cannot expand '~nosuchuser_zz/run/latest.pth'"):
        resolve_model("~nosuchuser_zz/run/latest.pth", tmp_path)
    assert "cannot expand '~nosuchuser_zz/run'" in gallery_for("~nosuchuser_zz/run").note
    with pytest.raises(form_inputs.InputProblem, match=r"^output name: cannot expand"):
        _model_prefix("~nosuchuser_zz/am", tmp_path)


def test_key_value_frame_flattens_nested_facts():
    frame = plots.key_value_frame({"step": 5, "model": {"tensors": 3, "dtypes": ["float32", "float16"]},
                                   "loss": float("nan")})
    rows = dict(zip(frame["field"], frame["value"]))
    assert rows == {"step": "5", "model.tensors": "3", "model.dtypes": "float32, float16", "loss": ""}


def test_progress_from_a_tqdm_log_tail():
    tail = "loading dvae\nprepare:  10%|#         | 10/100 [00:01<00:09]\rprepare:  45%|####5     | 45/100 [00:03<00:04]"
    assert progress_from_log(tail) == (45, 100)
    assert progress_from_log("prepare: 2.5k/10.0k [00:03<00:09, 800it/s]") == (2500, 10000)
    assert progress_from_log("no bar here") is None


def test_job_view_reports_state_and_progress():
    class Status:
        state, summary, running = "failed", "failed: missing file: dvae.pth (exit 2)", False

    view = job_view(Status(), "prepare: 3/10 [00:01<00:02]\nerror: dvae.pth not found")
    assert "FAILED" in view.status and "missing file" in view.status and 'data-tone="error"' in view.status
    assert 'data-done="3"' in view.progress and not view.running


# -- Tokenizer tab -----------------------------------------------------------------------------------------


def test_sample_text_side_by_side(demo_workspace):
    from data_tools.text_tokenizer import TextTokenizer
    from webui.tokenizer.sample_compare import compare_tokenization

    text = "ሰላም ለዓለም። hello"
    view = compare_tokenization(text, str(demo_workspace.base_tokenizer), str(demo_workspace.extended_tokenizer),
                                "auto", demo_workspace.root)
    assert view.message == ""
    rows = view.summary.set_index("tokenizer")
    base_size = TextTokenizer(demo_workspace.base_tokenizer).vocab_size
    extended_ids = TextTokenizer(demo_workspace.extended_tokenizer).encode(text)
    assert view.extended_ids == " ".join(map(str, extended_ids))
    assert rows.loc["extended", "tokens"] == len(extended_ids)
    assert rows.loc["extended", "new ids"] == sum(1 for i in extended_ids if i >= base_size) > 0
    assert rows.loc["base", "new ids"] == 0
    assert rows.loc["base", "unknown"] > 0 and rows.loc["extended", "unknown"] == 0
    assert [label for _, label in view.extended_pieces].count("new") == rows.loc["extended", "new ids"]


def test_sample_text_with_a_missing_tokenizer_says_so(demo_workspace):
    from webui.tokenizer.sample_compare import compare_tokenization

    view = compare_tokenization("hello", "missing.model", str(demo_workspace.extended_tokenizer), "auto",
                                demo_workspace.root)
    assert "base tokenizer not found" in view.message and view.summary.empty


def run_job(ctx, job, argv, timeout_s: float = 240.0):
    """Start a report job and wait (bounded) until it has ended; its JobResult."""
    from webui.jobs.process_tools import wait_until
    from webui.jobs.report_jobs import job_result, start_job

    start_job(ctx, job, argv)
    assert wait_until(lambda: job_result(ctx, job).ended, timeout_s, interval_s=0.1), job_result(ctx, job).view.log
    return job_result(ctx, job)


def test_train_extend_verify_round(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.tokenizer import tokenizer_jobs as tt

    ctx = StudioContext.create(tmp_path)
    argv = tt.train_argv(ctx.python, str(demo_workspace.train_manifest), "am_small", 300, "bpe", "am", tmp_path)
    trained = tt.train_view_of(run_job(ctx, tt.TRAIN_JOB, argv))
    assert "TRAINED" in trained.message, trained.message
    assert Path(trained.model_path) == tmp_path / "tokenizers" / "am_small.model" and Path(trained.model_path).is_file()

    argv = tt.extend_argv(ctx.python, str(demo_workspace.base_tokenizer), trained.model_path, "am_small_ext", 0,
                          tmp_path, tt.EXTEND_JOB.report_path(ctx))
    extended, table = tt.extend_view_of(run_job(ctx, tt.EXTEND_JOB, argv))
    assert "EXTENDED" in extended.message, extended.message
    facts = dict(zip(table["what"], table["value"]))
    assert int(facts["final size"]) == int(facts["base pieces (ids unchanged)"]) + int(facts["appended pieces"])
    assert Path(extended.model_path) == tmp_path / "tokenizers" / "am_small_ext.model"

    argv = tt.verify_argv(ctx.python, extended.model_path, str(demo_workspace.base_tokenizer),
                          str(demo_workspace.val_manifest), "", tt.BASE_SAMPLE_TEXT, "", "", "auto", tmp_path,
                          tt.VERIFY_JOB.report_path(ctx))
    verified = tt.verify_view_of(run_job(ctx, tt.VERIFY_JOB, argv))
    assert "PASSED" in verified.verdict, verified.verdict
    statuses = dict(zip(verified.table["check"], verified.table["status"]))
    assert statuses["base_pieces_unchanged"] == "pass" and statuses["base_language_identical"] == "pass"
    assert statuses["manifest_max_text_tokens"] == "skipped"  # no manifest given: never claimed
    # The typed base-language lines reached the checker through a file beside the report.
    written = (tt.VERIFY_JOB.folder(ctx) / "samples_base.txt").read_text(encoding="utf-8").splitlines()
    assert written == tt.BASE_SAMPLE_TEXT.splitlines()


def test_verify_fails_on_swapped_tokenizers_and_names_the_check(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.tokenizer import tokenizer_jobs as tt

    ctx = StudioContext.create(tmp_path)
    argv = tt.verify_argv(ctx.python, str(demo_workspace.base_tokenizer), str(demo_workspace.extended_tokenizer),
                          "", "", "", "", "", "auto", demo_workspace.root, tt.VERIFY_JOB.report_path(ctx))
    result = run_job(ctx, tt.VERIFY_JOB, argv)
    assert result.exit_code == 1 and "FINISHED" in result.view.status  # a failed check is a verdict, not a crash
    view = tt.verify_view_of(result)
    assert "FAILED" in view.verdict and "sizes" in view.verdict
    assert dict(zip(view.table["check"], view.table["status"]))["sizes"] == "fail"


def test_tokenizer_actions_report_bad_input_in_one_line(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.jobs.job_panel import start_action
    from webui.tokenizer import tokenizer_jobs as tt

    ctx = StudioContext.create(tmp_path)

    def refusal(job, make_argv, *values) -> str:
        message, result = start_action(ctx, job, make_argv, *values)
        assert result is None and not (job.folder(ctx) / "run.json").exists()  # nothing started
        assert "\n" not in message
        return message

    def train(*v):
        return tt.train_argv(ctx.python, *v, tmp_path)

    assert "corpus file not found" in refusal(tt.TRAIN_JOB, train, "nope.txt", "x", 100, "bpe", "am")
    assert "vocab size must be positive" in refusal(tt.TRAIN_JOB, train, str(demo_workspace.train_manifest), "x",
                                                    0, "bpe", "am")
    def extend(*v):
        return tt.extend_argv(ctx.python, *v, tmp_path, tt.EXTEND_JOB.report_path(ctx))

    assert "no new-language tokenizer given" in refusal(tt.EXTEND_JOB, extend, str(demo_workspace.base_tokenizer),
                                                        "", "y", 0)
    def verify(*v):
        return tt.verify_argv(ctx.python, *v, tmp_path, tt.VERIFY_JOB.report_path(ctx))

    assert "extended tokenizer not found" in refusal(tt.VERIFY_JOB, verify, "gone.model", "", "", "", "", "", "",
                                                     "auto")
    assert "no base tokenizer given" in refusal(tt.VERIFY_JOB, verify, str(demo_workspace.extended_tokenizer), "",
                                                "", "", "", "", "", "auto")


# -- Data tab ----------------------------------------------------------------------------------------------


def test_find_manifests_skips_metrics_and_hidden_folders(tmp_path: Path):
    from webui.data import check_section

    for name in ("data/a.jsonl", "runs/demo/metrics.jsonl", ".hidden/b.jsonl", "jobs/prep/out/c.jsonl", "d.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    assert check_section.find_manifests(tmp_path) == [str(tmp_path / "data/a.jsonl"), str(tmp_path / "jobs/prep/out/c.jsonl")]
    assert check_section.add_manifest("a.jsonl", "b.jsonl") == "a.jsonl\nb.jsonl"
    assert check_section.add_manifest("a.jsonl\nb.jsonl", "a.jsonl") == "a.jsonl\nb.jsonl"


def check_job(ctx, train: str, val: str, tokenizer: str, config: str, workspace: Path):
    from webui.data import check_section

    argv = check_section.check_argv(ctx.python, train, val, tokenizer, config, "am", True, workspace,
                               check_section.CHECK_JOB.report_path(ctx))
    return run_job(ctx, check_section.CHECK_JOB, argv)


def test_check_clean_demo_data(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.data import check_section

    ctx = StudioContext.create(tmp_path)
    result = check_job(ctx, str(demo_workspace.train_manifest), str(demo_workspace.val_manifest),
                       str(demo_workspace.extended_tokenizer), str(demo_workspace.config), demo_workspace.root)
    assert 'data-done="' in result.view.progress and "FINISHED" in result.view.status
    view = check_section.check_view_of(result)
    assert "CLEAN" in view.verdict and 'data-tone="ok"' in view.verdict
    assert view.problems.empty
    train_lines = sum(1 for line in demo_workspace.train_manifest.read_text().splitlines() if line.strip())
    assert view.durations["count"].sum() == train_lines
    assert view.text_lengths["count"].sum() == train_lines
    assert set(view.speakers["split"]) == {"train", "val"} and len(set(view.speakers["speaker"])) == 3
    assert view.scripts.set_index(["split", "script"]).loc[("train", "ethiopic"), "share %"] == 100.0
    report = json.loads(Path(view.report_path).read_text())
    assert report["verdict"] == "clean" and Path(view.report_path) == check_section.CHECK_JOB.report_path(ctx)
    # The report read back is the checker's own: the library's answer, field for field.
    from data_tools.check_data import check_manifests

    direct = check_manifests([str(demo_workspace.train_manifest)], [str(demo_workspace.val_manifest)],
                             tokenizer=demo_workspace.extended_tokenizer, config=demo_workspace.config,
                             language="am")
    assert view.summary.splitlines()[:-1] == direct.summary_text().splitlines()[:-1]  # all but the timing


def test_check_reports_broken_lines_with_file_and_line(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.data import check_section

    lines = demo_workspace.train_manifest.read_text(encoding="utf-8").splitlines()[:5]
    lines[2] = '{"id": "broken", "text": '
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for folder in ("codes", "cond_mels"):
        shutil.copytree(demo_workspace.train_manifest.parent / folder, tmp_path / folder)
    ctx = StudioContext.create(tmp_path)
    result = check_job(ctx, str(broken), "", "", "", tmp_path)
    assert result.exit_code == 1 and "FINISHED" in result.view.status  # problems found is a verdict
    view = check_section.check_view_of(result)
    assert "ERRORS" in view.verdict and 'data-tone="error"' in view.verdict
    row = view.problems[view.problems["code"] == "malformed-json"].iloc[0]
    assert row["severity"] == "error" and row["file:line"] == f"{broken}:3"


def test_check_with_missing_manifest_gives_one_line(tmp_path: Path):
    from webui.context import StudioContext
    from webui.data import check_section
    from webui.jobs.job_panel import start_action

    ctx = StudioContext.create(tmp_path)

    def make_argv(*values):
        return check_section.check_argv(ctx.python, *values, tmp_path, check_section.CHECK_JOB.report_path(ctx))

    message, result = start_action(ctx, check_section.CHECK_JOB, make_argv, "nope.jsonl", "", "", "", "am", True)
    assert "manifest not found" in message and "\n" not in message and result is None
    message, _ = start_action(ctx, check_section.CHECK_JOB, make_argv, "", "", "", "", "am", True)
    assert "give at least one training manifest" in message
    assert not (check_section.CHECK_JOB.folder(ctx) / "run.json").exists()  # nothing started


def test_a_job_report_is_read_back_into_its_dataclasses_or_refused_in_one_line():
    from data_tools.check_report import DataReport, Problem, SplitStats
    from webui.dataclass_json import from_json

    report = DataReport(verdict="errors", errors=[Problem("error", "x", "m.jsonl:3", "bad")], warnings=[],
                        problem_counts={"x": 1}, train=SplitStats(name="train", entries=3), val=None, leakage={},
                        settings={})
    assert from_json(DataReport, json.loads(json.dumps(report.to_json()))) == report
    with pytest.raises(ValueError, match=r"^report\.errors: expected a list"):
        from_json(DataReport, {**report.to_json(), "errors": "nope"})


def test_split_then_use_it(demo_workspace, tmp_path: Path):
    from data_tools.check_data import check_manifests
    from webui.data import tab_data

    view = tab_data.split_action(str(demo_workspace.train_manifest), str(tmp_path / "split"), 0.1, 7, 0, tmp_path)
    assert "SPLIT" in view.message, view.message
    counts = dict(zip(view.table["side"], view.table["entries"]))
    total = sum(1 for line in demo_workspace.train_manifest.read_text().splitlines() if line.strip())
    assert counts["train"] + counts["val"] == total and counts["val"] > 0
    again = tab_data.split_action(str(demo_workspace.train_manifest), str(tmp_path / "again"), 0.1, 7, 0, tmp_path)
    def ids(path: str) -> list[str]:
        return [json.loads(line)["id"] for line in Path(path).read_text(encoding="utf-8").splitlines()]

    assert ids(again.val_path) == ids(view.val_path)  # same seed, same split
    assert not set(ids(view.val_path)) & set(ids(view.train_path))
    checked = check_manifests([view.train_path], [view.val_path], language="am")
    assert checked.verdict != "errors"  # relative paths were rebased, nothing leaks


def test_split_bad_input_in_one_line(tmp_path: Path):
    from webui.data import tab_data

    assert "manifest not found" in tab_data.split_action("nope.jsonl", "out", 0.1, 0, 0, tmp_path).message
    (tmp_path / "m.jsonl").write_text("{}\n")
    assert "val share must be" in tab_data.split_action("m.jsonl", "out", 1.5, 0, 0, tmp_path).message


def _speech_folder(root: Path) -> Path:
    import numpy as np
    import soundfile as sf

    for speaker in ("spk_a", "spk_b"):
        (root / speaker).mkdir(parents=True)
        for i, text in enumerate(("ሰላም ለዓለም", "ይህ ምሳሌ ነው", "አመሰግናለሁ")):
            rate, seconds = 16000, 0.8 + 0.2 * i + (0.1 if speaker == "spk_b" else 0.0)
            t = np.arange(int(rate * seconds)) / rate
            noise = np.random.default_rng(i).standard_normal(t.size) * 0.05
            sf.write(root / speaker / f"u{i}.wav", (0.3 * np.sin(2 * np.pi * (180 + 40 * i) * t) + noise), rate)
            (root / speaker / f"u{i}.txt").write_text(text, encoding="utf-8")
    return root


def _wait_until_done(ctx, timeout_s: float = 180.0):
    from webui.data import tab_data
    from webui.jobs.process_tools import wait_until

    wait_until(lambda: not tab_data.poll_preprocess(ctx).running, timeout_s, interval_s=0.2)
    return tab_data.poll_preprocess(ctx)


def test_preprocessing_runs_supervised_with_progress_and_log(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.data import tab_data

    ctx = StudioContext.create(tmp_path)
    audio = _speech_folder(tmp_path / "audio")
    message, view = tab_data.start_preprocess(ctx, str(audio), "prepared", str(demo_workspace.config), "", 1, 0.5,
                                              None, "am", "", "cpu")
    assert "STARTED" in message, message
    view = _wait_until_done(ctx)
    assert not view.running and "FINISHED" in view.status, view.log
    assert 'data-done="6" data-total="6"' in view.progress
    assert "manifest:" in view.log and "data_tools.preprocess" in view.log
    from data_tools.check_data import check_manifests

    checked = check_manifests([str(tmp_path / "prepared" / "manifest.jsonl")], [], config=demo_workspace.config,
                              language="am")
    assert checked.verdict != "errors", checked.summary_text()


def test_preprocessing_bad_input_starts_nothing(demo_workspace, tmp_path: Path):
    from webui.context import StudioContext
    from webui.data import tab_data

    ctx = StudioContext.create(tmp_path)
    message, view = tab_data.start_preprocess(ctx, "no/such/folder", "out", str(demo_workspace.config), "", 1, 0.5,
                                              None, "am", "", "cpu")
    assert "input not found" in message and not view.running and "IDLE" in view.status
    message, _ = tab_data.start_preprocess(ctx, str(tmp_path), "out", "missing.yaml", "", 1, 0.5, None, "am", "",
                                           "cpu")
    assert "config not found" in message
    assert not (tmp_path / "jobs" / "preprocess" / "run.json").exists()


# -- Checkpoints tab ---------------------------------------------------------------------------------------


@pytest.fixture
def run_dir(tmp_path: Path, demo_workspace) -> Path:
    """An output directory with model_step10/20, latest and best, recording the demo's base tokenizer."""
    from data_tools.fileio import sha256_file
    from tests.checkpoint_factory import make_checkpoint, trained_state
    from trainer.checkpoints import CheckpointManager

    output_dir = tmp_path / "runs" / "tiny"
    tokenizer = demo_workspace.base_tokenizer
    record = {"path": str(tokenizer), "sha256": sha256_file(tokenizer), "vocab_size": 40}
    manager = CheckpointManager(output_dir, keep=3)
    state = trained_state()
    for step in (10, 20):
        manager.save(make_checkpoint(step, state=state, tokenizer=record), step, is_best=step == 10)
    return output_dir


def test_list_newest_first_and_feeds_the_picker(run_dir: Path, tmp_path: Path):
    from webui.checkpoints import rows as ck_rows
    from webui.context import StudioContext

    assert str(run_dir) in ck_rows.find_output_dirs(tmp_path)
    view = ck_rows.list_view(str(run_dir), tmp_path)  # at once, from the files' metadata
    assert list(view.table.columns) == ck_rows.LIST_COLUMNS
    assert set(view.table["file"]) == {"latest.pth", "best.pth", "model_step10.pth", "model_step20.pth"}
    assert view.table["step"].iloc[0] == 20 and view.table["step"].iloc[-1] == 10
    assert [Path(p).name for p in view.paths] == list(view.table["file"])
    assert set(view.table["model"]) == {"IndexTTS-1.5"} and set(view.table["verdict"]) == {ck_rows.PENDING}

    ctx = StudioContext.create(tmp_path)
    result = run_job(ctx, ck_rows.LIST_JOB, ck_rows.list_argv(ctx.python, str(run_dir), tmp_path, ck_rows.LIST_JOB.report_path(ctx)))
    verified = ck_rows.list_view_of(result, tmp_path)
    assert list(verified.table["verdict"]) == ["COMPLETE"] * 4  # complete training checkpoints, nothing less
    assert verified.paths == view.paths


def test_list_of_a_missing_folder_says_so(tmp_path: Path):
    from webui.checkpoints import rows as ck_rows

    view = ck_rows.list_view("runs/none", tmp_path)
    assert "output directory not found" in view.message and view.table.empty and view.paths == []
    with pytest.raises(form_inputs.InputProblem, match="output directory not found"):
        ck_rows.list_argv("python", "runs/none", tmp_path, tmp_path / "r.json")


def test_verify_inspect_export(run_dir: Path, tmp_path: Path):
    from webui.checkpoints import tools as ck_tools
    from webui.context import StudioContext

    ctx = StudioContext.create(tmp_path)
    latest = str(run_dir / "latest.pth")
    verified = ck_tools.verify_view_of(run_job(ctx, ck_tools.VERIFY_JOB, ck_tools.verify_argv(
        ctx.python, latest, "", "", tmp_path, ck_tools.VERIFY_JOB.report_path(ctx))))
    components = dict(zip(verified.table["component"], verified.table["status"]))
    assert components["model weights"] == "ok" and components["optimizer"] == "ok"
    assert "COMPLETE" in verified.verdict and "PARTIAL" not in verified.verdict

    message, facts = ck_tools.inspect_view_of(run_job(ctx, ck_tools.INSPECT_JOB, ck_tools.inspect_argv(
        ctx.python, latest, tmp_path, ck_tools.INSPECT_JOB.report_path(ctx))))
    rows = dict(zip(facts["field"], facts["value"]))
    assert "INSPECTED" in message and rows["step"] == "20" and rows["kind"] == "studio"

    out = tmp_path / "export"

    def export(safetensors: bool):
        argv = ck_tools.export_argv(ctx.python, latest, str(out), "fp16", safetensors, "", "", tmp_path,
                              ck_tools.EXPORT_JOB.report_path(ctx))
        return ck_tools.export_view_of(run_job(ctx, ck_tools.EXPORT_JOB, argv))

    message, files = export(True)
    assert "EXPORTED" in message, message
    written = {Path(f).name for f in files["file"] if not f.startswith("note:")}
    assert written == {"gpt.pth", "gpt.safetensors", "config.yaml", "bpe.model", "LICENSE-NOTICE", "MODEL_CARD.md"}
    assert all((out / name).is_file() for name in written)
    again, _ = export(False)
    assert "already holds" in again and 'data-tone="error"' in again  # never overwrites an earlier export


def test_checkpoint_actions_report_bad_input_in_one_line(tmp_path: Path):
    from webui.checkpoints import tools as ck_tools
    from webui.context import StudioContext

    ctx = StudioContext.create(tmp_path)
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint at all")
    result = run_job(ctx, ck_tools.VERIFY_JOB, ck_tools.verify_argv(ctx.python, str(garbage), "", "", tmp_path,
                                                         ck_tools.VERIFY_JOB.report_path(ctx)))
    assert result.exit_code == 2 and "INVALID" in ck_tools.verify_view_of(result).verdict  # a verdict, with its report
    with pytest.raises(form_inputs.InputProblem, match="checkpoint not found"):
        ck_tools.verify_argv(ctx.python, "gone.pth", "", "", tmp_path, ck_tools.VERIFY_JOB.report_path(ctx))
    result = run_job(ctx, ck_tools.INSPECT_JOB, ck_tools.inspect_argv(ctx.python, str(garbage), tmp_path,
                                                           ck_tools.INSPECT_JOB.report_path(ctx)))
    message, table = ck_tools.inspect_view_of(result)
    assert result.report_text is None and table.empty  # a refusal prints only its error line (stderr)
    assert "not a loadable checkpoint" in message and "\n" not in message
    result = run_job(ctx, ck_tools.EXPORT_JOB, ck_tools.export_argv(ctx.python, str(garbage), "", "bf16", False, "", "",
                                                         tmp_path, ck_tools.EXPORT_JOB.report_path(ctx)))
    assert 'data-tone="error"' in ck_tools.export_view_of(result)[0]


def test_repair_an_indextts2_community_checkpoint_into_a_new_file_beside_it(demo_workspace, tmp_path: Path):
    import torch

    from data_tools.config import load_config
    from data_tools.text_tokenizer import TextTokenizer
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
    from tests.checkpoint_factory import community_checkpoint, trained_state
    from webui.checkpoints import rows as ck_rows
    from webui.checkpoints import tools as ck_tools
    from webui.context import StudioContext

    v2 = DemoV2Paths.under(demo_workspace.root)
    tokens = TextTokenizer(v2.extended_tokenizer).vocab_size
    gpt = dict(load_config(v2.config)["gpt"], number_text_tokens=tokens)
    run = tmp_path / "runs" / "community"
    run.mkdir(parents=True)
    source = run / "model_step40.pth"
    torch.save(community_checkpoint(gpt, state=trained_state(gpt)), source)
    before = source.read_bytes()
    listed = ck_rows.list_view(str(run), tmp_path)
    assert list(listed.table["model"]) == ["IndexTTS2"] and list(listed.table["kind"]) == ["step"]

    ctx = StudioContext.create(tmp_path)
    argv = ck_tools.repair_argv(ctx.python, str(source), "", str(v2.config), str(v2.extended_tokenizer), 0, tmp_path,
                          ck_tools.REPAIR_JOB.report_path(ctx))
    assert argv[argv.index("--out", argv.index("repair")) + 1] == str(run / "model_step40_repaired.pth")
    message, table = ck_tools.repair_view_of(run_job(ctx, ck_tools.REPAIR_JOB, argv))
    assert "REPAIRED" in message and "model_step40_repaired.pth" in message, message
    lines = table.groupby("what")["detail"].apply(list).to_dict()
    assert any("model weights" in line for line in lines["kept"])
    assert any("model config from --config" in line for line in lines["supplied"])
    assert any(line.startswith("RNG state missing: resume will not be bit-exact") for line in lines["lost"])
    assert lines["new file"] == [f"{run / 'model_step40_repaired.pth'}: PARTIAL"]
    assert source.read_bytes() == before  # the original is never written
    assert ck_tools.default_repair_path(source) == run / "model_step40_repaired_2.pth"  # the next one never overwrites
    listed = ck_rows.list_view(str(run), tmp_path)
    assert set(listed.table["model"]) == {"IndexTTS2"} and len(listed.table) == 2

    # Without the config it was trained from, the refusal says what is needed, in one line.
    argv = ck_tools.repair_argv(ctx.python, str(source), "again.pth", "", "", 0, tmp_path, ck_tools.REPAIR_JOB.report_path(ctx))
    message, table = ck_tools.repair_view_of(run_job(ctx, ck_tools.REPAIR_JOB, argv))
    assert "pass --config" in message and table.empty and not (run / "again.pth").exists()


def test_a_running_job_stops_and_says_so(tmp_path: Path):
    from webui.context import StudioContext
    from webui.jobs.process_tools import wait_until
    from webui.jobs.report_jobs import ReportJob, job_result, start_job, stdout_report_argv, stop_job

    ctx = StudioContext.create(tmp_path)
    job = ReportJob("endless")
    # A module that keeps printing until stopped stands in for a long check.
    start_job(ctx, job, stdout_report_argv(ctx.python, job.report_path(ctx), "timeit", "-n", "1000000000", "pass"))
    assert wait_until(lambda: "timeit" in job_result(ctx, job).view.log and job_result(ctx, job).view.running, 60)
    with pytest.raises(Exception, match="in use by a running process"):
        start_job(ctx, job, [ctx.python, "-c", "pass"])  # one run at a time per job
    stopped = stop_job(ctx, job)
    assert stopped.ended and stopped.report_text is None and stopped.error == "stopped before it finished"
    assert not job.report_path(ctx).exists() and not job.report_path(ctx).with_name("report.json.partial").exists()


# -- the tabs build ----------------------------------------------------------------------------------------


def test_tabs_build_with_their_element_ids(demo_workspace):
    import gradio as gr

    from webui.checkpoints import tab_checkpoints
    from webui.context import StudioContext
    from webui.data import tab_data
    from webui.tokenizer import tab_tokenizer
    from webui.training import tab_training

    ctx = StudioContext.create(demo_workspace.root)
    with gr.Blocks() as blocks:
        for module in (tab_data, tab_tokenizer, tab_training, tab_checkpoints):
            with gr.Tab(module.__name__):
                module.build(ctx)
    ids = {block.elem_id for block in blocks.blocks.values() if getattr(block, "elem_id", None)}
    expected = {"data-check-run", "data-check-verdict", "data-check-problems", "data-check-durations",
                "data-check-job-status", "data-check-job-stop", "data-check-job-log",
                "tok-verify-run", "tok-verify-table", "tok-verify-verdict", "tok-sample-table", "tok-train-job-status",
                "tok-extend-job-status", "tok-verify-job-status",
                "train-model-version", "train-preset", "opt-config",
                "ckpt-list-run", "ckpt-list-table", "ckpt-job-status", "ckpt-verify-run", "ckpt-verify-verdict",
                "ckpt-export-run", "ckpt-repair-run", "ckpt-repair-table", "ckpt-job-stop", "ckpt-job-log"}
    assert expected <= ids


def test_every_field_label_names_one_field_in_its_tab(demo_workspace):
    """A screen reader, or a test that finds fields as a person does, tells the fields of a tab apart by label."""
    import collections
    import importlib

    import gradio as gr

    from webui import studio
    from webui.context import StudioContext

    ctx = StudioContext.create(demo_workspace.root)
    for title, module, _elem in studio.TABS:
        with gr.Blocks() as blocks:
            importlib.import_module(module).build(ctx)
        labels = collections.Counter(block.label for block in blocks.blocks.values()
                                     if isinstance(block, gr.components.FormComponent) and block.label)
        assert [label for label, count in labels.items() if count > 1] == [], title


def test_every_tab_builds_in_short_named_pieces():
    import ast

    from webui import studio

    for _, module_name, _ in studio.TABS:
        path = Path(__file__).resolve().parents[1] / (module_name.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "build":
                length = node.end_lineno - node.lineno + 1
                assert length <= 80, f"{module_name}.build is {length} lines: split it into named builders"


# -- every tab is part of the studio ---------------------------------------------------------------------------


def test_a_tab_that_cannot_be_imported_or_built_stops_the_studio_naming_it(tmp_path: Path, monkeypatch):
    import sys
    import types

    from webui import studio
    from webui.context import StudioContext

    ctx = StudioContext.create(tmp_path)
    with pytest.raises(studio.TabError) as missing:
        studio.build_studio(ctx, tabs=(("Ghost", "webui.tab_ghost_that_does_not_exist", "tab-ghost"),))
    message = str(missing.value)
    assert message.startswith("the Ghost tab (webui.tab_ghost_that_does_not_exist) failed to import: "
                              "ModuleNotFoundError") and "\n" not in message

    broken = types.ModuleType("webui_test_broken_tab")

    def build(_ctx):
        raise ValueError("no such\ncomponent")

    broken.build = build
    monkeypatch.setitem(sys.modules, "webui_test_broken_tab", broken)
    with pytest.raises(studio.TabError) as failed:
        studio.build_studio(ctx, tabs=(("Broken", "webui_test_broken_tab", "tab-broken"),))
    message = str(failed.value)
    assert message.startswith("the Broken tab (webui_test_broken_tab) failed to build: ValueError: no such component")
    assert "tests/test_ui_tabs.py:" in message and "\n" not in message  # where it broke


def test_the_studio_has_all_seven_tabs(demo_workspace):
    from webui import studio
    from webui.context import StudioContext

    blocks = studio.build_studio(StudioContext.create(demo_workspace.root))
    ids = {block.elem_id for block in blocks.blocks.values() if getattr(block, "elem_id", None)}
    assert {elem_id for _, _, elem_id in studio.TABS} <= ids
    titles = [title for title, _, _ in studio.TABS]
    assert titles == ["Project", "Data", "Tokenizer", "Training", "Checkpoints", "Test", "Listen", "Models", "System"]


def test_a_job_panels_start_and_timer_take_turns_so_a_late_tick_cannot_switch_the_timer_off(demo_workspace):
    """A tick that read the job before Start launched it must not answer after Start (then the timer stopped and the
    result never showed, under load in CI): every event that switches a job timer on shares one queue slot of
    limit 1 with that timer's ticks."""
    import importlib

    import gradio as gr

    from webui import studio
    from webui.context import StudioContext

    ctx = StudioContext.create(demo_workspace.root)
    checked = 0
    for title, module, _elem in studio.TABS:
        with gr.Blocks() as blocks:
            importlib.import_module(module).build(ctx)
        timers = {block._id for block in blocks.blocks.values() if isinstance(block, gr.Timer)}
        ticks = {}
        for dep in blocks.fns.values():
            for block_id, event in ((t[0], t[1]) for t in dep.targets):
                # the Training tab's poller runs unqueued and never switches itself off (it only slows down)
                if event == "tick" and block_id in timers and dep.queue is not False \
                        and block_id in {o._id for o in dep.outputs}:  # a tick that can switch its timer off
                    ticks[block_id] = dep
        for dep in blocks.fns.values():
            started = [o._id for o in dep.outputs if o._id in ticks and any(t[1] == "click" for t in dep.targets)]
            for timer_id in started:
                tick = ticks[timer_id]
                assert dep.concurrency_id == tick.concurrency_id and dep.concurrency_limit == 1, title
                assert tick.concurrency_limit == 1, title
                checked += 1
    assert checked >= 12  # every report job's panel (data checks, tokenizer, checkpoints...), preparation, Test


def test_every_form_fill_and_every_project_pick_take_turns_so_a_slow_load_cannot_switch_the_project_back(
        demo_workspace):
    """Under load the page's first fill (from the project it opened on) answered after a project created in the page
    and set the picker back, which switched the session to the old project (the 2.5 project walk failed so in a full
    run). The queue runs up to four calls of one function at once, so each fill from the project stamp runs one at a
    time with the newest stamp last, and every event that writes the project picker shares one turn."""
    import gradio as gr

    from webui.context import StudioContext
    from webui.studio import build_studio

    ctx = StudioContext.create(demo_workspace.root)
    studio = build_studio(ctx)
    stamp = ctx.project_stamp._id
    fills = [dep for dep in studio.fns.values() if (stamp, "change") in {(t[0], t[1]) for t in dep.targets}]
    assert len(fills) >= 5  # the Project tab, ingest, preparation, data checks, tokenizer, training
    for dep in fills:
        assert dep.concurrency_limit == 1 and dep.trigger_mode == "always_last", dep.fn
    picker = next(b for b in studio.blocks.values() if isinstance(b, gr.Dropdown) and b.elem_id == "project-pick")
    writers = [dep for dep in studio.fns.values() if picker._id in {o._id for o in dep.outputs}]
    assert len(writers) >= 3  # the page's fill, Create, Refresh
    assert len({dep.concurrency_id for dep in writers}) == 1
    assert all(dep.concurrency_limit == 1 for dep in writers)
    picks = [dep for dep in studio.fns.values() if (picker._id, "change") in {(t[0], t[1]) for t in dep.targets}]
    assert picks and all(dep.concurrency_id == writers[0].concurrency_id for dep in picks)
    # The page's load sets the session's project in the same turn, and leaves a project picked before it answered.
    load = next(dep for dep in studio.fns.values() if any(t[1] == "load" for t in dep.targets)
                and ctx.project_stamp._id in {o._id for o in dep.outputs})
    assert load.concurrency_id == writers[0].concurrency_id and load.concurrency_limit == 1
    assert all(isinstance(value, type(gr.skip())) for value in load.fn({"project": "mine", "records": []}))
    name, opened = load.fn(None)
    assert opened["project"] == name and opened["cause"] == "load"


def test_the_checkpoints_tab_has_one_stop_one_log_and_one_status_for_all_its_tools(demo_workspace):
    """Issue 40: six tools each repeated a red Stop and an empty Log drawer; now one panel shows whichever ran."""
    import gradio as gr

    from webui.checkpoints import tab_checkpoints
    from webui.context import StudioContext

    ctx = StudioContext.create(demo_workspace.root)
    with gr.Blocks() as blocks:
        tab_checkpoints.build(ctx)
    buttons = [b for b in blocks.blocks.values() if isinstance(b, gr.Button)]
    assert [b.elem_id for b in buttons if b.value == "Stop"] == ["ckpt-job-stop"]
    logs = [b.elem_id for b in blocks.blocks.values() if isinstance(b, gr.Textbox) and (b.elem_id or "").endswith("-log")]
    assert logs == ["ckpt-job-log"]
    timers = [b for b in blocks.blocks.values() if isinstance(b, gr.Timer)]
    assert len(timers) == 8  # each tool still polls its own job: List, Verify, Inspect, Repair, Export, Evaluate...
