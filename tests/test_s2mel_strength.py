"""Adapter strength (issue #38): 0 speaks exactly as the base S2Mel, 1 exactly as the merged export; the keep gate
chooses a strength and records it, and the export writes it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from networks.s2mel import S2Mel, load_s2mel
from tests.s2mel_tiny import TINY_SECTION, model_kwargs, save_base, tiny_clips, tiny_model
from tests.test_s2mel_training import settings
from trainer.s2mel.export import (
    base_record,
    export_adapter,
    export_stock_s2mel,
    recorded_strength,
    trained_s2mel_at,
)
from trainer.s2mel.keep import VoiceScore, choose_strength
from trainer.s2mel.loop import S2MelTrainer
from trainer.s2mel.strength import check_strength


@pytest.fixture(scope="module", params=[("2.5", "lora"), ("2", "full")])
def trained_run(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """(generation, base s2mel.pth, the run's latest.pth) of a tiny run that moved the decoder."""
    generation, mode = request.param
    folder = tmp_path_factory.mktemp(f"strength_{generation}_{mode}")
    base = save_base(tiny_model(generation), folder)
    S2MelTrainer(tiny_model(generation), tiny_clips(generation), settings(mode, max_steps=2), folder / "run",
                 base=base_record(base)).run()
    return generation, base, folder / "run" / "latest.pth"


def spoken_mel(model: S2Mel) -> torch.Tensor:
    """A mel the decoder speaks from a fixed prompt, text and CFM noise seed."""
    clip = tiny_clips("2.5", count=1, seed=2)[0]
    with torch.no_grad():
        return model.infer_features(prompt_condition=model.prompt_condition(clip.code_embedding[None, :11], 20),
                                    ref_mel=clip.mel[None, :, :20], style=clip.style[None],
                                    semantic=clip.code_embedding[None], target_frames=30, steps=3,
                                    generator=torch.Generator().manual_seed(0))


def test_strength_0_speaks_as_the_base_and_1_as_the_merged_export(trained_run, tmp_path: Path) -> None:
    generation, base, latest = trained_run
    kwargs = model_kwargs(generation)
    merged = export_stock_s2mel(latest, base, TINY_SECTION, tmp_path / "s2mel.pth", **kwargs)
    at = {s: spoken_mel(trained_s2mel_at(latest, base, TINY_SECTION, s, **kwargs)) for s in (0.0, 0.5, 1.0)}
    assert torch.equal(at[0.0], spoken_mel(load_s2mel(base, TINY_SECTION, **kwargs)))
    assert torch.equal(at[1.0], spoken_mel(load_s2mel(merged, TINY_SECTION, **kwargs)))
    assert not torch.equal(at[0.5], at[0.0]) and not torch.equal(at[0.5], at[1.0])  # in between: neither


def test_export_at_a_strength_writes_the_blend_and_an_adapter_records_it(trained_run, tmp_path: Path) -> None:
    generation, base, latest = trained_run
    kwargs = model_kwargs(generation)
    zero = export_stock_s2mel(latest, base, TINY_SECTION, tmp_path / "zero.pth", 0.0, **kwargs)
    for part, state in torch.load(base, weights_only=True)["net"].items():
        written = torch.load(zero, weights_only=True)["net"][part]
        assert all(torch.equal(value, written[key]) for key, value in state.items()), part
    if generation == "2.5":  # the LoRA run
        adapter = export_adapter(latest, tmp_path / "adapter.pth", 0.6)
        assert recorded_strength(torch.load(adapter, weights_only=True)) == 0.6
    with pytest.raises(ValueError, match="from 0 to 1"):
        check_strength(1.5)


def test_the_gate_keeps_the_best_strength_that_passes_and_records_it() -> None:
    without = [VoiceScore("a", 0.80, 0.10), VoiceScore("b", 0.70, 0.20)]
    by_strength = {
        1.0: [VoiceScore("a", 0.90, 0.14), VoiceScore("b", 0.80, 0.22)],  # more similar, but CER rose
        0.6: [VoiceScore("a", 0.85, 0.10), VoiceScore("b", 0.74, 0.20)],  # passes
        0.3: [VoiceScore("a", 0.82, 0.10), VoiceScore("b", 0.71, 0.20)],  # passes, less similar
    }
    decision = choose_strength(without, by_strength, max_cer_increase=0.01)
    assert decision.keep and decision.strength == 0.6
    assert "at strength 0.6 (of 0.3, 0.6, 1)" in decision.reason

