"""Character and word error rates of transcripts against references, after the language's scoring normaliser.

    cer(refs, hyps, language="am").corpus       # total edits / total reference characters
    wer(refs, hyps, language="am").per_utterance

Both texts go through ``data_tools.languages.scoring_normaliser(language)`` first (for Amharic: ፡ to a space,
punctuation removed, homophone letters folded, numbers read out), so only differences a listener hears count.
The edit counts come from jiwer. CER counts the space between words as a character, as jiwer does.
The corpus rate is the sum of edits over the sum of reference lengths (not the mean of per-utterance rates).
An utterance whose normalised reference is empty scores 0.0 when the transcript is empty too, else 1.0 (its
insertions still count in the corpus totals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data_tools.languages import scoring_normaliser


class ScoringError(ValueError):
    """Inputs that cannot be scored (one line)."""


@dataclass(frozen=True)
class ErrorRates:
    corpus: float  # (substitutions + deletions + insertions) / reference_length
    per_utterance: list[float]
    substitutions: int
    deletions: int
    insertions: int
    reference_length: int  # characters (CER) or words (WER) of the normalised references
    references: list[str]  # normalised, as compared
    hypotheses: list[str]


def cer(refs: Sequence[str], hyps: Sequence[str], language: str | None = "am") -> ErrorRates:
    """Character error rate, corpus-level and per utterance."""
    return _error_rates(refs, hyps, language, unit="char")


def wer(refs: Sequence[str], hyps: Sequence[str], language: str | None = "am") -> ErrorRates:
    """Word error rate, corpus-level and per utterance."""
    return _error_rates(refs, hyps, language, unit="word")


def _error_rates(refs: Sequence[str], hyps: Sequence[str], language: str | None, unit: str) -> ErrorRates:
    if isinstance(refs, str) or isinstance(hyps, str):
        raise ScoringError("references and transcripts must be lists of strings, not one string")
    if len(refs) != len(hyps):
        raise ScoringError(f"{len(refs)} references but {len(hyps)} transcripts: they must pair up one to one")
    normalise = scoring_normaliser(language)
    norm_refs = [normalise(text) for text in refs]
    norm_hyps = [normalise(text) for text in hyps]
    per_utterance: list[float] = []
    totals = [0, 0, 0, 0]  # substitutions, deletions, insertions, reference length
    for ref, hyp in zip(norm_refs, norm_hyps, strict=True):
        subs, dels, ins, length = _edits(ref, hyp, unit)
        for i, value in enumerate((subs, dels, ins, length)):
            totals[i] += value
        errors = subs + dels + ins
        per_utterance.append(errors / length if length else float(errors > 0))
    subs, dels, ins, length = totals
    corpus = (subs + dels + ins) / length if length else float(subs + dels + ins > 0)
    return ErrorRates(corpus, per_utterance, subs, dels, ins, length, norm_refs, norm_hyps)


def _edits(ref: str, hyp: str, unit: str) -> tuple[int, int, int, int]:
    """(substitutions, deletions, insertions, reference length) of one normalised pair."""
    ref_units = list(ref) if unit == "char" else ref.split()
    hyp_units = list(hyp) if unit == "char" else hyp.split()
    if not ref_units:
        return 0, 0, len(hyp_units), 0
    if not hyp_units:
        return 0, len(ref_units), 0, len(ref_units)
    import jiwer  # lazy: scoring is rare, `import data_tools` stays light

    output = (jiwer.process_characters if unit == "char" else jiwer.process_words)(ref, hyp)
    return output.substitutions, output.deletions, output.insertions, len(ref_units)
