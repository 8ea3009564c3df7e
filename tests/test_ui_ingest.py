"""The Data tab's "Recordings → clips" callbacks, called as plain functions (no browser).

The ingest job's command from the form (bad input is one line and starts nothing), the suggested ASR models,
the proofreading table (worst first, pages, filter), the selected clip's player and editor, delete / restore,
Save (a new manifest each time, with the edits, without the deleted clips), and the job's summary. The ingest
folder is made with the pipeline's stand-ins for silero and the recogniser (seconds on a CPU).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from data_tools.ingest.pipeline import IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, FakeAsr, tone_recording, tone_speech
from webui.data import ingest_panel, proofread_panel
from webui.form_inputs import InputProblem
from webui.jobs.job_view import job_view
from webui.jobs.report_jobs import JobResult

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with recordings/ and an ingest/ folder made from them: 4 sliced clips, 3 with transcripts
    (one in Latin letters, which the Amharic script gate rejects)."""
    recordings = tmp_path / "recordings"
    tone_recording(recordings / "spk1" / "long.wav", [2.0, 3.0, 2.5, 4.0], [0.8, 1.0])
    texts = ["ሰላም ለዓለም ቁጥር አንድ", "ሰላም ለዓለም ቁጥር ሁለት", "hello world number three"]
    (recordings / "spk2").mkdir()
    for k, text in enumerate(texts):
        sf.write(str(recordings / "spk2" / f"c{k}.wav"), tone_speech(2.5, 22050, seed=10 + k), 22050)
        (recordings / "spk2" / f"c{k}.txt").write_text(text, encoding="utf-8")
    run_ingest(IngestSettings(recordings, tmp_path / "ingest", language="am"), transcriber=FakeAsr(confidence=0.7),
               vad_model=EnergyVad())
    return tmp_path


# -- the job ----------------------------------------------------------------------------------------------


def test_suggested_models_are_named_with_their_licences():
    from data_tools.asr import SUGGESTED_AMHARIC_MODELS

    table = ingest_panel.suggestions_markdown()
    for model in SUGGESTED_AMHARIC_MODELS:
        row = next(line for line in table.splitlines() if f"`{model.model}`" in line)
        assert model.licence in row and f"| {'yes' if model.verified else 'no'} |" in row
    assert "None is bundled" in table
    assert ingest_panel.model_choices()[0] == ingest_panel.NO_MODEL
    assert ingest_panel.pick_model("facebook/mms-1b-all") == ("facebook/mms-1b-all", "amh")
    assert ingest_panel.pick_model(ingest_panel.NO_MODEL) == ("", "")


def test_downloaded_asr_folders_are_offered_before_the_suggestions(tmp_path: Path):
    """A folder the Models tab finished is offered by its path (nothing to fetch again), with its MMS language;
    an unfinished one is not offered."""
    from trainer.models.record import MODELS_DIR, write_record

    done = tmp_path / MODELS_DIR / "speech" / "facebook--mms-1b-all"
    partial = tmp_path / MODELS_DIR / "speech" / "other--ctc"
    for folder, complete, name in ((done, True, "facebook/mms-1b-all"), (partial, False, "other/ctc")):
        folder.mkdir(parents=True)
        write_record(folder, {"set": name, "title": name, "kind": "asr", "complete": complete})
    choices = ingest_panel.model_choices(tmp_path)
    assert choices[:2] == [ingest_panel.NO_MODEL, str(done)]
    assert str(partial) not in choices and "facebook/mms-1b-all" in choices
    assert ingest_panel.pick_model(str(done), tmp_path) == (str(done), "amh")


def _argv(workspace: Path, **fields) -> list[str]:
    values = {"input_text": "recordings", "out_dir": "ingest", "language": "am", "speaker": "", "asr_model": "",
              "asr_language": "", "device": "auto", "config": "", "tokenizer": "", **fields}
    return ingest_panel.ingest_argv("python", **values, workspace=workspace, report=workspace / "report.json")


