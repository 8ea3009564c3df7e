"""Cross-clip prompts (issue #38): each S2Mel target is prompted by another clip of its speaker, drawn from the
run's generator, and a killed run resumes bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.s2mel_tiny import tiny_clips, tiny_model
from tests.test_s2mel_training import settings
from trainer.s2mel.cross_prompt import resolve_prompt_mode
from trainer.s2mel.loop import S2MelTrainer, trainable_state
from trainer.s2mel.train_settings import S2MelRunError

SPEAKERS = ["amara", "amara", "bekele"]  # two clips of one speaker, one alone


def cross_trainer(generation: str, out: Path, speakers: list[str | None], **overrides) -> S2MelTrainer:
    clips = tiny_clips(generation, count=len(speakers))
    return S2MelTrainer(tiny_model(generation), clips, settings("lora", prompt="auto", **overrides), out,
                        speakers=speakers)


def test_two_clips_of_one_speaker_prompt_each_other_and_never_themselves(tmp_path: Path) -> None:
    trainer = cross_trainer("2.5", tmp_path, SPEAKERS, batch_size=3)
    assert trainer.prompt_mode == "cross"
    clips = trainer.clips
    seen: set[tuple[int, int]] = set()
    for _ in range(4):  # four epochs of the three clips
        indices = trainer.next_indices()
        batch = trainer.prompted_batch(indices)
        for row, (target, prompt) in enumerate(trainer.last_prompts):
            seen.add((target, prompt))
            p = int(batch.prompt_lens[row])
            # the prompt region is the partner's first frames and its style; the rest is the whole target
            assert int(batch.x_lens[row]) == p + clips[target].frames
            assert torch.equal(batch.x1[row, :, :p], clips[prompt].mel[:, :p])
            assert torch.equal(batch.x1[row, :, p : p + clips[target].frames], clips[target].mel)
            assert torch.equal(batch.style[row], clips[prompt].style)
    assert seen == {(0, 1), (1, 0), (2, 2)}  # the lone speaker's clip keeps its own prompt


def test_auto_is_own_without_several_clips_per_speaker_and_cross_is_refused_there() -> None:
    assert resolve_prompt_mode("auto", ["a", "b", None]) == "own"
    assert resolve_prompt_mode("auto", ["a", "b", "a"]) == "cross"
    with pytest.raises(ValueError, match="no speaker of the training manifest has two clips"):
        resolve_prompt_mode("cross", ["a", "b", None])
    with pytest.raises(S2MelRunError, match="no speaker"):
        S2MelTrainer(tiny_model("2.5"), tiny_clips("2.5", count=2), settings("lora", prompt="cross"), "unused",
                     speakers=["a", "b"])


@pytest.mark.parametrize("generation", ["2", "2.5"])
def test_cross_prompt_run_killed_and_resumed_bit_exactly(tmp_path: Path, generation: str) -> None:
    speakers = ["amara", "amara", "amara", "bekele", "bekele"]
    straight = cross_trainer(generation, tmp_path / "straight", speakers)
    straight.run()
    killed = cross_trainer(generation, tmp_path / "killed", speakers)
    killed.run(until_step=5)  # saved at step 3, then "killed" after step 5
    resumed = cross_trainer(generation, tmp_path / "killed", speakers)
    assert resumed.resume_if_any() == tmp_path / "killed" / "latest.pth" and resumed.step_count == 3
    resumed.run()
    assert resumed.last_prompts == straight.last_prompts  # the last step drew the same partners
    want, got = trainable_state(straight.model), trainable_state(resumed.model)
    assert want.keys() == got.keys() and want
    assert all(torch.equal(want[name], got[name]) for name in want)


def test_a_run_never_resumes_with_other_prompts(tmp_path: Path) -> None:
    own = S2MelTrainer(tiny_model("2.5"), tiny_clips("2.5", count=3), settings("lora", max_steps=3, prompt="own"),
                       tmp_path, speakers=SPEAKERS)
    own.run()
    assert own.prompt_mode == "own"
    cross = cross_trainer("2.5", tmp_path, SPEAKERS)
    with pytest.raises(S2MelRunError, match="trained with own prompts; this run's are cross: resume with "
                                            "--s2mel-prompt own"):
        cross.resume_if_any()
