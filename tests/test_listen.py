"""The studio's ears (issue 11 item 3): the Test tab's logic and jobs, and the Training tab's samples view.

A private copy of the demo workspace gets two real short runs: an IndexTTS-1.5 run with ``--vocoder`` (so
its metrics.jsonl has real ``sample`` events and wavs) and an IndexTTS2 run (which cannot be spoken with
yet). The callback test runs the real ``python -m trainer.synthesize`` jobs through the supervisor.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
import soundfile

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts15.demo.build import DemoPaths
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.registry import demo_folders
from tests.trainer_helpers import events, run_main, subset_manifest, tiny_args
from webui.context import StudioContext
from webui.jobs.process_tools import wait_until
from webui.testing import listen, reference_voices, tab_testing, tab_testing_layout, test_job
from webui.training import sample_saves, samples_view

SYNTH_TIMEOUT_S = 240  # two CPU synthesis processes (torch import, model load) on a busy 2-core machine


@pytest.fixture(scope="module")
def trained(demo_workspace, tmp_path_factory) -> DemoPaths:
    """A copy of the demo workspace with runs/demo (v1.5, samples at steps 2 and 4) and v2/runs/demo (step 2)."""
    root = tmp_path_factory.mktemp("listen")
    workspace = root / "workspace"
    shutil.copytree(demo_workspace.root, workspace, ignore=shutil.ignore_patterns("runs", "jobs"))
    ws = DemoPaths.under(workspace)
    data = {"train": subset_manifest(ws.train_manifest, root / "train.jsonl", 8),
            "val": subset_manifest(ws.val_manifest, root / "val.jsonl", 3)}
    assert run_main(tiny_args(ws, data, ws.output_dir, max_steps=4, save_interval=2, vocoder=ws.vocoder)) == 0
    v2 = DemoV2Paths.under(workspace)
    assert run_main(tiny_args(v2, {"train": v2.train_manifest, "val": v2.val_manifest}, v2.output_dir,
                              max_steps=2, save_interval=2)) == 0
    return ws


@pytest.fixture
def ctx(trained) -> StudioContext:
    return StudioContext.create(trained.root)


# -- models to pick ---------------------------------------------------------------------------------------


def test_choices_list_base_models_and_every_checkpoint_with_its_step(trained):
    choices = {c.key: c for c in listen.model_choices(trained.root)}
    runs, v2_runs = trained.output_dir, DemoV2Paths.under(trained.root).output_dir
    base = f"base:{trained.config}"
    base_v2 = f"base:{DemoV2Paths.under(trained.root).config}"
    assert list(choices)[:2] == [base, base_v2]
    assert (choices[base].kind, choices[base].version) == ("base", "1.5")
    assert choices[base_v2].version == "2" and "(IndexTTS2)" in choices[base_v2].label
    steps = {Path(key).name: (c.kind, c.step, c.version) for key, c in choices.items() if Path(key).parent == runs}
    assert steps == {"latest.pth": ("latest", 4, "1.5"), "best.pth": ("best", 4, "1.5"),
                     "model_step4.pth": ("step", 4, "1.5"), "model_step2.pth": ("step", 2, "1.5")}
    v2_latest = choices[str(v2_runs / "latest.pth")]
    assert (v2_latest.step, v2_latest.version) == (2, "2")
    assert listen.default_pair(list(choices.values())) == (base, str(runs / "latest.pth"))


def test_each_side_uses_its_own_tokenizer_config_and_vocoder(trained):
    base = listen.resolve_model(f"base:{trained.config}", trained.root)
    assert (base.checkpoint, base.tokenizer, base.config, base.vocoder, base.version) == (
        trained.base_checkpoint, trained.base_tokenizer, trained.config, trained.vocoder, "1.5")
    assert base.problem is None

    tuned = listen.resolve_model("runs/demo/model_step2.pth", trained.root)  # typed, relative to the workspace
    assert tuned.checkpoint == trained.output_dir / "model_step2.pth"
    assert tuned.tokenizer == trained.extended_tokenizer  # recorded in the checkpoint, not the config's bpe.model
    assert (tuned.config, tuned.vocoder, tuned.problem) == (trained.config, trained.vocoder, None)
    assert "step 2" in tuned.label
    assert tuned.describe(trained.root) == (
        "checkpoint runs/demo/model_step2.pth · tokenizer tokenizers/amharic_extended.model · config "
        "checkpoints/config.yaml · vocoder checkpoints/bigvgan_generator.pth · tokenizer recorded in the checkpoint")

    other = trained.root / "my_vocoder.pth"
    shutil.copyfile(trained.vocoder, other)
    assert listen.resolve_model(str(trained.output_dir / "latest.pth"), trained.root, "my_vocoder.pth").vocoder == other


def test_models_that_cannot_speak_say_why_in_one_line(trained, tmp_path):
    v2 = DemoV2Paths.under(trained.root)
    broken = tmp_path / "IndexTTS-2"  # a download folder without its S2Mel
    shutil.copytree(v2.config.parent, broken)
    (broken / "s2mel.pth").unlink()
    spec = listen.resolve_model(f"base:{broken / 'config.yaml'}", trained.root)
    assert spec.version == "2" and str(broken / "s2mel.pth") in spec.problem and "\n" not in spec.problem

    missing_vocoder = listen.resolve_model(f"base:{trained.config}", trained.root, "nope.pth")
    assert missing_vocoder.problem == f"{missing_vocoder.label}: vocoder not found: {trained.root / 'nope.pth'}"

    for key, expected in (("", "no model picked"), ("runs/none.pth", "checkpoint not found"),
                          (f"base:{tmp_path / 'config.yaml'}", "config not found")):
        with pytest.raises(listen.ListenError, match=expected):
            listen.resolve_model(key, trained.root)
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint at all" * 10)
    with pytest.raises(listen.ListenError, match="is not a loadable checkpoint"):
        listen.resolve_model(str(garbage), trained.root)


def test_a_recorded_tokenizer_that_is_gone_is_named(trained, tmp_path):
    import torch

    ckpt = torch.load(trained.output_dir / "model_step2.pth", weights_only=True)
    ckpt["tokenizer"]["path"] = str(tmp_path / "moved.model")
    path = tmp_path / "run" / "model_step2.pth"
    path.parent.mkdir()
    torch.save(ckpt, path)
    spec = listen.resolve_model(str(path), trained.root)
    assert spec.config == trained.config  # from the checkpoint's hparams, though train_config.yaml is not beside it
    assert spec.problem == f"{spec.label}: tokenizer not found: {tmp_path / 'moved.model'}"


# -- the command ------------------------------------------------------------------------------------------


def _spec(tmp_path: Path, vocoder: bool = True) -> listen.ModelSpec:
    return listen.ModelSpec(label="x", checkpoint=tmp_path / "c.pth", config=tmp_path / "config.yaml",
                            tokenizer=tmp_path / "t.model", vocoder=tmp_path / "v.pth" if vocoder else None,
                            version="1.5")


def test_synthesis_argv_is_built_exactly(tmp_path):
    spec, ref, out, report = _spec(tmp_path), tmp_path / "r.wav", tmp_path / "A.wav", tmp_path / "A.json"
    head = ["py", "-m", "trainer.synthesize", "--checkpoint", str(tmp_path / "c.pth"), "--config",
            str(tmp_path / "config.yaml"), "--tokenizer", str(tmp_path / "t.model"), "--vocoder", str(tmp_path / "v.pth"),
            "--reference", str(ref), "--text", "ሰላም ለዓለም", "--out", str(out), "--json", str(report)]
    greedy = listen.decode_choice("greedy", 3, 1.0, 30, 0.8, 7)
    assert listen.synthesis_argv("py", spec, "ሰላም ለዓለም", ref, out, report, greedy, "cpu") == [
        *head, "--decode", "greedy", "--device", "cpu"]
    beam = listen.decode_choice("beam", 4, 1.0, 30, 0.8, 7)
    assert listen.synthesis_argv("py", spec, "ሰላም ለዓለም", ref, out, report, beam) == [
        *head, "--decode", "beam", "--num-beams", "4", "--device", "auto"]
    sample = listen.decode_choice("sample", 1, 0.7, 0, 1.0, 42)
    assert listen.synthesis_argv("py", spec, "ሰላም ለዓለም", ref, out, report, sample, "cuda") == [
        *head, "--decode", "sample", "--num-beams", "1", "--temperature", "0.7", "--top-k", "0", "--top-p", "1",
        "--seed", "42", "--device", "cuda"]
    no_vocoder = listen.synthesis_argv("py", _spec(tmp_path, vocoder=False), "t", ref, out, report, greedy)
    assert "--vocoder" not in no_vocoder


def test_the_argv_parses_with_the_synthesis_cli(tmp_path):
    from trainer.synthesize import build_parser

    sample = listen.decode_choice("sample", 2, 0.7, 5, 0.9, 42)
    argv = listen.synthesis_argv("py", _spec(tmp_path), "ሰላም", tmp_path / "r.wav", tmp_path / "o.wav",
                                 tmp_path / "o.json", sample, "cpu")
    args = build_parser().parse_args(argv[3:])
    assert (args.decode, args.num_beams, args.temperature, args.top_k, args.top_p, args.seed, args.text) == (
        "sample", 2, 0.7, 5, 0.9, 42, "ሰላም")


def test_bad_form_values_are_one_line(tmp_path):
    with pytest.raises(listen.ListenError, match=r"temperature must be > 0, got 0\.0"):
        listen.decode_choice("sample", 3, 0, 30, 0.8, 0)
    with pytest.raises(listen.ListenError, match="decode mode must be one of"):
        listen.decode_choice("loud", 3, 1, 30, 0.8, 0)
    with pytest.raises(listen.ListenError, match="type a text"):
        listen.clean_text(" \n ")
    assert listen.clean_text("ሰላም\n\n ለዓለም \n") == "ሰላም ለዓለም"


# -- the job's result -------------------------------------------------------------------------------------


def _status(state: str, argv: tuple[str, ...] = (), **extra) -> SimpleNamespace:
    values = {"summary": state, "failure": None, "exit_code": None, **extra}
    return SimpleNamespace(state=state, argv=argv, **values)


def test_the_report_is_read_into_what_the_players_show(tmp_path):
    wav = tmp_path / "A.wav"
    soundfile.write(wav, [0.0, 0.1, -0.1] * 8000, 24000, subtype="PCM_16")
    report = tmp_path / "A.json"
    report.write_text(json.dumps({"device": "cpu", "items": [
        {"out": str(wav), "audio_seconds": 1.0, "seconds": 0.5, "real_time_factor": 0.5, "hit_stop": False,
         "notes": ["no stop code within 128 codes"]}]}), encoding="utf-8")
    result = listen.side_result(_status("finished", ("py", "--json", str(report))))
    assert (result.state, result.wav, result.audio_seconds, result.real_time_factor, result.sample_rate) == (
        "finished", wav, 1.0, 0.5, 24000)
    assert result.message == "1.00 s of audio in 0.50 s · real-time factor 0.500 · 24000 Hz · on cpu"
    assert result.hit_stop is False and listen.audio_bytes(wav) == wav.read_bytes()

    report.write_text("{", encoding="utf-8")
    broken = listen.side_result(_status("finished", ("py", "--json", str(report))))
    assert broken.state == "failed" and broken.message.startswith(f"unreadable report {report}")
    wav.unlink()
    report.write_text(json.dumps({"items": [{"out": str(wav)}]}), encoding="utf-8")
    assert listen.side_result(_status("finished", ("py", "--json", str(report)))).message == (
        f"the audio file is gone: {wav}")


def test_a_failed_job_shows_its_error_in_one_line():
    failure = SimpleNamespace(detail="error: --text is too long: 900 tokens, the model takes at most 64")
    status = _status("failed", summary="failed: refused: ...", exit_code=2, failure=failure)
    result = listen.side_result(status)
    assert result.message == "--text is too long: 900 tokens, the model takes at most 64 (exit 2)"
    assert listen.side_result(_status("running")).running
    assert listen.side_result(_status("idle")).message == "not run yet"


def test_old_results_are_pruned(tmp_path):
    folders = [listen.new_results_dir(tmp_path, keep=3) for _ in range(5)]
    assert len(set(folders)) == 5
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == sorted(p.name for p in folders[-3:])


# -- reference voices -------------------------------------------------------------------------------------


def test_the_generated_reference_is_written_once_and_labelled(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_voices.shutil, "which", lambda name: None)  # as on a machine without espeak-ng
    label, path = reference_voices.default_reference(tmp_path)
    assert path == tmp_path / "references" / reference_voices.TONE_REFERENCE and "tone" in label and "upload" in label
    info = soundfile.info(str(path))
    assert info.samplerate == 24000 and info.frames == 3 * 24000
    stamp = path.stat().st_mtime_ns
    assert reference_voices.default_reference(tmp_path) == (label, path) and path.stat().st_mtime_ns == stamp
    assert [p.name for p in path.parent.iterdir()] == [reference_voices.TONE_REFERENCE]  # no scratch file left


def test_espeak_reference_when_installed(tmp_path):
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (the tone reference is used instead)")
    label, path = reference_voices.default_reference(tmp_path)
    assert path.name == reference_voices.ESPEAK_REFERENCE and "espeak-ng" in label
    assert soundfile.info(str(path)).frames > 0


def test_reference_choices_offer_audio_prompts_but_not_mels(trained, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "references").mkdir(parents=True)
    soundfile.write(workspace / "references" / "me.wav", [0.0] * 2400, 24000)
    (workspace / "references" / "notes.txt").write_text("not audio", encoding="utf-8")
    prompt = tmp_path / "prompt.wav"
    soundfile.write(prompt, [0.0] * 2400, 24000)
    rows = [json.loads(line) for line in trained.val_manifest.read_text(encoding="utf-8").splitlines()[:2]]
    rows[0] = {**{k: v for k, v in rows[0].items() if k != "cond_mel"}, "cond_audio": str(prompt),
               "codes": str(trained.val_manifest.parent / rows[0]["codes"])}
    rows[1]["codes"] = str(trained.val_manifest.parent / rows[1]["codes"])
    rows[1]["cond_mel"] = str(trained.val_manifest.parent / rows[1]["cond_mel"])
    manifest = tmp_path / "val.jsonl"
    manifest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    choices = reference_voices.reference_choices(workspace, [manifest, tmp_path / "missing.jsonl"])
    assert [label for label, _ in choices][1:] == [
        "references/me.wav", f"validation prompt {rows[0]['id']} ({rows[0]['speaker']}), IndexTTS-1.5 data"]
    assert choices[0][0].startswith("generated:") and choices[2][1] == str(prompt)

    v2 = DemoV2Paths.under(trained.root)  # an IndexTTS2 paired manifest: its prompts' audio, each file once
    pairs = [json.loads(line) for line in v2.val_manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    expected = list(dict.fromkeys(str(v2.val_manifest.parent / p["prompt_audio_path"]) for p in pairs))
    v2_choices = reference_voices.reference_choices(workspace, [v2.val_manifest])[2:]
    assert [path for _, path in v2_choices] == expected and all(Path(path).is_file() for path in expected)
    assert v2_choices[0][0] == f"validation prompt {pairs[0]['prompt_id']} ({pairs[0]['speaker']}), IndexTTS2 data"


def test_the_test_tab_offers_every_generations_validation_prompts(demo_workspace, tmp_path):
    """The Test tab's reference voices come from every generation's demo validation manifest (the registry's
    demos), the IndexTTS-2.5 paired manifest's prompt audio included."""
    workspace = tmp_path / "ws"  # the demo's folders, read only; the tab writes its generated voice here
    workspace.mkdir()
    for name in ("data", *(folder for folder in demo_folders() if folder)):
        (workspace / name).symlink_to(demo_workspace.root / name)
    ctx = StudioContext.create(workspace)
    with gr.Blocks():
        form = tab_testing_layout.form_inputs(ctx)
    offered = dict((path, label) for label, path in form.reference.choices)
    for paths, name in ((DemoV25Paths.under(ctx.workspace), "IndexTTS-2.5"), (DemoV2Paths.under(ctx.workspace),
                                                                                "IndexTTS2")):
        pairs = [json.loads(line) for line in paths.val_manifest.read_text(encoding="utf-8").splitlines() if line]
        prompt = paths.val_manifest.parent / pairs[0]["prompt_audio_path"]
        assert prompt.is_file() and offered.get(str(prompt)) == (
            f"validation prompt {pairs[0]['prompt_id']} ({pairs[0]['speaker']}), {name} data")