def test_the_job_command_comes_from_the_form(workspace: Path):
    argv = _argv(workspace)
    assert argv[:6] == ["python", "-m", "webui.jobs.stdout_report", "--out", str(workspace / "report.json"), "--"]
    assert argv[6:] == ["data_tools.ingest", "run", "--input", str(workspace / "recordings"), "--out-dir",
                        str(workspace / "ingest"), "--language", "am", "--json"]
    hub = _argv(workspace, asr_model=" facebook/mms-1b-all ", asr_language="amh", device="cpu", speaker="Abebe")
    assert hub[hub.index("--asr-model") + 1] == "facebook/mms-1b-all" and hub[hub.index("--device") + 1] == "cpu"
    assert hub[hub.index("--asr-language") + 1] == "amh" and hub[hub.index("--speaker") + 1] == "Abebe"
    (workspace / "models" / "ctc").mkdir(parents=True)
    local = _argv(workspace, asr_model="models/ctc", language=ingest_panel.NO_LANGUAGE)
    assert local[local.index("--asr-model") + 1] == str(workspace / "models" / "ctc") and "--language" not in local
    assert ingest_panel.out_dir_of(local) == str(workspace / "ingest")


@pytest.mark.parametrize(("fields", "message"), [
    ({"input_text": "nowhere"}, r"^recordings not found: .*nowhere$"),
    ({"input_text": " "}, r"^give the recordings"),
    ({"out_dir": ""}, r"^give the ingest folder"),
    ({"asr_model": "./models/missing"}, r"^ASR model: no folder .*missing and not a model id"),
    ({"asr_model": "not an id"}, r"^ASR model: no folder"),
    ({"asr_model": "facebook/mms-1b-all", "asr_language": "am h"}, r"^ASR target language: 'am h'"),
    ({"tokenizer": "recordings/spk2/c0.txt"}, r"^the tokenizer is used with a config"),
    ({"config": "missing.yaml"}, r"^config not found"),
])
def test_bad_form_values_are_one_line_and_start_nothing(workspace: Path, fields: dict, message: str):
    with pytest.raises(InputProblem, match=message):
        _argv(workspace, **fields)
    from webui.context import StudioContext
    from webui.jobs.job_panel import start_action

    ctx = StudioContext.create(workspace)
    shown, result = start_action(ctx, ingest_panel.INGEST_JOB, lambda: _argv(workspace, **fields))
    assert result is None and "studio-badge" in shown and "\n" not in shown
    assert not ingest_panel.INGEST_JOB.folder(ctx).exists()


def _result(state: str, report: dict | None, error: str = "", exit_code: int | None = 0) -> JobResult:
    return JobResult(view=job_view(None, ""), run_id="r1", state=state, argv=("x", "--out-dir", "/w/ingest"),
                     exit_code=exit_code, report_text=None if report is None else json.dumps(report), error=error)


def test_the_summary_says_what_the_job_made_or_why_not():
    summary = {"out_dir": "/w/ingest", "sources": 2, "sources_done_before": 0, "clips": 9, "rejected": 3,
               "transcribed": 0, "hours": 0.01, "left_out_fragments": 1, "problems": ["a.m4a: m4a is not read"]}
    html = ingest_panel.summary_html(_result("finished", summary))
    assert "9 clip(s) from 2 recording(s)" in html and "3 rejected by the gates" in html
    assert "a.m4a: m4a is not read" in html and 'data-tone="warn"' in html
    failed = ingest_panel.summary_html(_result("failed", None, "/w/in: input not found", exit_code=2))
    assert "/w/in: input not found" in failed and "SLICED" not in failed
    assert ingest_panel.summary_html(None) == ""


# -- proofreading -----------------------------------------------------------------------------------------


def test_the_table_is_worst_first_a_page_at_a_time(workspace: Path):
    view = proofread_panel.page_view("ingest", 0, proofread_panel.ALL, 3, workspace)
    assert view.message == "" and list(view.table.columns) == proofread_panel.TABLE_COLUMNS
    assert len(view.table) == 3 and len(view.ids) == 3 and view.label.startswith("page 1 of 3 · 7 clip(s)")
    assert view.table["status"].iloc[0] == "rejected" and "script" in view.table["gates"].iloc[0]
    everything = [proofread_panel.page_view("ingest", page, "all", 3, workspace) for page in range(3)]
    assert sum(len(v.ids) for v in everything) == 7 and len({i for v in everything for i in v.ids}) == 7
    last = proofread_panel.page_view("ingest", 99, "all", 3, workspace)  # past the end: the last page
    assert last.page == 2 and last.ids == everything[2].ids
    rejected = proofread_panel.page_view("ingest", 0, "rejected", 20, workspace)
    assert set(rejected.table["status"]) == {"rejected"}
    assert set(proofread_panel.page_view("ingest", 0, "ok", 20, workspace).table["confidence"]) <= {"0.70", ""}


