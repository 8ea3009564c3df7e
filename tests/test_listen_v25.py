"""The Test tab hears IndexTTS-2.5 (issue 24 item 3): the 2.5 base model and a 2.5 fine-tune side by side, a
LoRA run's checkpoint with its adapter on and off, and the duration factor, each side a real
``python -m trainer.synthesize`` job through the demo's tiny 2.5 download folder.

A private workspace holds the demo's ``v25/`` (its download folder, data) and two 2-step runs: ``v25/runs/demo``
(full fine-tune) and ``v25/runs/lora`` (``--lora``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import soundfile

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.test_train_v25 import pair_subset, v25_args
from tests.trainer_helpers import run_main
from webui.context import StudioContext
from webui.jobs.process_tools import wait_until
from webui.testing import listen, reference_voices, test_job

SYNTH_TIMEOUT_S = 300  # two CPU synthesis processes (torch + transformers import, model load) on 2 busy cores


@pytest.fixture(scope="module")
def ws(demo_workspace, tmp_path_factory) -> DemoV25Paths:
    workspace = tmp_path_factory.mktemp("listen25") / "workspace"
    shutil.copytree(demo_workspace.root / "v25", workspace / "v25", ignore=shutil.ignore_patterns("runs"))
    paths = DemoV25Paths.under(workspace)
    folder = paths.train_manifest.parent
    data = {"train": pair_subset(paths.train_manifest, folder / "listen_train.jsonl", 6),
            "val": pair_subset(paths.val_manifest, folder / "listen_val.jsonl", 3)}
    assert run_main(v25_args(paths, data, paths.output_dir, max_steps=2)) == 0
    assert run_main([*v25_args(paths, data, paths.root / "runs" / "lora", max_steps=2), "--lora"]) == 0
    return paths


@pytest.fixture
def ctx(ws) -> StudioContext:
    return StudioContext.create(ws.root.parent)


def _form(ctx: StudioContext, key_a: str, key_b: str, duration_factor: float = 1.0) -> list:
    reference = reference_voices.reference_choices(ctx.workspace)[0][1]
    return [key_a, key_b, "ሰላም ለዓለም።", reference, None, "greedy", 3, 1.0, 30, 0.8, 0, "", "cpu",
            2, None, 1.0, duration_factor]


def _spoken(ctx: StudioContext) -> test_job.TestView:
    assert wait_until(lambda: not test_job.poll_test(ctx).running, SYNTH_TIMEOUT_S, interval_s=0.5)
    view = test_job.poll_test(ctx)
    for side in ("A", "B"):
        side_view = view.sides[side]
        assert 'data-tone="ok"' in side_view.status and "22050 Hz" in side_view.status, (side, side_view.status)
        info = soundfile.info(str(side_view.wav))
        assert info.samplerate == 22050 and info.frames > 0
    return view


def test_choices_offer_the_25_base_fine_tunes_and_adapter_off(ws):
    workspace = ws.root.parent
    choices = {c.key: c for c in listen.model_choices(workspace)}
    base = f"base:{ws.config}"
    assert choices[base].version == "2.5" and choices[base].label == "base model · v25/checkpoints (IndexTTS-2.5)"
    tuned, lora = ws.output_dir / "latest.pth", ws.root / "runs" / "lora" / "latest.pth"
    assert choices[str(tuned)].label == "v25/runs/demo · latest.pth (step 2)"
    assert listen.ADAPTER_OFF_PREFIX + str(tuned) not in choices  # not a LoRA run
    off = choices[listen.ADAPTER_OFF_PREFIX + str(lora)]
    assert off.label == "v25/runs/lora · latest.pth (step 2) · LoRA adapter off" and off.version == "2.5"


def test_each_25_side_speaks_through_its_download_folder(ws):
    workspace = ws.root.parent
    base = listen.resolve_model(f"base:{ws.config}", workspace)
    assert (base.version, base.model_dir, base.checkpoint, base.tokenizer, base.vocoder, base.problem) == (
        "2.5", ws.config.parent, ws.base_checkpoint, ws.tokenizer, None, None)
    tuned = listen.resolve_model(str(ws.output_dir / "latest.pth"), workspace, "ignored_for_25.pth")
    assert (tuned.model_dir, tuned.tokenizer, tuned.vocoder, tuned.problem) == (ws.config.parent, ws.tokenizer, None, None)
    assert "IndexTTS-2.5 folder v25/checkpoints" in tuned.describe(workspace)
    emotion = listen.emotion_choice(4, None, 1.0, 1.25)
    argv = listen.synthesis_argv("py", tuned, "ሰላም", Path("/r.wav"), Path("/o.wav"), Path("/o.json"),
                                 listen.DecodeChoice(mode="greedy"), "cpu", emotion)
    assert argv == ["py", "-m", "trainer.synthesize", "--model-dir", str(ws.config.parent), "--checkpoint",
                    str(tuned.checkpoint), "--tokenizer", str(ws.tokenizer), "--reference", "/r.wav",
                    "--text", "ሰላም", "--out", "/o.wav", "--json", "/o.json", "--decode", "greedy", "--steps", "4",
                    "--duration-factor", "1.25", "--device", "cpu"]
    off = listen.resolve_model(listen.ADAPTER_OFF_PREFIX + str(ws.root / "runs" / "lora" / "latest.pth"), workspace)
    assert off.problem is None and "--no-adapter" in listen.synthesis_argv(
        "py", off, "ሰላም", Path("/r.wav"), Path("/o.wav"), Path("/o.json"), listen.DecodeChoice(), "cpu")
    for factor in (0, -1, 11):
        with pytest.raises(listen.ListenError, match="duration factor must be in"):
            listen.emotion_choice(25, None, 1.0, factor)

    broken = workspace / "broken25"
    shutil.copytree(ws.config.parent, broken)
    (broken / "codec.pth").unlink()
    problem = listen.resolve_model(f"base:{broken / 'config.yaml'}", workspace).problem
    assert problem is not None and "codec.pth" in problem and "\n" not in problem


def test_25_base_and_fine_tune_side_by_side_then_adapter_on_and_off(ctx, ws):
    tuned = str(ws.output_dir / "latest.pth")
    view = test_job.start_test(ctx, *_form(ctx, f"base:{ws.config}", tuned, duration_factor=1.5))
    assert "STARTED" in view.message, view.message
    view = _spoken(ctx)
    commands = view.command.split("\n# B\n")
    assert f"--model-dir {ws.config.parent} " in commands[0] and f"--checkpoint {ws.base_checkpoint} " in commands[0]
    assert f"--checkpoint {tuned} " in commands[1]
    assert all("--duration-factor 1.5" in c and "--steps 2" in c for c in commands)
    # the fine-tune asked for a length: its S2Mel target is int(2M x 1.72 x factor) mel frames for M codes, as
    # upstream's 2.5 inference conditions it (the factor is 2.5's only length control: no GPT input takes one)
    report = json.loads(view.sides["B"].wav.with_suffix(".json").read_text(encoding="utf-8"))
    assert report["s2mel"]["duration_factor"] == 1.5
    segments = report["items"][0]["segments"]
    assert segments and [s["mel_frames"] for s in segments] == [int(2 * s["codes"] * 1.72 * 1.5) for s in segments]
    assert soundfile.info(str(view.sides["B"].wav)).frames >= sum(s["mel_frames"] for s in segments) * 256

    lora = str(ws.root / "runs" / "lora" / "latest.pth")
    view = test_job.start_test(ctx, *_form(ctx, lora, listen.ADAPTER_OFF_PREFIX + lora))
    assert "STARTED" in view.message, view.message
    view = _spoken(ctx)
    commands = view.command.split("\n# B\n")
    assert "--no-adapter" not in commands[0] and "--no-adapter" in commands[1]
    assert "LoRA adapter off" in view.sides["B"].detail and "LoRA adapter off" not in view.sides["A"].detail


def test_the_test_tab_marks_a_letter_the_25_run_never_had(ws):
    """Token coverage through the real model resolution: a demo 2.5 run's checkpoint, its train_config.yaml, its
    manifests (tests/test_text_coverage_v25.py covers the rules)."""
    from data_tools.text import script_letters
    from generations.indextts25.ui.text_coverage import manifest_texts
    from webui.testing.text_coverage import coverage_html

    tuned = str(ws.output_dir / "latest.pth")
    texts = "".join(text for text, _ in manifest_texts(ws.train_manifest.parent / "listen_train.jsonl", "am"))
    never = next(ch for ch in script_letters("ethiopic") if ch not in texts)
    trained_word = texts.split()[0]
    assert coverage_html(ws.root.parent, {"A": tuned}, None, trained_word) == ""
    line = coverage_html(ws.root.parent, {"A": tuned}, None, f"{trained_word} ሰ{never}")
    assert 'data-side="A"' in line and never in line and "UNTRAINED PIECES" in line
