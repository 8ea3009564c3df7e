"""S2Mel training loop: loss goes down, exact resume after a kill, LoRA and DoRA merged export, adapter export, keep
rule."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch

from networks.s2mel import load_s2mel
from tests.s2mel_tiny import TINY_SECTION, model_kwargs, save_base, tiny_clips, tiny_model
from trainer.checkpoints.format import CheckpointError
from trainer.s2mel.export import (
    S2MelExportError,
    base_record,
    build_trained_s2mel,
    export_adapter,
    export_stock_s2mel,
)
from trainer.s2mel.forward import FlowDraws
from trainer.s2mel.keep import VoiceScore, decide_adapter
from trainer.s2mel.loop import S2MelTrainer, trainable_state, unused_parameter_names
from trainer.s2mel.lora import S2MelLoRASettings, has_adapters, merged_copy
from trainer.s2mel.train_settings import S2MelTrainSettings

CASES = [("2", "full"), ("2", "lora"), ("2.5", "full"), ("2.5", "lora")]
ADAPTER_CASES = [("2", "lora"), ("2.5", "lora"), ("2", "dora"), ("2.5", "dora")]


def settings(mode: str, **overrides) -> S2MelTrainSettings:
    """``mode`` full, lora, or dora (LoRA adapters with peft's DoRA magnitudes)."""
    values = {
        "mode": "lora" if mode == "dora" else mode,
        "batch_size": 2,
        "max_steps": 6,
        "save_interval": 3,
        "learning_rate": 3e-3,
        "lora": S2MelLoRASettings(rank=4, alpha=8, dropout=0.1, dora=mode == "dora"),
        "seed": 7,
    }
    values.update(overrides)
    return S2MelTrainSettings(**values)


def trainer_for(generation: str, mode: str, out: Path, **overrides) -> S2MelTrainer:
    return S2MelTrainer(tiny_model(generation), tiny_clips(generation), settings(mode, **overrides), out)


@pytest.mark.parametrize(("generation", "mode"), [*CASES, ("2.5", "dora")])
def test_killed_run_resumes_bit_exactly(tmp_path: Path, generation: str, mode: str) -> None:
    straight = trainer_for(generation, mode, tmp_path / "straight")
    straight.run()
    killed = trainer_for(generation, mode, tmp_path / "killed")
    killed.run(until_step=5)  # saved at step 3, then "killed" after step 5 without a save
    resumed = trainer_for(generation, mode, tmp_path / "killed")
    assert resumed.resume_if_any() == tmp_path / "killed" / "latest.pth"
    assert resumed.step_count == 3
    resumed.run()
    steps = [json.loads(line)["step"] for line in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]  # the redone steps 4-5 are logged once
    want, got = trainable_state(straight.model), trainable_state(resumed.model)
    assert want.keys() == got.keys() and want
    for name in want:
        assert torch.equal(want[name], got[name]), name
    a, b = straight.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    for index in a:
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(a[index][key], b[index][key]), (index, key)


@pytest.mark.parametrize(("generation", "mode"), CASES)
def test_training_lowers_the_loss(tmp_path: Path, generation: str, mode: str) -> None:
    # LoRA on a randomly initialised DiT can move less than a full fine-tune: every Linear group is a target here,
    # and the bar is lower (measured: full -10 % or more, LoRA about -3 % in 40 steps).
    lora = S2MelLoRASettings(rank=4, alpha=8, targets=("attention", "feed_forward", "norms", "io"))
    trainer = trainer_for(
        generation,
        mode,
        tmp_path,
        max_steps=40,
        save_interval=40,
        learning_rate=1e-2 if mode == "lora" else 3e-3,
        class_dropout_prob=0.0,
        lora=lora,
    )
    bar = 0.98 if mode == "lora" else 0.9
    probe = tiny_clips(generation)

    def fixed_loss() -> float:  # the same draws every time, dropout off (train mode: see forward.py)
        from trainer.s2mel.batches import collate

        trainer.model.eval()
        batch = collate(probe, torch.tensor([c.frames // 3 for c in probe]))
        g = torch.Generator().manual_seed(0)
        draws = FlowDraws(
            torch.rand(len(probe), 1, 1, generator=g), torch.randn(batch.x1.shape, generator=g), 1.0
        )
        with torch.no_grad():
            return float(trainer.batch_loss(batch, draws))

    before = fixed_loss()
    trainer.run()
    after = fixed_loss()
    assert after < bar * before, (before, after)


def test_lora_trains_only_adapters_and_never_unused_layers(tmp_path: Path) -> None:
    trainer = trainer_for("2", "lora", tmp_path)
    names = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert names and all(".lora_" in n for n in names)
    assert not any("skip_in_linear" in n for n in names)
    full = trainer_for("2", "full", tmp_path / "full")
    frozen = set(unused_parameter_names(full.model, uses_gpt_layer=True))
    assert "cfm.estimator.transformer.layers.1.skip_in_linear.weight" in frozen
    assert "cfm.estimator.transformer.layers.2.skip_in_linear.weight" not in frozen
    assert not any(n.startswith("gpt_layer") for n in frozen)  # v2 feeds latents: gpt_layer trains


@pytest.mark.parametrize(("generation", "mode"), ADAPTER_CASES)
def test_lora_export_merged_equals_the_wrapped_model_and_loads_stock(
    tmp_path: Path, generation: str, mode: str
) -> None:
    base = save_base(tiny_model(generation), tmp_path)
    trainer = S2MelTrainer(
        tiny_model(generation),
        tiny_clips(generation),
        settings(mode),
        tmp_path / "run",
        base=base_record(base),
    )
    trainer.run()
    saved = torch.load(tmp_path / "run" / "latest.pth", weights_only=True)
    magnitudes = [key for key in saved["adapter"] if "lora_magnitude_vector" in key]
    assert bool(magnitudes) == (mode == "dora") and saved["lora"]["dora"] == (mode == "dora")
    out = export_stock_s2mel(
        tmp_path / "run" / "latest.pth",
        base,
        TINY_SECTION,
        tmp_path / "export" / "s2mel.pth",
        **model_kwargs(generation),
    )
    stock = load_s2mel(out, TINY_SECTION, **model_kwargs(generation))  # strict load into the stock layout
    assert not has_adapters(stock)
    wrapped = build_trained_s2mel(
        tmp_path / "run" / "latest.pth", base, TINY_SECTION, **model_kwargs(generation)
    )
    assert has_adapters(wrapped)
    clips = tiny_clips(generation, count=2, seed=3)
    from trainer.s2mel.batches import collate
    from trainer.s2mel.forward import regulate

    batch = collate(clips, torch.tensor([5, 6]))
    g = torch.Generator().manual_seed(1)
    t, z = torch.rand(2, 1, 1, generator=g), torch.randn(batch.x1.shape, generator=g)
    outs = []
    for model in (wrapped, stock):
        with torch.no_grad():
            mu = regulate(model.length_regulator, batch.code_embedding, batch.semantic_lens, batch.x_lens)
            outs.append(
                model.cfm.estimator(
                    t * batch.x1 + (1 - t) * z, batch.x1 * 0, batch.x_lens, t.flatten(), batch.style, mu
                )
            )
    assert float((outs[0] - outs[1]).abs().max()) < 1e-5
    moved = sum(
        float((a - b).abs().max())
        for a, b in zip(
            merged_copy(wrapped).cfm.estimator.state_dict().values(),
            load_s2mel(base, TINY_SECTION, **model_kwargs(generation)).cfm.estimator.state_dict().values(),
            strict=True,
        )
    )
    assert moved > 0, "the merged export must differ from the base"

    adapter = export_adapter(tmp_path / "run" / "latest.pth", tmp_path / "export" / "adapter.pth")
    assert os.path.getsize(adapter) < os.path.getsize(out)
    again = export_stock_s2mel(
        adapter, base, TINY_SECTION, tmp_path / "export" / "again.pth", **model_kwargs(generation)
    )
    for part, state in torch.load(out, weights_only=True)["net"].items():
        for key, value in state.items():
            assert torch.equal(value, torch.load(again, weights_only=True)["net"][part][key]), key


def test_full_export_and_adapter_refusal(tmp_path: Path) -> None:
    base = save_base(tiny_model("2.5"), tmp_path)
    trainer = S2MelTrainer(tiny_model("2.5"), tiny_clips("2.5"), settings("full"), tmp_path / "run")
    trainer.run()
    out = export_stock_s2mel(
        tmp_path / "run" / "latest.pth", base, TINY_SECTION, tmp_path / "s2mel.pth", with_gpt_layer=False
    )
    exported = load_s2mel(out, TINY_SECTION, with_gpt_layer=False)
    for key, value in exported.cfm.state_dict().items():
        assert torch.equal(value, trainer.model.cfm.state_dict()[key]), key
    with pytest.raises(S2MelExportError, match="no adapter"):
        export_adapter(tmp_path / "run" / "latest.pth", tmp_path / "a.pth")


def test_adapter_from_another_base_is_refused(tmp_path: Path) -> None:
    base = save_base(tiny_model("2.5"), tmp_path)
    trainer = S2MelTrainer(
        tiny_model("2.5"),
        tiny_clips("2.5"),
        settings("lora", max_steps=3),
        tmp_path / "run",
        base=base_record(base),
    )
    trainer.run()
    other = tmp_path / "other"
    other.mkdir()
    other_base = save_base(tiny_model("2.5", seed=9), other)
    with pytest.raises(S2MelExportError, match=r"another s2mel\.pth"):
        export_stock_s2mel(
            tmp_path / "run" / "latest.pth",
            other_base,
            TINY_SECTION,
            tmp_path / "x.pth",
            with_gpt_layer=False,
        )


def test_torn_latest_falls_back_to_the_previous_checkpoint(tmp_path: Path) -> None:
    trainer = trainer_for("2.5", "lora", tmp_path, max_steps=6, save_interval=3, keep_checkpoints=3)
    trainer.run()
    latest = tmp_path / "latest.pth"
    data = latest.read_bytes()
    torn = tmp_path / "torn.tmp"
    torn.write_bytes(data[: len(data) // 2])
    os.replace(torn, latest)
    resumed = trainer_for("2.5", "lora", tmp_path)
    assert resumed.resume_if_any() == tmp_path / "model_step6.pth"  # latest.pth was a link to it
    assert resumed.step_count == 6 and "instead of latest.pth" in resumed.notes[0]
    for path in tmp_path.glob("model_step*.pth"):
        path.write_bytes(b"junk")
    latest.unlink()
    with pytest.raises(CheckpointError, match="not starting fresh"):
        trainer_for("2.5", "lora", tmp_path).resume_if_any()


def test_resume_refuses_other_lora_settings(tmp_path: Path) -> None:
    trainer_for("2.5", "lora", tmp_path, max_steps=3).run()
    other = S2MelTrainer(
        tiny_model("2.5"), tiny_clips("2.5"), settings("lora", lora=S2MelLoRASettings(rank=2)), tmp_path
    )
    with pytest.raises(ValueError, match="LoRA settings"):
        other.resume_if_any()
    with pytest.raises(ValueError, match="LoRA settings"):  # DoRA is another layout
        trainer_for("2.5", "dora", tmp_path).resume_if_any()
    old = torch.load(tmp_path / "latest.pth", weights_only=True)
    del old["lora"]["dora"]  # a record written before DoRA existed: plain LoRA
    again = trainer_for("2.5", "lora", tmp_path / "again")
    again.restore(old, "old")
    assert again.step_count == 3


def test_checkpoints_load_weights_only(tmp_path: Path) -> None:
    trainer_for("2", "lora", tmp_path, max_steps=3).run()
    ckpt = torch.load(tmp_path / "latest.pth", weights_only=True)
    assert ckpt["part"] == "s2mel" and ckpt["step"] == 3 and ckpt["mode"] == "lora"
    assert ckpt["integrity"]


def test_adapter_that_makes_similarity_worse_is_left_out() -> None:
    g = torch.Generator().manual_seed(1234)
    voices = [f"voice{i}" for i in range(5)]
    base_sim = (0.6 + 0.2 * torch.rand(5, generator=g)).tolist()
    base_cer = (0.05 + 0.1 * torch.rand(5, generator=g)).tolist()
    worse = (torch.tensor(base_sim) - 0.05 * torch.rand(5, generator=g) - 0.01).tolist()
    without = [VoiceScore(v, s, c) for v, s, c in zip(voices, base_sim, base_cer, strict=True)]
    with_adapter = [VoiceScore(v, s, c) for v, s, c in zip(voices, worse, base_cer, strict=True)]
    decision = decide_adapter(without, with_adapter)
    assert not decision.keep
    assert "left out" in decision.reason and "similarity fell" in decision.reason
    assert decision.similarity_with < decision.similarity_without
    forced = decide_adapter(without, with_adapter, override="keep")
    assert forced.keep and "override" in forced.reason and "similarity fell" in forced.reason
    better = [VoiceScore(v, s + 0.02, c) for v, s, c in zip(voices, base_sim, base_cer, strict=True)]
    assert decide_adapter(without, better).keep
    worse_cer = [
        VoiceScore(v, s + 0.02, c + 0.05) for v, s, c in zip(voices, base_sim, base_cer, strict=True)
    ]
    decision = decide_adapter(without, worse_cer)
    assert not decision.keep and "CER rose" in decision.reason
    assert not decide_adapter(without, better, override="drop").keep


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="mode"):
        S2MelTrainSettings(mode="half")
    with pytest.raises(ValueError, match="prompt fraction"):
        S2MelTrainSettings(prompt_fraction=(0.0, 0.5))
    with pytest.raises(ValueError, match="targets"):
        S2MelLoRASettings(targets=("everything",))
    assert copy.deepcopy(S2MelTrainSettings()).record()["lora"]["targets"] == ["attention", "feed_forward"]


def test_split_regulation_mirrors_inference_two_calls() -> None:
    from trainer.s2mel.batches import collate
    from trainer.s2mel.forward import prompt_semantic_frames, regulate, regulate_split

    model = tiny_model("2.5")
    clips = tiny_clips("2.5", count=2)
    batch = collate(clips, torch.tensor([7, 9]))
    continuous = torch.randn_like(batch.code_embedding)
    with torch.no_grad():
        mu = regulate_split(
            model.length_regulator,
            continuous,
            batch.code_embedding,
            batch.semantic_lens,
            batch.prompt_lens,
            batch.x_lens,
        )
        ks = prompt_semantic_frames(batch.prompt_lens, batch.x_lens, batch.semantic_lens)
        for b in range(2):
            k, p, n = int(ks[b]), int(batch.prompt_lens[b]), int(batch.x_lens[b])
            prompt = model.length_regulator(continuous[b : b + 1, :k], torch.tensor([p]))
            rest = model.length_regulator(
                batch.code_embedding[b : b + 1, k : int(batch.semantic_lens[b])], torch.tensor([n - p])
            )
            assert torch.equal(mu[b, :p], prompt[0]) and torch.equal(mu[b, p:n], rest[0])
            assert bool((mu[b, n:] == 0).all())
        one_call = regulate(model.length_regulator, batch.code_embedding, batch.semantic_lens, batch.x_lens)
    assert not torch.allclose(mu, one_call), "one call over prompt and target has no seam"
    assert int(ks.min()) >= 1 and bool((ks < batch.semantic_lens).all())


def test_prompt_features_feed_the_prompt_region_in_training(tmp_path: Path) -> None:
    clips = [
        type(c)(
            mel=c.mel,
            style=c.style,
            code_embedding=c.code_embedding,
            prompt_semantic=c.code_embedding[:-1] * 2,
            name=c.name,
        )
        for c in tiny_clips("2.5")
    ]
    trainer = S2MelTrainer(tiny_model("2.5"), clips, settings("lora", max_steps=2), tmp_path)
    trainer.run()
    assert trainer.step_count == 2 and torch.isfinite(torch.tensor(trainer.last_loss))


def test_validation_loss_is_repeatable_and_leaves_the_run_unchanged(tmp_path: Path) -> None:
    straight = trainer_for("2.5", "lora", tmp_path / "a", max_steps=4)
    straight.run()
    probed = trainer_for("2.5", "lora", tmp_path / "b", max_steps=4)
    probed.run(until_step=2)
    held_out = tiny_clips("2.5", count=3, seed=5)
    first = probed.validation_loss(held_out)
    assert probed.validation_loss(held_out) == first
    probed.run()
    for name, value in trainable_state(straight.model).items():
        assert torch.equal(value, trainable_state(probed.model)[name]), name


def test_exported_s2mel_synthesises_a_mel(tmp_path: Path) -> None:
    base = save_base(tiny_model("2.5"), tmp_path)
    S2MelTrainer(
        tiny_model("2.5"),
        tiny_clips("2.5"),
        settings("lora", max_steps=2),
        tmp_path / "run",
        base=base_record(base),
    ).run()
    out = export_stock_s2mel(
        tmp_path / "run" / "latest.pth", base, TINY_SECTION, tmp_path / "s2mel.pth", with_gpt_layer=False
    )
    model = load_s2mel(out, TINY_SECTION, with_gpt_layer=False)
    clip = tiny_clips("2.5", count=1, seed=2)[0]
    ref_mel = clip.mel[None, :, :20]
    condition = model.prompt_condition(clip.code_embedding[None, :11], 20)
    mel = model.infer_features(
        prompt_condition=condition,
        ref_mel=ref_mel,
        style=clip.style[None],
        semantic=clip.code_embedding[None],
        target_frames=30,
        steps=3,
        generator=torch.Generator().manual_seed(0),
    )
    assert mel.shape == (1, 80, 30) and bool(torch.isfinite(mel).all())


def test_inspect_lines_name_the_s2mel_part(tmp_path: Path) -> None:
    from trainer.s2mel.checkpoint import describe_s2mel_checkpoint, is_s2mel_checkpoint

    trainer_for("2.5", "lora", tmp_path, max_steps=1, save_interval=1).run()
    ckpt = torch.load(tmp_path / "latest.pth", weights_only=True)
    assert is_s2mel_checkpoint(ckpt)
    lines = describe_s2mel_checkpoint(ckpt)
    assert lines[0].startswith("part: S2Mel decoder (lora fine-tune), step 1")
    assert any(line.startswith("LoRA rank 4") for line in lines)


def test_samples_at_saves_leave_the_run_bit_exact(tmp_path: Path) -> None:
    import numpy as np

    from trainer.s2mel.samples import sample_hook

    class FakeSynth:
        """Draws from torch's global RNG like synthesis without seeded noise does, and voices with nets.s2mel."""

        def __init__(self) -> None:
            self.nets = type("Nets", (), {"s2mel": None})()
            self.seen: list[object] = []

        def synthesize(self, text: str, voice: object):
            self.seen.append(self.nets.s2mel)
            torch.rand(1000)
            return type("R", (), {"waveform": np.zeros(160, dtype=np.float32), "sample_rate": 16000})()

    straight = trainer_for("2.5", "lora", tmp_path / "a", max_steps=4, save_interval=2)
    straight.run()
    synth = FakeSynth()
    sampled = trainer_for("2.5", "lora", tmp_path / "b", max_steps=4, save_interval=2)
    sampled.run(on_save=sample_hook(synth, ["hello"], "voice.wav", tmp_path / "b"))
    assert sorted(p.name for p in (tmp_path / "b" / "samples").iterdir()) == [
        "s2mel_step2_0.wav",
        "s2mel_step4_0.wav",
    ]
    assert synth.nets.s2mel is None and not has_adapters(synth.seen[0])
    for name, value in trainable_state(straight.model).items():
        assert torch.equal(value, trainable_state(sampled.model)[name]), name