def test_a_folder_without_clips_is_one_line(workspace: Path):
    for folder, message in (("nowhere", "no clips yet"), ("", "give the ingest folder")):
        view = proofread_panel.page_view(folder, 0, "all", 20, workspace)
        assert message in view.message and view.table.empty and view.ids == []


def test_pick_play_edit_delete_restore_and_save(workspace: Path):
    view = proofread_panel.page_view("ingest", 0, "ok", 20, workspace)
    edited, deleted = view.ids[0], view.ids[1]
    row = list(view.table.iloc[0])
    assert proofread_panel.picked_id(view.ids, [0, 2], row) == edited
    assert proofread_panel.picked_id(view.ids, [1, 0], None) == deleted
    assert proofread_panel.picked_id(view.ids, [9, 0], None) is None

    message, clip = proofread_panel.select_clip("ingest", edited, workspace)
    assert message == "" and clip.clip_id == edited and clip.text and edited in clip.details
    with sf.SoundFile(io.BytesIO(clip.audio)) as sound:
        assert sound.frames > 0 and sound.samplerate >= 22050

    message, clip = proofread_panel.change_clip("text", "ingest", edited, "  የተስተካከለ   ጽሑፍ\n", workspace)
    assert "transcript of" in message and clip.text == "የተስተካከለ ጽሑፍ"
    message, _ = proofread_panel.change_clip("text", "ingest", edited, "   ", workspace)
    assert "empty transcript" in message
    message, clip = proofread_panel.change_clip("delete", "ingest", deleted, "", workspace)
    assert "deleted" in message and "DELETED" in clip.details
    message, _ = proofread_panel.change_clip("delete", "ingest", None, "", workspace)
    assert "pick a clip" in message
    message, _ = proofread_panel.change_clip("delete", "ingest", "no_such_clip", "", workspace)
    assert "no clip &#x27;no_such_clip&#x27; in " in message  # escaped in the badge

    message, path = proofread_panel.save_manifest("ingest", workspace)
    assert "MANIFEST SAVED" in message and Path(path).parent == workspace / "ingest" / "manifests"
    rows = {r["id"]: r for r in map(json.loads, Path(path).read_text(encoding="utf-8").splitlines())}
    assert rows[edited]["text"] == "የተስተካከለ ጽሑፍ" and deleted not in rows
    assert all((Path(path).parent / r["audio"]).is_file() and r["language"] == "am" for r in rows.values())

    # What a reload shows: the table from disk has the edits.
    shown = proofread_panel.page_view("ingest", 0, "all", 20, workspace)
    by_id = {r["id"]: r for r in shown.table.to_dict("records")}
    assert by_id[edited]["transcript"] == "የተስተካከለ ጽሑፍ" and by_id[edited]["status"] == "ok (edited)"
    assert by_id[deleted]["status"] == "deleted" and shown.ids[-1] == deleted  # deleted clips sink to the end

    proofread_panel.change_clip("restore", "ingest", deleted, "", workspace)
    _, second = proofread_panel.save_manifest("ingest", workspace)
    assert second != path and Path(path).is_file()
    assert deleted in {json.loads(line)["id"] for line in Path(second).read_text(encoding="utf-8").splitlines()}


def test_saving_nothing_is_refused(workspace: Path):
    view = proofread_panel.page_view("ingest", 0, "all", 20, workspace)
    for clip_id in view.ids:
        proofread_panel.change_clip("delete", "ingest", clip_id, "", workspace)
    message, path = proofread_panel.save_manifest("ingest", workspace)
    assert "no clip to save" in message and path == ""
    assert not (workspace / "ingest" / "manifests").exists()


# -- the page process and the demo -----------------------------------------------------------------------


