"""Health's adapter check for S2Mel adapters (issue 38): an S2Mel LoRA whose B matrices never left zero is flagged
"adapter changes nothing" where S2Mel checkpoints are scored (``python -m trainer.s2mel.evaluate``) and the keep gate
never takes it; a trained demo adapter stays quiet. The checks on the file and the weights are unit-tested on tiny
tensors; the two runs are 2-step LoRA runs of the demo's tiny IndexTTS-2.5 S2Mel, judged by tiny random judges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.s2mel_demo_run import make_s2mel_run
from tests.speech_model_factory import build_ctc_model, build_xvector_model
from trainer.checkpoints.__main__ import main as checkpoints_main
from trainer.evaluation.health import ZERO_B_REASON
from trainer.s2mel.adapter_health import (
    MERGED_TO_BASE_REASON,
    adapter_weights_zero,
    merges_to_base,
    s2mel_adapter_block,
    unchanged_reason,
)
from trainer.s2mel.evaluate import SCORES_FILE
from trainer.s2mel.evaluate import main as evaluate_main
from trainer.s2mel.keep import VoiceScore, choose_strength, decide_adapter
from webui.testing.s2mel_scores_view import scores_html

B_KEY = "transformer.layers.0.attention.wqkv.lora_B.weight"
A_KEY = "transformer.layers.0.attention.wqkv.lora_A.weight"


def _lora(b: torch.Tensor, **extra: object) -> dict:
    return {"mode": "lora", "adapter": {A_KEY: torch.ones(2, 3), B_KEY: b, **extra.pop("adapter", {})}, **extra}


def test_the_file_alone_tells_zero_b_factors_and_nothing_else():
    assert adapter_weights_zero(_lora(torch.zeros(3, 2))) is True
    assert adapter_weights_zero(_lora(torch.tensor([[0.0, 1e-7], [0.0, 0.0], [0.0, 0.0]]))) is False
    # a DoRA magnitude or a trained regulator can change the decoder with zero B: the weights must tell
    magnitude = {"transformer.layers.0.attention.wqkv.lora_magnitude_vector": torch.ones(3)}
    assert adapter_weights_zero(_lora(torch.zeros(3, 2), adapter=magnitude)) is False
    assert adapter_weights_zero(_lora(torch.zeros(3, 2), regulator={"w": torch.ones(1)})) is False
    assert adapter_weights_zero({"mode": "full", "net": {}}) is None  # a full fine-tune has no adapter


def test_a_decoder_that_merges_into_the_base_unchanged_is_flagged_and_a_changed_one_is_not():
    torch.manual_seed(0)
    base = nn.Linear(4, 4)
    same, moved = nn.Linear(4, 4), nn.Linear(4, 4)
    same.load_state_dict(base.state_dict())
    moved.load_state_dict({k: v + 1e-4 for k, v in base.state_dict().items()})
    dora = _lora(torch.zeros(3, 2), adapter={"x.lora_magnitude_vector": torch.ones(3)})
    clips = [[torch.zeros(8).numpy()]]
    assert merges_to_base(same, base) and not merges_to_base(moved, base)
    assert s2mel_adapter_block(dora, same, base, clips, clips) == {
        "applied": False, "reason": MERGED_TO_BASE_REASON, "flagged": True}
    other = [[torch.ones(8).numpy()]]
    assert s2mel_adapter_block(dora, moved, base, clips, other)["applied"] is True
    assert s2mel_adapter_block(dora, moved, base, clips, clips)["flagged"] is True  # the very same audio


def test_the_keep_gate_leaves_out_an_adapter_that_changes_nothing_however_it_scores():
    without, better = [VoiceScore("a", 0.80, 0.10)], [VoiceScore("a", 0.90, 0.05)]
    health = {"adapter": {"applied": False, "reason": ZERO_B_REASON, "flagged": True}}
    unchanged = unchanged_reason(health)
    assert unchanged == f"adapter changes nothing ({ZERO_B_REASON})"
    decision = decide_adapter(without, better, unchanged=unchanged)
    assert not decision.keep and decision.reason.startswith(f"S2Mel adapter left out: {unchanged}")
    assert not choose_strength(without, {0.5: better, 1.0: better}, unchanged=unchanged).keep
    assert decide_adapter(without, better, unchanged=unchanged, override="keep").keep  # the user's word still wins
    assert decide_adapter(without, better, unchanged=unchanged_reason({"adapter": {"flagged": False}})).keep
    assert unchanged_reason("damaged") is None and unchanged_reason({"adapter": [1]}) is None


@pytest.fixture(scope="module")
def judges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("judges")
    return build_xvector_model(folder / "xvector"), build_ctc_model(folder / "ctc")


def _evaluate(demo_root: Path, judges: tuple[Path, Path], run: Path, learning_rate: float) -> tuple[Path, dict]:
    paths = DemoV25Paths.under(demo_root)
    model_dir = paths.config.parent
    latest = make_s2mel_run(model_dir, run, mode="lora", steps=2, learning_rate=learning_rate, seed=0)
    voice = sorted((paths.train_manifest.parent / "wavs").glob("*.wav"))[0]
    xvector, ctc = judges
    assert evaluate_main([str(latest), "--model-dir", str(model_dir), "--voices", str(voice), "--speaker-model",
                          str(xvector), "--asr", str(ctc), "--steps", "2", "--max-codes", "12"]) == 0
    return latest, json.loads((run / SCORES_FILE).read_text(encoding="utf-8"))


def test_an_s2mel_adapter_with_zero_b_matrices_is_flagged_and_never_exported(demo_workspace, judges, tmp_path,
                                                                             capsys):
    latest, scores = _evaluate(demo_workspace.root, judges, tmp_path / "run", learning_rate=0.0)
    assert scores["health"]["adapter"] == {"applied": False, "reason": ZERO_B_REASON, "flagged": True}
    assert scores["health"]["summary"] == "adapter changes nothing"
    assert scores["keep"] is False
    assert scores["reason"].startswith(f"S2Mel adapter left out: adapter changes nothing ({ZERO_B_REASON})")
    assert "health: adapter changes nothing" in capsys.readouterr().out
    assert 'data-ok="false">health: adapter changes nothing' in scores_html(latest)
    model_dir = DemoV25Paths.under(demo_workspace.root).config.parent
    out = tmp_path / "out"
    assert checkpoints_main(["export-s2mel", str(latest), "--model-dir", str(model_dir), "--out", str(out)]) == 2
    assert "not exported: S2Mel adapter left out: adapter changes nothing" in capsys.readouterr().err
    assert not out.exists()


def test_a_trained_demo_s2mel_adapter_stays_quiet(demo_workspace, judges, tmp_path):
    latest, scores = _evaluate(demo_workspace.root, judges, tmp_path / "run", learning_rate=0.05)
    assert scores["health"] == {"adapter": {"applied": True, "reason": None, "flagged": False}, "summary": "ok"}
    assert "changes nothing" not in scores["reason"]
    assert 'data-ok="true">health: ok' in scores_html(latest)
