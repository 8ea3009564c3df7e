"""A checkpoint's health (issue 38 item 1): runaway generation, speaking rate, an adapter that changes nothing.

The runaway and adapter checks run the real evaluation (``python -m trainer.evaluate``) on the demo: a 1.5 run
trained long enough to speak its data's lengths, one of its checkpoints altered so that its stop code never wins,
and a LoRA run whose adapter never left its zero B matrices (learning rate 0). The rate check runs the real
Evaluator on stub speech whose length per character is known (half the real clips': twice as fast).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.speech_model_factory import judge_models, tone_wav
from tests.trainer_helpers import run_main, subset_manifest, tiny_args
from trainer.evaluate import main as evaluate_main
from trainer.evaluation.eval_set import EvalSet, Sentence, Voice
from trainer.evaluation.health import (
    LOOP_MIN_CODES,
    RATE_TOLERANCE,
    characters,
    disqualification,
    health_cell,
    loop_span,
    real_speech,
)
from trainer.evaluation.results import read_result, result_path
from trainer.evaluation.runner import EvalSettings, Evaluator


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech_models")
    return judge_models(root)


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("health_data")
    voice = tone_wav(root / "voice.wav")
    train = subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 8)
    texts = root / "texts.txt"  # sentences of the data the run learns, so its lengths are the data's
    texts.write_text("".join(json.loads(line)["text"] + "\n" for line in train.read_text("utf-8").splitlines()[:2]),
                     encoding="utf-8")
    return {"train": train, "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4),
            "voice": voice, "texts": texts}


def _run(demo_workspace, data, models, out: Path, **overrides) -> Path:
    values = {"eval_asr": str(models["asr"]), "eval_speaker_model": str(models["speaker"]),
              "eval_texts": str(data["texts"]), "eval_reference": str(data["voice"]), "eval_base": False,
              "vocoder": str(demo_workspace.vocoder), "epochs": 1000, "log_interval": 50, "best_by": "cer"}
    values.update(overrides)
    assert run_main(tiny_args(demo_workspace, data, out, **values)) == 0
    return out


@pytest.fixture(scope="module")
def demo_run(demo_workspace, data, models, tmp_path_factory):
    """The demo's own trained checkpoints (the quick start's 200 steps): model_step100 and model_step200."""
    return _run(demo_workspace, data, models, tmp_path_factory.mktemp("demo_run") / "run", max_steps=200,
                save_interval=100)


def _best_step(run: Path) -> int | None:
    for path in run.glob("model_step*.pth"):
        if (run / "best.pth").exists() and os.path.samefile(run / "best.pth", path):
            return int(path.stem.removeprefix("model_step"))
    return None


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


# ----- the rules on their own ------------------------------------------------------------------------------

def test_a_repeated_span_of_codes_is_a_loop_and_varied_codes_are_not():
    rng = np.random.default_rng(3)
    varied = rng.integers(0, 8000, 200)
    assert loop_span(varied) is None
    looped = np.concatenate([varied[:20], np.tile([5, 9, 13], 20)])
    assert loop_span(looped) == (3, LOOP_MIN_CODES)
    assert loop_span(np.full(LOOP_MIN_CODES - 1, 7)) is None  # a held code shorter than a loop is no loop
    assert loop_span(np.full(LOOP_MIN_CODES, 7)) == (1, LOOP_MIN_CODES)


def test_real_speech_reads_the_speakers_clips_and_leaves_other_languages_out(tmp_path):
    manifest = tmp_path / "train.jsonl"
    rows = [{"text": "ab cd", "duration": 0.4, "speaker": "a"}, {"text": "abcdefgh", "duration": 1.6, "speaker": "b"},
            {"text": "hello", "duration": 9.0, "speaker": "a", "language": "en"}]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n", encoding="utf-8")
    own = real_speech([manifest], {"a"}, "am")
    assert own.clips == 1 and own.chars_per_second == pytest.approx(4 / 0.4)
    every = real_speech([str(manifest) + "::am"], {"nobody"}, "am")
    assert every.clips == 2 and every.chars_per_second == pytest.approx(12 / 2.0)
    assert real_speech([str(manifest) + "::en"], (), "am") is None


def test_an_indextts2_pair_without_a_duration_is_timed_by_its_code_length(tmp_path):
    """IndexTTS2's prepared pairs record target_code_len, not target_duration: at the generation's code rate they
    still give the speaker's real rate (each target once, however many prompts it has)."""
    from generations.registry import by_id

    rate = by_id("2").codes_per_second
    manifest = tmp_path / "pairs.jsonl"
    rows = [{"target_id": "t1", "target_text": "ab cd", "target_code_len": int(rate), "speaker": "a"},
            {"target_id": "t1", "target_text": "ab cd", "target_code_len": int(rate), "speaker": "a"}]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert real_speech([manifest], {"a"}, "am") is None  # no duration: nothing to time it by
    timed = real_speech([manifest], {"a"}, "am", rate)
    assert timed.clips == 1 and timed.chars_per_second == pytest.approx(4 / (int(rate) / rate))


