"""A checkpoint's health: the failures fine-tunes are known for, measured wherever a checkpoint is scored.

The evaluation runner (``trainer.evaluation.runner``) records, per spoken item, what generation did (its code count,
whether a stop code ended it, whether a span of codes repeats) and, per checkpoint, a ``health`` block:

- **runaway**: items whose generation reached the code limit without a stop code, repeats a span of codes (a loop:
  a span of ``LOOP_SPAN_MAX`` codes or fewer repeated ``LOOP_REPEATS`` times or more, back to back, over at least
  ``LOOP_MIN_CODES`` codes), or whose length per character lies outside the speaker's real range (the seconds per
  character of the prepared data's real clips, widened ``LENGTH_MARGIN`` times both ways). The checkpoint is
  flagged when more than ``RUNAWAY_SHARE`` of its items run away.
- **rate**: characters per second of the synthesized speech over the speaker's real clips', as a ratio with the
  bootstrap interval of ``trainer.evaluation.stats``; flagged when the whole interval lies outside
  [1 / ``RATE_TOLERANCE``, ``RATE_TOLERANCE``] (speech clearly faster or slower than the speaker's).
- **adapter** (LoRA checkpoints; S2Mel adapters in :mod:`trainer.s2mel.adapter_health`): whether the adapter
  changes anything: its B matrices all zero, or the same items spoken with the same seed with and without it give
  the very same codes and audio, flag "adapter changes nothing".
- **zero-shot** (when the base model is measured): each score's paired difference against the base model speaking
  the same texts from the same references; flagged "worse than zero-shot" when an interval lies wholly on the worse
  side over enough items (shown; the SIM limit of ``best`` already keeps such a voice from best.pth).

A checkpoint flagged on runaway or adapter is never ``best.pth`` (:func:`disqualification`, used by
``trainer.evaluation.best``). Characters are counted without whitespace, on both sides alike.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainer.evaluation.stats import compare_rows, main_items

LOOP_SPAN_MAX = 16  # the longest span of codes a loop repeats
LOOP_REPEATS = 4  # back-to-back repetitions of the span that make a loop
LOOP_MIN_CODES = 32  # ... covering at least this many codes (a held sound of a code or two is no loop)
LENGTH_MARGIN = 3.0  # seconds per character beyond the real range x/÷ this: a runaway (or cut-off) item
RUNAWAY_SHARE = 0.1  # more than this share of items running away flags the checkpoint
RATE_TOLERANCE = 1.25  # a rate ratio whose interval lies wholly beyond 1.25 (or below 0.8) is flagged
ADAPTER_PROBE_ITEMS = 3  # items spoken again without the adapter


def characters(text: str) -> int:
    """The characters of ``text`` that take time to say (whitespace left out)."""
    return sum(1 for ch in str(text) if not ch.isspace())


# ----- the speaker's real clips ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RealSpeech:
    """The prepared data's real clips of a speaker: characters per second and seconds per character's range."""

    clips: int
    chars_per_second: float
    seconds_per_char_low: float
    seconds_per_char_high: float

    def length_range(self) -> tuple[float, float]:
        return self.seconds_per_char_low / LENGTH_MARGIN, self.seconds_per_char_high * LENGTH_MARGIN


def real_speech(manifests: Iterable[str | Path], speakers: Iterable[str | None] = (),
                language: str | None = None, codes_per_second: float | None = None) -> RealSpeech | None:
    """The real clips of ``speakers`` (every clip when none of them is named by a line) in the manifests' ``text``
    and ``duration`` (a paired manifest's ``target_text`` and ``target_duration``, else its ``target_code_len`` at the
    generation's ``codes_per_second``: IndexTTS2's prepared pairs record no duration); ``path::lang`` manifests and
    lines of another language than ``language`` left out. None without any usable clip. Unreadable files and lines
    are left out."""
    from data_tools.manifest import parse_manifest_spec
    from data_tools.shape_rules import seconds_of_codes

    rows: list[tuple[int, float, str | None]] = []
    seen: set[Any] = set()
    for manifest in manifests:
        spec = parse_manifest_spec(manifest)
        if language and spec.language and spec.language != language:
            continue
        try:
            lines = spec.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or (language and entry.get("language") not in (None, language)):
                continue
            clip = entry.get("target_id") or entry.get("id")  # a paired manifest names each target once per prompt
            if clip is not None and clip in seen:
                continue
            seen.add(clip)
            # a codes manifest's text and duration, a paired manifest's target_text and target_duration
            text, seconds = entry.get("text", entry.get("target_text")), entry.get("duration",
                                                                               entry.get("target_duration"))
            codes = entry.get("target_code_len")
            if seconds is None and codes_per_second and isinstance(codes, int) and codes > 0:
                seconds = seconds_of_codes(codes, codes_per_second)
            chars = characters(text if isinstance(text, str) else "")
            if chars and isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0:
                rows.append((chars, float(seconds), entry.get("speaker")))
    wanted = {s for s in speakers if s}
    own = [r for r in rows if r[2] in wanted]
    chosen = own or rows
    if not chosen:
        return None
    per_char = [seconds / chars for chars, seconds, _speaker in chosen]
    return RealSpeech(len(chosen), sum(r[0] for r in chosen) / sum(r[1] for r in chosen), min(per_char),
                      max(per_char))


# ----- one item ----------------------------------------------------------------------------------------------

def loop_span(codes: Sequence[int] | np.ndarray) -> tuple[int, int] | None:
    """(span length, codes covered by its back-to-back repetition when it became a loop) of the first loop in
    ``codes``; None when no span repeats so."""
    seq = np.asarray(codes, dtype=np.int64).reshape(-1)
    n = seq.size
    for span in range(1, LOOP_SPAN_MAX + 1):
        needed = max(LOOP_REPEATS * span, LOOP_MIN_CODES)
        if n < needed:
            break
        same = seq[span:] == seq[:-span]  # same[i]: code i+span repeats code i
        run = 0
        for equal in same:
            run = run + 1 if equal else 0
            if run + span >= needed:
                return span, run + span
    return None


def codes_digest(codes: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(codes, dtype=np.int64)).tobytes()).hexdigest()[:16]


def generation_fields(codes: np.ndarray | None, hit_stop: bool | None) -> dict[str, Any]:
    """What an item records of its generation (nothing when the speaker reports no codes)."""
    if codes is None:
        return {}
    span = loop_span(codes)
    return {"codes": int(np.asarray(codes).size), "hit_stop": None if hit_stop is None else bool(hit_stop),
            "loop": list(span) if span is not None else None, "codes_digest": codes_digest(codes)}


def runaway_reasons(item: dict[str, Any], real: RealSpeech | None) -> list[str]:
    """Why ``item`` ran away, in a few words each; empty when it did not."""
    reasons = []
    if item.get("hit_stop") is False:
        reasons.append("no stop code")
    if item.get("loop"):
        reasons.append("loops")
    chars, seconds = characters(item.get("text") or ""), item.get("audio_seconds")
    if real is not None and chars and isinstance(seconds, (int, float)):
        low, high = real.length_range()
        per_char = float(seconds) / chars
        if per_char > high:
            reasons.append("too long for its text")
        elif per_char < low:
            reasons.append("too short for its text")
    return reasons


# ----- one checkpoint ----------------------------------------------------------------------------------------

def runaway_of(items: list[dict[str, Any]], real: RealSpeech | None) -> dict[str, Any]:
    runaway = [i for i in items if runaway_reasons(i, real)]
    share = len(runaway) / len(items) if items else 0.0
    reasons = sorted({r for i in runaway for r in runaway_reasons(i, real)})
    return {"items": len(runaway), "of": len(items), "share": round(share, 4), "reasons": reasons,
            "flagged": bool(runaway) and share > RUNAWAY_SHARE}


def rate_of(items: list[dict[str, Any]], real: RealSpeech | None) -> dict[str, Any] | None:
    """Characters per second of the items over the real clips', with its interval; None without what it needs."""
    rows = [(float(characters(i.get("text") or "")), float(i["audio_seconds"])) for i in items
            if isinstance(i.get("audio_seconds"), (int, float)) and i["audio_seconds"] > 0]
    if real is None or not rows:
        return None
    data = np.asarray(rows, dtype=np.float64)
    found = compare_rows(data, data, "rate")
    if found is None:
        return None
    ratio = found.new
    low, high = ratio.low / real.chars_per_second, ratio.high / real.chars_per_second
    return {"ratio": round(ratio.value / real.chars_per_second, 4), "low": round(low, 4), "high": round(high, 4),
            "chars_per_second": round(ratio.value, 3), "real_chars_per_second": round(real.chars_per_second, 3),
            "real_clips": real.clips, "items": len(rows),
            "flagged": low > RATE_TOLERANCE or high < 1.0 / RATE_TOLERANCE}


