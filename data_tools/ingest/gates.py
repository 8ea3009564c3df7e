"""Quality gates: each failed gate is a named reason on the clip (never a silent drop; the clip stays and can
be restored). Audio is measured once, when the clip is cut (``measure``); the thresholds are applied at the
end of every run (``reasons``), so changing a threshold needs no re-slicing."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from data_tools.check_chunks import LANGUAGE_SCRIPTS
from data_tools.shape_rules import DROP_REASONS, DataLimits, codes_of_seconds, drop_reason
from data_tools.text import script_counts

FULL_SCALE = 0.999
FRAME_SECONDS = 0.02
MAX_SNR_DB = 100.0

GATES = {
    "duration": "clip shorter or longer than the accepted range",
    "clipping": "share of samples at full scale",
    "snr": "signal-to-noise estimate too low",
    "silence": "share of silent frames too high",
    "no_text": "no transcript",
    "chars_per_second": "characters per second outside the range",
    "script": "share of letters in the language's script too low",
    "degenerate": "one character repeated, or too few distinct characters",
    "duplicate_audio": "the same audio as an earlier clip",
    "duplicate_text": "the same transcript as an earlier clip of the speaker",
    "too_long_for_model": "more text tokens or codes than the model takes",
}


@dataclass(frozen=True)
class GateSettings:
    max_clipping: float = 0.001  # share of samples at full scale
    min_snr_db: float = 15.0
    max_silence: float = 0.6  # share of 20 ms frames 40 dB below the clip's loud frames
    min_cps: float = 2.0  # letters per second of speech
    max_cps: float = 25.0
    min_script_share: float = 0.9
    min_distinct: int = 3  # distinct letters a transcript of 3+ letters needs
    max_run: int = 4  # the same letter this many times in a row is degenerate
    duplicate_text_chars: int = 10  # shorter transcripts may repeat ("yes")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(samples: np.ndarray, rate: int) -> dict[str, float | str]:
    """What the audio gates need, from the clip before loudness normalisation."""
    frame = max(1, int(rate * FRAME_SECONDS))
    count = max(1, len(samples) // frame)
    framed = np.resize(samples[: count * frame], (count, frame)) if len(samples) >= frame else samples[None, :]
    power = np.mean(np.square(framed, dtype=np.float64), axis=1) + 1e-12
    loud, quiet = np.percentile(power, 90), np.percentile(power, 10)
    snr = min(MAX_SNR_DB, 10 * np.log10(loud / quiet)) if quiet > 1e-11 else MAX_SNR_DB
    silent = float(np.mean(power < loud * 1e-4))
    clipped = float(np.mean(np.abs(samples) >= FULL_SCALE)) if len(samples) else 0.0
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2")
    return {"clipping": round(clipped, 6), "snr_db": round(float(snr), 2), "silence": round(silent, 4),
            "audio_sha1": hashlib.sha1(pcm.tobytes()).hexdigest()}


def letters_of(text: str) -> str:
    return "".join(ch for ch in text if ch.isalpha())


def text_reasons(text: str, speech_seconds: float, language: str | None, settings: GateSettings) -> list[str]:
    """Reasons from the transcript alone (and how long its speech lasts)."""
    letters = letters_of(text)
    if not letters:
        return ["no_text: the clip has no transcript"]
    reasons = []
    cps = len(letters) / max(speech_seconds, 1e-3)
    if not settings.min_cps <= cps <= settings.max_cps:
        reasons.append(f"chars_per_second: {cps:.1f} letters/s (range {settings.min_cps:g}-{settings.max_cps:g})")
    script = LANGUAGE_SCRIPTS.get(language or "")
    if script is not None:
        counts = script_counts(text)
        share = counts[script] / max(1, sum(counts.values()))
        if share < settings.min_script_share:
            reasons.append(f"script: {share:.0%} of the letters are {script} (at least "
                           f"{settings.min_script_share:.0%})")
    distinct = len(set(letters))
    run = _longest_run(letters)
    if run >= settings.max_run:
        reasons.append(f"degenerate: one letter {run} times in a row")
    elif len(letters) >= settings.min_distinct and distinct < settings.min_distinct:
        reasons.append(f"degenerate: only {distinct} distinct letter(s)")
    return reasons


def _longest_run(text: str) -> int:
    best = run = 0
    for k, ch in enumerate(text):
        run = run + 1 if k and ch == text[k - 1] else 1
        best = max(best, run)
    return best


def audio_reasons(measured: dict[str, Any], seconds: float, settings: GateSettings,
                  min_seconds: float, max_seconds: float) -> list[str]:
    reasons = []
    if not min_seconds <= seconds <= max_seconds:
        reasons.append(f"duration: {seconds:.2f} s (range {min_seconds:g}-{max_seconds:g} s)")
    if measured["clipping"] > settings.max_clipping:
        reasons.append(f"clipping: {measured['clipping']:.2%} of samples at full scale "
                       f"(at most {settings.max_clipping:.2%})")
    if measured["snr_db"] < settings.min_snr_db:
        reasons.append(f"snr: about {measured['snr_db']:.0f} dB (at least {settings.min_snr_db:g} dB)")
    if measured["silence"] > settings.max_silence:
        reasons.append(f"silence: {measured['silence']:.0%} of the clip is silent (at most "
                       f"{settings.max_silence:.0%})")
    return reasons


@dataclass(frozen=True)
class ModelLimits:
    """What one model takes: text tokens by the tokenizer, codes from the duration (shape_rules, the rule
    preparation applies: ``data_tools.model_limits``)."""

    limits: DataLimits
    codes_per_second: float  # the generation's code rate (networks.generation_rule.CODES_PER_SECOND)
    tokenizer: Any = None  # a TextTokenizer (or the 2.5 one), or None (text length not checked)

    def text_tokens(self, text: str, language: str | None) -> int:
        """The text's tokens (1 when there is no text or tokenizer, or it cannot read the text: not checked)."""
        if self.tokenizer is None or not text:
            return 1
        try:
            return len(self.tokenizer.encode(text, language))
        except (KeyError, ValueError, AttributeError):  # e.g. the 2.5 tokenizer without a language
            return 1

    def reason(self, text: str, seconds: float, language: str | None) -> str | None:
        tokens = self.text_tokens(text, language)
        codes = codes_of_seconds(seconds, self.codes_per_second)
        why = drop_reason(tokens, codes, 0, self.limits)
        if why in ("too_many_text_tokens", "too_many_codes"):
            limit = (f"at most {self.limits.max_text_tokens} text tokens" if why == "too_many_text_tokens" else
                     f"at most {self.limits.max_codes} codes, {self.limits.max_codes / self.codes_per_second:.2f} s")
            return f"too_long_for_model: {DROP_REASONS[why]} ({tokens} text tokens, {codes} codes; {limit})"
        return None