# ----- rate: a synthesizer that speaks twice as fast ------------------------------------------------------

TEXTS = [f"selam alem sentence number {k} here" for k in range(8)]
RATE = 16_000
REAL_SECONDS_PER_CHAR = 0.08


class _PacedSpeaker:
    """Speaks each text at ``speed`` times the real clips' pace; the first sample names the checkpoint's step."""

    def __init__(self, speed: float, step: int) -> None:
        self.speed, self.step = speed, step

    def speak(self, texts, prompt, settings, language=None):
        rng = np.random.default_rng(int(settings.seed))
        clips = [np.zeros(int(RATE * characters(t) * REAL_SECONDS_PER_CHAR / self.speed * rng.uniform(0.9, 1.1)),
                          dtype=np.float32) for t in texts]
        for clip in clips:
            clip[0] = self.step
        return clips


class _PacedBackend:
    sample_rate = RATE

    def __init__(self, speed_by_step: dict[int, float]) -> None:
        self.speed_by_step = speed_by_step

    def for_checkpoint(self, checkpoint, base=False, adapter=True):
        from trainer.checkpoints.store import step_of

        step = 0 if base else step_of(Path(checkpoint))
        return _PacedSpeaker(self.speed_by_step[step], step)


class _ExactRecogniser:
    """Hears every text right, except the clips of the steps in ``garbled`` (every third character wrong)."""

    def __init__(self, texts: list[str], garbled: set[int]) -> None:
        self.texts, self.garbled, self.seconds = texts, garbled, {"asr": 0.0, "speaker": 0.0}

    def transcribe(self, clips, sample_rate, language):
        return [t if int(clip[0]) not in self.garbled else "".join("q" if k % 3 == 0 else ch for k, ch in enumerate(t))
                for t, clip in zip(self.texts, clips)]

    def similarity(self, clips, sample_rate, reference_audio):
        return [0.8] * len(clips)


def _paced_evaluator(run: Path, speed_by_step: dict[int, float], garbled: frozenset[int] = frozenset()) -> Evaluator:
    voice = run / "voice.wav"
    voice.write_bytes(b"RIFF")
    manifest = run / "train.jsonl"
    manifest.write_text("".join(json.dumps({"text": t, "duration": characters(t) * REAL_SECONDS_PER_CHAR,
                                            "speaker": "spk"}) + "\n" for t in TEXTS), encoding="utf-8")
    eval_set = EvalSet(language="en", sentences=[Sentence(f"t{k}", t) for k, t in enumerate(TEXTS)],
                       voices=[Voice("v1", "spk", str(voice), str(voice))], decode={}, seeds=[11, 12, 13])
    base = run / "base.pth"
    base.write_bytes(b"base")
    settings = EvalSettings(run_dir=run, config=run, tokenizer=run, vocoder=None, version="1.5", best_by="cer",
                            real_manifests=[str(manifest)], base_checkpoint=base)
    return Evaluator(settings, eval_set, _ExactRecogniser(TEXTS, set(garbled)), backend=_PacedBackend(speed_by_step), say=lambda _line: None)