def adapter_weights_zero(checkpoint: Path) -> bool | None:
    """Whether ``checkpoint``'s LoRA adapter has only zero B matrices (it adds nothing to the weights); None when
    the file holds no adapter or cannot be read."""
    from trainer.checkpoints.format import CheckpointError
    from trainer.checkpoints.loading import load_checkpoint
    from trainer.lora_setup import checkpoint_adapter

    try:
        found = checkpoint_adapter(load_checkpoint(Path(checkpoint), mmap=True))  # only the B matrices are read
    except (CheckpointError, OSError, ValueError, RuntimeError):
        return None
    if found is None:
        return None
    config, tensors = found
    if config.dora:  # trained magnitude vectors change the weights even with zero B: speech decides
        return False
    b_matrices = [t for name, t in tensors.items() if name.endswith("lora_B")]
    return bool(b_matrices) and all(not bool(t.any()) for t in b_matrices)


ZERO_B_REASON = "its B matrices are all zero"


def adapter_of(weights_zero: bool | None, same_speech: bool | None,
               zero_reason: str = ZERO_B_REASON) -> dict[str, Any] | None:
    """The adapter block: None for a checkpoint without an adapter; ``zero_reason`` says how the weights showed
    that it adds nothing."""
    if weights_zero is None:
        return None
    if weights_zero:
        return {"applied": False, "reason": zero_reason, "flagged": True}
    if same_speech:
        return {"applied": False, "reason": "the same seed speaks the same codes and audio without it",
                "flagged": True}
    return {"applied": True, "reason": None if same_speech is False else "not spoken without it", "flagged": False}