def test_the_data_tab_builds_without_torch(tmp_path: Path):
    code = ("import sys, gradio as gr; from webui.context import StudioContext; from webui.data import tab_data\n"
            f"with gr.Blocks():\n    tab_data.build(StudioContext.create({str(tmp_path)!r}))\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["False", "False"], done.stdout + done.stderr[-2000:]


def test_demo_recordings_need_no_espeak(tmp_path: Path):
    from data_tools.ingest.subtitles import read_cues
    from demo.data import ASSETS
    from demo.recordings import demo_recordings_exist, write_demo_recordings

    sentences = (ASSETS / "amharic_sentences.txt").read_text(encoding="utf-8").splitlines()
    folder = write_demo_recordings(tmp_path, sentences) / "spk_abebe"
    assert demo_recordings_exist(tmp_path)
    cues = read_cues(folder / "story.srt")
    assert len(cues) == 6 and all(any("\u1200" <= ch <= "\u137f" for ch in cue.text) for cue in cues)
    for name in ("story.wav", "interview.wav"):
        info = sf.info(str(folder / name))
        assert info.samplerate == 22050 and info.duration > 8
    assert cues[-1].end < sf.info(str(folder / "story.wav")).duration


def test_an_edit_not_applied_yet_is_shown():
    assert proofread_panel.pending_note(None, "ሌላ", "ሰላም") == ""  # no clip picked
    assert proofread_panel.pending_note("c1", " ሰላም  ለዓለም ", "ሰላም ለዓለም") == ""  # spaces are tidied on save
    assert "NOT APPLIED" in proofread_panel.pending_note("c1", "ሰላም ዓለም", "ሰላም ለዓለም")


def test_the_job_transcribes_with_a_local_model_under_the_supervisor(tmp_path: Path):
    """The Start button's command, run for real by the studio's supervisor, with a tiny MMS-style model folder
    (clips with a .txt beside them: no voice activity needed, so this stays quick)."""
    from tests.speech_model_factory import LETTERS, build_mms_style_model
    from webui.context import StudioContext
    from webui.jobs.process_tools import wait_until
    from webui.jobs.report_jobs import job_result, start_job

    clips = tmp_path / "recordings" / "spk"
    clips.mkdir(parents=True)
    for k in range(2):
        sf.write(str(clips / f"c{k}.wav"), tone_speech(2.0 + k, 22050, seed=k), 22050)
        (clips / f"c{k}.txt").write_text(["ሰላም ለዓለም ቁጥር አንድ", "ዛሬ ጥሩ ቀን ነው እንገናኝ"][k], encoding="utf-8")
    build_mms_style_model(tmp_path / "models" / "mms", {"amh": LETTERS, "eng": "klmnop"})
    ctx = StudioContext.create(tmp_path)
    job = ingest_panel.INGEST_JOB
    argv = ingest_panel.ingest_argv(ctx.python, "recordings", "ingest", "am", "", "models/mms", "amh", "cpu", "", "",
                                    tmp_path, job.report_path(ctx))
    try:
        start_job(ctx, job, argv)
        assert wait_until(lambda: job_result(ctx, job).ended, 300, interval_s=0.5)
        result = job_result(ctx, job)
        assert result.state == "finished", result.view.log
        assert "2 clip(s) from 2 recording(s)" in ingest_panel.summary_html(result)
        assert "2 transcribed" in ingest_panel.summary_html(result)
        view = proofread_panel.page_view("ingest", 0, "all", 20, tmp_path)
        assert len(view.ids) == 2 and all(value != "" for value in view.table["confidence"])
        _, clip = proofread_panel.select_clip("ingest", view.ids[0], tmp_path)
        assert "ASR (" in clip.details and "transcript text:" in clip.details  # both texts shown
    finally:
        job.supervisor(ctx).force_stop()


def test_a_workspace_made_before_the_demo_recordings_gets_them(demo_workspace, tmp_path: Path):
    import shutil

    from demo.recordings import demo_recordings_exist
    from demo.workspace import build_demo

    assert demo_recordings_exist(demo_workspace.root)
    older = tmp_path / "older"
    shutil.copytree(demo_workspace.root, older, ignore=shutil.ignore_patterns("recordings", "runs", "jobs"))
    build_demo(older)
    assert demo_recordings_exist(older)