def test_a_synthesizer_twice_as_fast_is_flagged_on_rate_and_a_true_one_is_not(tmp_path):
    evaluator = _paced_evaluator(tmp_path, {2: 2.0, 4: 1.0})
    for step in (2, 4):
        (tmp_path / f"model_step{step}.pth").write_bytes(f"weights {step}".encode())
        evaluator.evaluate_checkpoint(tmp_path / f"model_step{step}.pth")
    fast = read_result(result_path(tmp_path / "model_step2.pth"))["health"]
    assert fast["rate"]["ratio"] == pytest.approx(2.0, rel=0.05)
    assert fast["rate"]["low"] > RATE_TOLERANCE and fast["rate"]["flagged"]
    assert fast["summary"].startswith("fast speech x2.0")
    assert fast["runaway"]["items"] == 0  # no codes reported, lengths inside the real range x/÷ the margin
    true = read_result(result_path(tmp_path / "model_step4.pth"))["health"]
    assert true["rate"]["low"] <= 1.0 <= true["rate"]["high"] and not true["rate"]["flagged"]
    assert true["summary"] == "ok"
    # shown, not disqualifying (health.disqualification): the fast one is never kept from best.pth by its rate
    assert disqualification(read_result(result_path(tmp_path / "model_step2.pth"))) is None


# ----- runaway and adapter on the demo --------------------------------------------------------------------