# -- training samples -------------------------------------------------------------------------------------


def test_samples_gallery_from_a_real_run(trained):
    saves = sample_saves.SampleEvents(trained.output_dir).refresh()
    assert [save.step for save in saves] == [4, 2]
    recorded = next(e for e in events(trained.output_dir, "sample") if e["step"] == 4)
    gallery = sample_saves.samples_gallery(saves)
    assert gallery.steps == [4, 2] and gallery.step == 4
    assert [path for _, path in gallery.players] == [Path(f["path"]) for f in recorded["files"]]
    assert all(label.startswith("step 4 · ") for label, _ in gallery.players)
    for _, path in gallery.players:
        info = soundfile.info(str(path))
        assert info.samplerate == 24000 and info.frames > 0
    earlier = sample_saves.samples_gallery(saves, 2)
    assert earlier.step == 2 and all("/step_2/" in str(path) for _, path in earlier.players)
    assert sample_saves.samples_gallery(saves, 99).step == 4  # a step that is not there: the newest


def test_missing_sample_files_are_skipped_with_a_note(trained, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(trained.output_dir / "samples", out / "samples")
    lines = (trained.output_dir / "metrics.jsonl").read_text(encoding="utf-8")
    (out / "metrics.jsonl").write_text(lines.replace(str(trained.output_dir), str(out)), encoding="utf-8")
    gone = sorted((out / "samples" / "step_4").iterdir())[0]
    gone.unlink()
    gallery = sample_saves.samples_gallery(sample_saves.SampleEvents(out).refresh())
    assert len(gallery.players) == 2 and gone not in [path for _, path in gallery.players]
    assert gallery.note == f"step 4: 2 sample(s); 1 file(s) missing, skipped: {gone.name}"


def test_sample_events_are_read_incrementally(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    wav = tmp_path / "a.wav"
    soundfile.write(wav, [0.0] * 2400, 24000)
    event = {"event": "sample", "step": 2, "dir": str(tmp_path), "seconds": 1.0,
             "files": [{"path": str(wav), "name": "a", "audio_seconds": 0.1, "hit_stop": True}]}
    metrics.write_text(json.dumps({"event": "train", "step": 1}) + "\n" + json.dumps(event) + "\n", encoding="utf-8")
    reader = sample_saves.SampleEvents(tmp_path)
    assert [s.step for s in reader.refresh()] == [2]
    failed = json.dumps({"event": "sample", "step": 4, "error": "reference is too short:\n3 mel frames"})
    with metrics.open("a", encoding="utf-8") as handle:
        handle.write(failed[:20])  # a line still being written
    assert [s.step for s in reader.refresh()] == [2]
    with metrics.open("a", encoding="utf-8") as handle:
        handle.write(failed[20:] + "\n" + json.dumps({**event, "seconds": 2.0}) + "\n")  # step 2 again (resumed)
    saves = reader.refresh()
    assert [s.step for s in saves] == [4, 2] and saves[1].seconds == 2.0
    assert sample_saves.samples_gallery(saves).note == "samples at step 4 failed: reference is too short: 3 mel frames"
    metrics.write_text(json.dumps(event) + "\n", encoding="utf-8")  # replaced (a new run in the same folder)
    assert [s.step for s in sample_saves.SampleEvents(tmp_path).refresh()] == [2]
    assert sample_saves.samples_gallery([]).note.startswith("no samples yet")


def _served(player) -> bytes:
    return Path(player.value["path"]).read_bytes()


def test_samples_panel_update_shows_players_and_sends_audio_once(trained):
    with gr.Blocks():
        folder = gr.Textbox(value=str(trained.output_dir))
        panel = samples_view.build("t-samples")
        panel.wire(folder, gr.Timer(1.0))  # the Training tab's wiring builds
    values = panel.update(str(trained.output_dir), "latest", None)
    picker, note, players, shown = values[0], values[1], values[2:-1], values[-1]
    assert picker.choices == [("latest (step 4)", "latest"), ("step 4", "4"), ("step 2", "2")]
    assert picker.value == "latest" and "step 4: 3 sample(s)" in note
    visible = [p for p in players if p.visible]
    assert len(visible) == 3 and len(players) == samples_view.MAX_PLAYERS
    assert [_served(p) for p in visible] == [path.read_bytes() for _, path in
                                            sample_saves.samples_gallery(sample_saves.SampleEvents(trained.output_dir).refresh()).players]
    assert all(p.label.startswith("step 4 · ") for p in visible)
    again = panel.update(str(trained.output_dir), "latest", shown)
    assert all(p == gr.skip() for p in again[2:-1])  # nothing new: no audio resent
    back = panel.update(str(trained.output_dir), "2", shown)
    assert back[0].value == "2" and all("step 2" in p.label for p in back[2:-1] if p.visible)
    assert "no samples yet" in panel.update(str(trained.root / "nowhere"), "latest", None)[1]


# -- the Test tab's callbacks -----------------------------------------------------------------------------


def _form(ctx: StudioContext, key_a: str, key_b: str, **extra) -> list:
    reference = reference_voices.reference_choices(ctx.workspace)[0][1]
    values = {"key_a": key_a, "key_b": key_b, "text": "ሰላም ለዓለም።", "reference": reference, "upload": None,
              "mode": "greedy", "num_beams": 3, "temperature": 1.0, "top_k": 30, "top_p": 0.8, "seed": 0,
              "vocoder": "", "device": "cpu", **extra}
    return list(values.values())


def test_base_and_fine_tuned_side_by_side(ctx, trained):
    with gr.Blocks():
        tab_testing.build(ctx)  # the layout builds on this workspace
    tuned = str(trained.output_dir / "latest.pth")
    view = test_job.start_test(ctx, *_form(ctx, f"base:{trained.config}", tuned))
    assert "STARTED" in view.message, view.message
    assert wait_until(lambda: not test_job.poll_test(ctx).running, SYNTH_TIMEOUT_S, interval_s=0.5)
    view = test_job.poll_test(ctx)
    commands = view.command.split("\n# B\n")
    assert f"--checkpoint {trained.base_checkpoint} " in commands[0] and f"--tokenizer {trained.base_tokenizer}" in commands[0]
    assert f"--checkpoint {tuned} " in commands[1] and f"--tokenizer {trained.extended_tokenizer}" in commands[1]
    wavs = []
    for side in ("A", "B"):
        side_view = view.sides[side]
        assert 'data-tone="ok"' in side_view.status and "real-time factor" in side_view.status, side_view.status
        info = soundfile.info(str(side_view.wav))
        assert info.samplerate == 24000 and info.frames > 0
        assert side_view.audio == side_view.wav.read_bytes()
        wavs.append(side_view.wav)
    assert wavs[0].parent == wavs[1].parent and wavs[0] != wavs[1]
    assert (wavs[0].parent / "reference.wav").is_file()  # the reference was copied for the job

    outputs = tab_testing._view_outputs(view, None)
    assert outputs[2][:4] == b"RIFF" and outputs[5][:4] == b"RIFF"
    again = tab_testing._view_outputs(test_job.poll_test(ctx), outputs[-1])
    assert again[2] == gr.skip() and again[5] == gr.skip()  # a tick with nothing new sends no audio


def test_each_v2_side_speaks_through_its_download_folder(trained):
    v2 = DemoV2Paths.under(trained.root)
    base = listen.resolve_model(f"base:{v2.config}", trained.root)
    assert (base.version, base.model_dir, base.checkpoint, base.tokenizer, base.vocoder, base.problem) == (
        "2", v2.config.parent, v2.base_checkpoint, v2.config.parent / "bpe.model", None, None)
    tuned = listen.resolve_model(str(v2.output_dir / "latest.pth"), trained.root, "ignored_for_v2.pth")
    assert (tuned.model_dir, tuned.tokenizer, tuned.vocoder, tuned.problem) == (
        v2.config.parent, v2.extended_tokenizer, None, None)
    assert tuned.describe(trained.root).startswith(
        "checkpoint v2/runs/demo/latest.pth · tokenizer tokenizers/amharic_extended.model · IndexTTS2 folder "
        "v2/checkpoints")
    emotion = listen.EmotionChoice(steps=4, reference=Path("/e.wav"), alpha=0.4)
    argv = listen.synthesis_argv("py", tuned, "ሰላም", Path("/r.wav"), Path("/o.wav"), Path("/o.json"),
                                 listen.DecodeChoice(mode="greedy"), "cpu", emotion)
    assert argv == ["py", "-m", "trainer.synthesize", "--model-dir", str(v2.config.parent), "--checkpoint",
                    str(tuned.checkpoint), "--tokenizer", str(v2.extended_tokenizer), "--reference", "/r.wav",
                    "--text", "ሰላም", "--out", "/o.wav", "--json", "/o.json", "--decode", "greedy", "--steps", "4",
                    "--emotion-reference", "/e.wav", "--emotion-alpha", "0.4", "--device", "cpu"]
    for values, expected in (((0, None, 1.0), "S2Mel steps must be >= 1"), ((25, None, 1.5), "alpha must be in")):
        with pytest.raises(listen.ListenError, match=expected):
            listen.emotion_choice(*values)


def test_v2_base_and_fine_tuned_side_by_side_with_an_emotion_reference(ctx, trained):
    v2 = DemoV2Paths.under(trained.root)
    emotion = sorted((v2.train_manifest.parent / "wavs").glob("*.wav"))[-1]
    tuned = str(v2.output_dir / "latest.pth")
    view = test_job.start_test(ctx, *_form(ctx, f"base:{v2.config}", tuned), 3, str(emotion), 0.5)
    assert "STARTED" in view.message, view.message
    assert wait_until(lambda: not test_job.poll_test(ctx).running, SYNTH_TIMEOUT_S, interval_s=0.5)
    view = test_job.poll_test(ctx)
    commands = view.command.split("\n# B\n")
    assert f"--model-dir {v2.config.parent} " in commands[0] and f"--checkpoint {v2.base_checkpoint} " in commands[0]
    assert f"--checkpoint {tuned} " in commands[1] and f"--tokenizer {v2.extended_tokenizer}" in commands[1]
    assert all("--steps 3 --emotion-reference " in c and "--emotion-alpha 0.5" in c for c in commands)
    for side in ("A", "B"):
        side_view = view.sides[side]
        assert 'data-tone="ok"' in side_view.status and "22050 Hz" in side_view.status, side_view.status
        info = soundfile.info(str(side_view.wav))
        assert info.samplerate == 22050 and info.frames > 0
    assert (view.sides["A"].wav.parent / "emotion_reference.wav").is_file()  # staged for the job


def test_form_errors_start_nothing(ctx, trained):
    before = test_job._read_current(ctx)
    for extra, expected in (({"text": "  "}, "type a text"), ({"reference": "", "upload": None}, "choose a reference"),
                            ({"reference": "missing.wav"}, "reference audio not found"),
                            ({"mode": "sample", "top_p": 0}, "top_p must be in"),
                            ({"device": "tpu"}, "device must be one of")):
        view = test_job.start_test(ctx, *_form(ctx, f"base:{trained.config}", "", **extra))
        assert expected in view.message and 'data-tone="error"' in view.message, (extra, view.message)
    assert test_job._read_current(ctx) == before