@dataclass(frozen=True)
class GateContext:
    """Everything the gates of one ingest folder apply, so a proofreading edit re-runs them as the import did."""

    settings: GateSettings
    min_seconds: float
    max_seconds: float
    limits: ModelLimits | None = None

    def clip_reasons(self, clip: dict[str, Any], text: str, language: str | None, speaker: str,
                     duplicates: Duplicates) -> list[str]:
        """A clip's reasons (its measured audio, ``text`` as it stands now); ``duplicates`` sees clips in order."""
        speech, seconds = max(clip["speech_end"] - clip["speech_start"], 1e-3), clip["seconds"]
        too_long = self.limits.reason(text, seconds, language) if self.limits is not None else None
        longest = float("inf") if too_long and seconds > self.max_seconds else self.max_seconds  # said once
        reasons = audio_reasons(clip, seconds, self.settings, self.min_seconds, longest)
        reasons += text_reasons(text, speech, language, self.settings)
        if too_long:
            reasons.append(too_long)
        reasons += duplicates.reasons(clip["id"], clip["audio_sha1"], speaker, text)
        return reasons


class Duplicates:
    """Later clips with the same audio, or the same transcript by the same speaker, name the first one."""

    def __init__(self, settings: GateSettings) -> None:
        self.settings = settings
        self.audio: dict[str, str] = {}
        self.texts: dict[tuple[str, str], str] = {}

    def reasons(self, clip_id: str, audio_sha1: str, speaker: str, text: str) -> list[str]:
        reasons = []
        first = self.audio.setdefault(audio_sha1, clip_id)
        if first != clip_id:
            reasons.append(f"duplicate_audio: the same audio as {first}")
        key = " ".join(text.casefold().split())
        if len(letters_of(key)) >= self.settings.duplicate_text_chars:
            first = self.texts.setdefault((speaker, key), clip_id)
            if first != clip_id:
                reasons.append(f"duplicate_text: the same transcript as {first}")
        return reasons


def gate_name(reason: str) -> str:
    return reason.split(":", 1)[0]