def health_of(result: dict[str, Any], real: RealSpeech | None, adapter: dict[str, Any] | None) -> dict[str, Any]:
    """The ``health`` block of a result (its main-language items)."""
    items = main_items(result)
    health: dict[str, Any] = {"runaway": runaway_of(items, real), "rate": rate_of(items, real), "adapter": adapter,
                              "real_clips": real.clips if real is not None else 0}
    health["summary"] = summary_of(health)
    return health


def zero_shot_of(vs_base: dict[str, Any] | None) -> dict[str, Any] | None:
    """The paired differences against the base model speaking the same texts from the same references (zero-shot),
    and which scores are clearly worse (the interval of the difference wholly on the worse side, over at least
    ``best.MIN_PAIRED_ITEMS`` items); None without a measured base."""
    from trainer.evaluation.stats import MIN_PAIRED_ITEMS

    if not isinstance(vs_base, dict):
        return None
    differences, worse = {}, []
    for metric in ("cer", "wer", "sim"):
        comparison = vs_base.get(metric)
        if not isinstance(comparison, dict):
            continue
        diff = comparison["difference"]
        differences[metric] = {**diff, "items": comparison["items"]}
        if comparison["items"] >= MIN_PAIRED_ITEMS and (diff["high"] < 0 if metric == "sim" else diff["low"] > 0):
            worse.append(metric)
    return {"difference": differences, "worse": worse, "flagged": bool(worse)} if differences else None


def with_zero_shot(health: dict[str, Any], vs_base: dict[str, Any] | None) -> dict[str, Any]:
    """``health`` with its zero-shot block and summary brought up to date."""
    health["zero_shot"] = zero_shot_of(vs_base)
    health["summary"] = summary_of(health)
    return health


