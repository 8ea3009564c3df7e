"""Cross-clip prompts: each S2Mel training target is prompted by another clip of the same speaker, as at synthesis.

At synthesis the decoder's prompt (its first mel frames, their semantic input and the CAM++ style) comes from a
reference recording, never from the sentence being spoken. Prompting every target with its own first frames and
style teaches an adapter a constant offset that helps re-rendering and hurts generated speech (issue #38). In
"cross" mode every target of a step draws a partner clip of its speaker from the run's seeded generator (so a new
partner per target and per epoch, and a resumed run draws what the uninterrupted one drew); the item is the
partner's first ``p`` frames followed by the whole target, with the partner's style, and the loss covers the
target's frames only.

Modes (``--s2mel-prompt``): "own" (each clip its own prompt), "cross", "auto" (cross where some speaker of the
manifest has two clips or more, own otherwise). A clip whose speaker has no other clip keeps its own prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from trainer.s2mel.batches import S2MelClip, draw_prompt_lens

PROMPT_MODES = ("auto", "own", "cross")


def partner_table(speakers: Sequence[str | None]) -> list[list[int]]:
    """Per clip, the indices of the other clips of its speaker (a clip without a speaker has none)."""
    by_speaker: dict[str, list[int]] = {}
    for index, speaker in enumerate(speakers):
        if speaker:
            by_speaker.setdefault(speaker, []).append(index)
    return [[i for i in by_speaker[s] if i != index] if s else [] for index, s in enumerate(speakers)]


def resolve_prompt_mode(mode: str, speakers: Sequence[str | None]) -> str:
    """"own" or "cross" for ``mode`` on clips of ``speakers``; ValueError (one line) for "cross" on data where no
    speaker has two clips, or an unknown mode."""
    if mode not in PROMPT_MODES:
        raise ValueError(f"--s2mel-prompt must be one of {', '.join(PROMPT_MODES)}, got {mode!r}")
    several = any(partner_table(speakers))
    if mode == "cross" and not several:
        raise ValueError("--s2mel-prompt cross: no speaker of the training manifest has two clips (each line's "
                         "'speaker'); use own, or auto")
    return "own" if mode == "own" or not several else "cross"


def resume_refusal(saved: Mapping[str, Any], mode: str, where: str) -> str | None:
    """Why a checkpoint cannot continue with prompts ``mode`` ("own" / "cross"), or None. Its draws would differ
    from the run it continues; a checkpoint from before cross-clip prompts prompted each clip with its own."""
    before = str(saved.get("prompt_mode") or "own")
    if before == mode:
        return None
    return (f"{where} trained with {before} prompts; this run's are {mode}: resume with --s2mel-prompt {before} "
            "(or start in a new --output-dir)")


def describe_prompt_mode(mode: str, speakers: Sequence[str | None]) -> str:
    """The pre-flight's words for the resolved mode."""
    if resolve_prompt_mode(mode, speakers) == "own":
        return "prompts: each clip its own first frames and style"
    table = partner_table(speakers)
    alone = sum(1 for partners in table if not partners)
    extra = f" ({alone} clip(s) without another clip of their speaker keep their own)" if alone else ""
    return f"prompts: another clip of the same speaker, drawn per target and epoch{extra}"


def draw_partners(indices: Sequence[int], table: Sequence[Sequence[int]], generator: torch.Generator) -> list[int]:
    """One partner per target index, uniform over its speaker's other clips (itself when it has none); one draw
    from ``generator`` per target either way, so the stream's course does not depend on the data's speakers."""
    draws = torch.rand(len(indices), generator=generator, dtype=torch.float64).tolist()
    partners = []
    for index, u in zip(indices, draws, strict=True):
        others = table[index]
        partners.append(others[min(int(u * len(others)), len(others) - 1)] if others else index)
    return partners


@dataclass(frozen=True)
class PromptedItems:
    """A step's items, each the prompt clip's first frames then the whole target (see :func:`prompted_items`)."""

    clips: list[S2MelClip]
    prompt_lens: Tensor  # (B,) mel frames of the prompt region
    prompt_semantic_lens: Tensor  # (B,) semantic frames of the prompt region


def prompted_items(
    targets: Sequence[S2MelClip],
    prompts: Sequence[S2MelClip],
    fraction: tuple[float, float],
    generator: torch.Generator,
) -> PromptedItems:
    """Join each prompt's first p frames (p drawn as a fraction of the prompt clip) to its whole target.

    The semantic inputs are joined the same way: the prompt's first k = round(p x S / T) frames (at least 1, at
    most all), so the regulator stretches the prompt's k frames over its p mel frames and the target's own frames
    over the target's mel, as synthesis regulates the reference and the spoken codes in two calls.
    """
    prompt_frames = torch.tensor([c.frames for c in prompts])
    prompt_lens = draw_prompt_lens(prompt_frames, fraction, generator)
    clips, semantic_lens = [], []
    for target, prompt, p in zip(targets, prompts, prompt_lens.tolist(), strict=True):
        sem = int(prompt.code_embedding.shape[0])
        k = min(max(1, round(p * sem / prompt.frames)), sem)
        semantic_lens.append(k)
        clips.append(_joined(prompt, target, p, k))
    return PromptedItems(clips, prompt_lens, torch.tensor(semantic_lens))


def _joined(prompt: S2MelClip, target: S2MelClip, p: int, k: int) -> S2MelClip:
    def join(a: Tensor | None, b: Tensor | None) -> Tensor | None:
        if a is None or b is None:
            if (a is None) != (b is None):
                raise ValueError(f"{prompt.name} and {target.name} were prepared differently (a GPT latent in one)")
            return None
        return torch.cat([a[:k], b])

    prompt_semantic = None  # 2.5: only the prompt region reads it (collate zero-pads the rest)
    if prompt.prompt_semantic is not None:
        prompt_semantic = prompt.prompt_semantic[:k]
    return S2MelClip(
        mel=torch.cat([prompt.mel[:, :p], target.mel], dim=-1),
        style=prompt.style,
        code_embedding=torch.cat([prompt.code_embedding[:k], target.code_embedding]),
        gpt_latent=join(prompt.gpt_latent, target.gpt_latent),
        prompt_semantic=prompt_semantic,
        name=f"{target.name}<-{prompt.name}",
    )
