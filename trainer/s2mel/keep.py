"""Keep the S2Mel adapter only when it helps: the decision from the whole pipeline's scores on held-out voices.

Evaluation synthesises every held-out voice twice with the same seeds, GPT only and GPT + S2Mel, and scores
speaker similarity (higher is better) and CER (lower is better). The adapter is kept when, averaged over the
voices, similarity improves by at least ``min_similarity_gain`` and CER gets worse by at most
``max_cer_increase``, and health does not find that it changes nothing (``unchanged``). A user's override ("keep"
/ "drop") wins, and the reason still states the measurement.
CER is stored as a fraction (``cer``, ``max_cer_increase``: 0.01 is one percentage point) and shown in percent.

Strength (:mod:`trainer.s2mel.strength`): where the voices were also scored with the adapter at other strengths,
:func:`choose_strength` keeps the strength whose speech passes with the highest similarity (the higher strength on
a tie), and the decision records it; the export writes the decoder at that strength.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean

from trainer.evaluation.results import metric_text

OVERRIDES = ("auto", "keep", "drop")


@dataclass(frozen=True)
class VoiceScore:
    voice: str
    similarity: float
    cer: float


@dataclass(frozen=True)
class KeepDecision:
    keep: bool
    reason: str
    similarity_without: float
    similarity_with: float
    cer_without: float
    cer_with: float
    strength: float = 1.0  # the adapter strength the "with" scores were measured at


def decide_adapter(
    without: Sequence[VoiceScore],
    with_adapter: Sequence[VoiceScore],
    *,
    min_similarity_gain: float = 0.0,
    max_cer_increase: float = 0.0,
    override: str = "auto",
    unchanged: str | None = None,
) -> KeepDecision:
    """Whether the export takes the S2Mel adapter; ``reason`` is the run log's line. ``unchanged``: health's
    "adapter changes nothing (...)" (:mod:`trainer.s2mel.adapter_health`), which leaves it out whatever it scores."""
    if override not in OVERRIDES:
        raise ValueError(f"S2Mel adapter override must be one of {OVERRIDES}, got {override!r}")
    voices = [s.voice for s in without]
    if not voices or sorted(voices) != sorted(s.voice for s in with_adapter):
        raise ValueError("score the same held-out voices with and without the adapter")
    sim0, sim1 = fmean(s.similarity for s in without), fmean(s.similarity for s in with_adapter)
    cer0, cer1 = fmean(s.cer for s in without), fmean(s.cer for s in with_adapter)
    measured = (
        f"speaker similarity {sim0:.4f} -> {sim1:.4f}, CER {metric_text('cer', cer0)} -> {metric_text('cer', cer1)} "
        f"over {len(voices)} held-out voice(s)"
    )
    problems = [unchanged] if unchanged else []
    if sim1 - sim0 < min_similarity_gain:
        problems.append(
            f"similarity {'fell' if sim1 < sim0 else 'rose by less than the required'} "
            f"({sim1 - sim0:+.4f}, need {min_similarity_gain:+.4f})"
        )
    if cer1 - cer0 > max_cer_increase:
        problems.append(f"CER rose by {(cer1 - cer0) * 100:+.1f} points (allowed {max_cer_increase * 100:+.1f})")
    helps = not problems
    if override == "keep":
        keep, why = (
            True,
            "kept by the user's override" + ("" if helps else f" although {'; '.join(problems)}"),
        )
    elif override == "drop":
        keep, why = False, "left out by the user's override"
    elif helps:
        keep, why = True, "kept: it helps"
    else:
        keep, why = False, f"left out: {'; '.join(problems)}"
    return KeepDecision(keep, f"S2Mel adapter {why}; {measured}", sim0, sim1, cer0, cer1)


def choose_strength(
    without: Sequence[VoiceScore],
    by_strength: Mapping[float, Sequence[VoiceScore]],
    *,
    min_similarity_gain: float = 0.0,
    max_cer_increase: float = 0.0,
    override: str = "auto",
    unchanged: str | None = None,
) -> KeepDecision:
    """The decision at the best strength: of the strengths whose scores pass, the one with the highest mean
    similarity (the higher strength on a tie); where none passes, the highest similarity all the same (the
    decision then says why it is left out, and ``keep`` overrides it)."""
    if not by_strength:
        raise ValueError("score the adapter at one strength at least")
    decide = {strength: decide_adapter(without, scores, min_similarity_gain=min_similarity_gain,
                                       max_cer_increase=max_cer_increase) for strength, scores in by_strength.items()}
    passing = [strength for strength, decision in decide.items() if decision.keep] or list(decide)
    best = max(passing, key=lambda strength: (decide[strength].similarity_with, strength))
    chosen = decide_adapter(without, by_strength[best], min_similarity_gain=min_similarity_gain,
                            max_cer_increase=max_cer_increase, override=override, unchanged=unchanged)
    head, _, measured = chosen.reason.partition("; ")
    tried = ", ".join(f"{strength:g}" for strength in sorted(by_strength))
    return replace(chosen, strength=best, reason=f"{head} at strength {best:g} (of {tried}); {measured}")