def test_the_demo_trained_checkpoint_stays_quiet_on_every_check(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    (run / "model_step100.pth").unlink()  # the final save alone: half the speaking
    assert evaluate_main([str(run)]) == 0
    result = read_result(result_path(run / "model_step200.pth"))
    health = result["health"]
    assert health["summary"] == "ok", health
    assert health["runaway"]["items"] == 0 and health["adapter"] is None
    assert health["rate"]["items"] == 6 and not health["rate"]["flagged"]
    assert all(item["hit_stop"] and item["loop"] is None and item["codes"] > 0 for item in result["items"])
    assert health_cell(result) == "ok" and disqualification(result) is None
    from trainer.checkpoints.export import export_checkpoint
    from webui.checkpoints.rows import list_view

    rows = {row["file"]: row for row in list_view(str(run), tmp_path).table.to_dict("records")}
    assert rows["model_step200.pth"]["health"] == "ok"
    card = (export_checkpoint(run / "model_step200.pth", tmp_path / "export").out_dir / "MODEL_CARD.md").read_text(
        encoding="utf-8")
    assert "Health of model_step200" in card and "runaway items: 0 of 6" in card
    assert next(line for line in card.splitlines() if line.startswith("| **model_step200")).endswith("| ok |")


def _without_stop(checkpoint: Path) -> None:
    """``checkpoint`` rewritten so that its stop code never wins (its mel head's stop logit pushed down)."""
    from trainer.checkpoints.loading import load_checkpoint

    ckpt = load_checkpoint(checkpoint)
    stop = int(ckpt["model"]["mel_head.bias"].numel() - 1)  # the demo's stop_mel_token is the last mel code
    ckpt["model"]["mel_head.bias"][stop] = -1e4
    torch.save(ckpt, checkpoint)


def test_a_gpt_whose_stop_code_never_wins_is_flagged_runaway_and_never_best(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    (run / "model_step200.pth").unlink()
    _without_stop(run / "model_step100.pth")  # the only checkpoint: without health it would become best.pth
    assert evaluate_main([str(run), "--best-by", "cer"]) == 0
    result = read_result(result_path(run / "model_step100.pth"))
    assert result["health"]["runaway"]["flagged"] and "no stop code" in result["health"]["runaway"]["reasons"]
    assert all(item["hit_stop"] is False for item in result["items"])
    assert _best_step(run) is None
    assert health_cell(result).startswith("runaway 6/6")
    assert "runs away" in disqualification(result)
    from webui.checkpoints.rows import list_view

    rows = {row["file"]: row for row in list_view(str(run), tmp_path).table.to_dict("records")}
    assert rows["model_step100.pth"]["health"].startswith("runaway 6/6 (no stop code")
    reasons = [e["best_reason"] for e in _events(run) if e.get("event") == "eval" and e["step"] == 100]
    assert reasons and "is never best: it runs away on 6 of 6 items" in reasons[-1]
    from trainer.evaluation.best import pinned_names

    assert "model_step100.pth" not in pinned_names(run, "cer", 5)


def test_an_adapter_with_zero_b_matrices_is_flagged_and_never_best(demo_workspace, data, models, tmp_path):
    run = _run(demo_workspace, data, models, tmp_path / "lora", lora=True, lora_rank=4, learning_rate=0.0,
               max_steps=2, save_interval=2)
    assert evaluate_main([str(run)]) == 0
    result = read_result(result_path(run / "model_step2.pth"))
    adapter = result["health"]["adapter"]
    assert adapter == {"applied": False, "reason": "its B matrices are all zero", "flagged": True}
    assert health_cell(result).startswith("adapter changes nothing")
    assert _best_step(run) is None  # the only measured checkpoint, and never best


def test_a_trained_adapter_is_applied_its_speech_differs_without_it(demo_workspace, data, models, tmp_path):
    run = _run(demo_workspace, data, models, tmp_path / "lora", lora=True, lora_rank=4, max_steps=2,
               save_interval=2)
    assert evaluate_main([str(run)]) == 0
    result = read_result(result_path(run / "model_step2.pth"))
    assert result["health"]["adapter"] == {"applied": True, "reason": None, "flagged": False}
    assert "adapter" not in result["health"]["summary"] and "adapter" not in (disqualification(result) or "")


def test_a_fine_tune_clearly_worse_than_zero_shot_is_flagged_with_its_paired_differences(tmp_path):
    evaluator = _paced_evaluator(tmp_path, {0: 1.0, 2: 1.0, 4: 1.0}, garbled=frozenset({2}))
    evaluator.evaluate_base()
    for step in (2, 4):
        (tmp_path / f"model_step{step}.pth").write_bytes(f"weights {step}".encode())
        evaluator.evaluate_checkpoint(tmp_path / f"model_step{step}.pth")
    worse = read_result(result_path(tmp_path / "model_step2.pth"))["health"]
    assert worse["zero_shot"]["worse"] == ["cer", "wer"] and worse["zero_shot"]["flagged"]
    assert worse["zero_shot"]["difference"]["cer"]["low"] > 0 and worse["zero_shot"]["difference"]["cer"]["items"] == 24
    assert worse["summary"] == "worse than zero-shot (CER, WER)"
    same = read_result(result_path(tmp_path / "model_step4.pth"))["health"]
    assert same["zero_shot"]["worse"] == [] and same["summary"] == "ok"
    from trainer.evaluation.health import health_lines

    assert any(line.startswith("against zero-shot") and "not clearly worse" in line for line in health_lines(same))


def test_an_item_runs_away_by_loop_or_by_a_length_beyond_the_speakers_range():
    from trainer.evaluation.health import LENGTH_MARGIN, RealSpeech, runaway_of, runaway_reasons

    real = RealSpeech(clips=4, chars_per_second=10.0, seconds_per_char_low=0.08, seconds_per_char_high=0.12)
    item = {"text": "abcde fghij", "hit_stop": True, "loop": None, "audio_seconds": 1.0}  # 10 characters, 0.1 s each
    assert runaway_reasons(item, real) == []
    assert runaway_reasons({**item, "loop": [3, 32]}, real) == ["loops"]
    too_long = 10 * 0.12 * LENGTH_MARGIN * 1.01
    assert runaway_reasons({**item, "audio_seconds": too_long}, real) == ["too long for its text"]
    assert runaway_reasons({**item, "audio_seconds": 0.0}, real) == ["too short for its text"]
    items = [item] * 9 + [{**item, "hit_stop": False}]
    assert runaway_of(items, real) == {"items": 1, "of": 10, "share": 0.1, "reasons": ["no stop code"],
                                       "flagged": False}  # one in ten: not more than RUNAWAY_SHARE
    assert runaway_of(items[:4] + items[-1:], real)["flagged"]  # one in five