def summary_of(health: dict[str, Any]) -> str:
    """One short phrase: ``ok`` or what is wrong."""
    problems = []
    adapter = health.get("adapter") or {}
    if adapter.get("flagged"):
        problems.append("adapter changes nothing")
    runaway = health.get("runaway") or {}
    if runaway.get("flagged"):
        problems.append(f"runaway {runaway['items']}/{runaway['of']} ({', '.join(runaway['reasons'])})")
    rate = health.get("rate") or {}
    if rate.get("flagged"):
        problems.append(f"{'fast' if rate['ratio'] > 1 else 'slow'} speech x{rate['ratio']:.2f}")
    zero_shot = health.get("zero_shot") or {}
    if zero_shot.get("flagged"):
        problems.append(f"worse than zero-shot ({', '.join(m.upper() for m in zero_shot['worse'])})")
    return "; ".join(problems) or "ok"


def disqualification(result: dict[str, Any] | None) -> str | None:
    """Why ``result``'s checkpoint can never be best.pth (runaway generation, an adapter that changes nothing);
    None when its health allows it or it has none recorded. A rate off the speaker's is shown, not disqualifying:
    an early checkpoint of a run still learning its pace is often the best one so far."""
    health = (result or {}).get("health")
    if not isinstance(health, dict):
        return None
    reasons = []
    if (health.get("adapter") or {}).get("flagged"):
        reasons.append("its adapter changes nothing")
    runaway = health.get("runaway") or {}
    if runaway.get("flagged"):
        reasons.append(f"it runs away on {runaway.get('items')} of {runaway.get('of')} items")
    return " and ".join(reasons) or None


def health_cell(result: dict[str, Any] | None) -> str:
    """The Checkpoints table's health column: ``ok``, what is wrong, or '-' when not measured."""
    health = (result or {}).get("health")
    return str(health.get("summary") or "-") if isinstance(health, dict) else "-"


def health_lines(health: dict[str, Any] | None) -> list[str]:
    """Health in words, one line per check (the model card and the console)."""
    if not isinstance(health, dict):
        return []
    runaway = health.get("runaway") or {}
    lines = [f"runaway items: {runaway.get('items', 0)} of {runaway.get('of', 0)}"
             + (f" ({', '.join(runaway['reasons'])})" if runaway.get("reasons") else "")]
    rate = health.get("rate")
    lines.append(f"speaking rate: x{rate['ratio']:.2f} [{rate['low']:.2f}, {rate['high']:.2f}] of the speaker's real "
                 f"{rate['real_chars_per_second']:.1f} characters/s" if isinstance(rate, dict)
                 else "speaking rate: not measured (no real clips with durations in the prepared data)")
    adapter = health.get("adapter")
    if isinstance(adapter, dict):
        lines.append("adapter: applied" if adapter.get("applied")
                     else f"adapter changes nothing ({adapter.get('reason')})")
    zero_shot = health.get("zero_shot")
    if isinstance(zero_shot, dict):
        from trainer.evaluation.results import display_scale

        parts = []
        for metric, diff in zero_shot["difference"].items():
            scale, _unit, digits = display_scale(metric)
            parts.append(f"{metric.upper()} {diff['value'] * scale:+.{digits}f} [{diff['low'] * scale:+.{digits}f}, "
                         f"{diff['high'] * scale:+.{digits}f}]")
        verdict = (f"worse on {', '.join(m.upper() for m in zero_shot['worse'])}" if zero_shot["worse"]
                   else "not clearly worse")
        lines.append(f"against zero-shot (the base model, same texts and references): {', '.join(parts)}; {verdict}")
    return lines


def same_speech_without_adapter(backend: Any, checkpoint: Path, texts: Sequence[str], prompt: Path, settings: Any,
                                 language: str | None, with_adapter: Sequence[np.ndarray],
                                 generated: Sequence[tuple[np.ndarray, bool]] | None) -> bool:
    """Whether ``texts`` spoken by ``checkpoint`` without its adapter (same seed, same reference) give the very
    same audio (and codes, where the speaker reports them) as ``with_adapter``."""
    speaker = backend.for_checkpoint(Path(checkpoint), base=False, adapter=False)
    without = speaker.speak(list(texts), prompt, settings, language)
    if len(without) != len(with_adapter) or not all(
            a.shape == b.shape and np.array_equal(a, b) for a, b in zip(without, with_adapter)):
        return False
    codes = getattr(speaker, "generated", None)
    if codes and generated:
        return all(np.array_equal(a[0], b[0]) for a, b in zip(codes, generated))
    return True
