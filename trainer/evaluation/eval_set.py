"""The evaluation set of a run: what every checkpoint speaks and in whose voice, stored with the run.

``<run>/eval/eval_set.json`` holds the sentences (by default the first validation transcripts, in the
training language; or a user's file, one per line), optionally a second language's sentences (to show what
the fine-tune forgot), the reference voices (prompts of the first validation speakers, or given audio files;
copied into ``<run>/eval/voices/`` so later checkpoints use the very same files), the decoding settings and
the seeds (every text is spoken in every voice with each seed: items to pair between two checkpoints). It is written once; every later evaluation of the run reads it back, so every checkpoint is
measured on the same work. Its ``fingerprint`` (texts, languages, decoding, voice file digests) goes into
every result, and a result of another set is never taken as "already measured".

A voice is a prompt (a log-mel ``.npy`` as in a codes manifest, or audio: a codes manifest's cond_audio, an
IndexTTS2 paired manifest's prompt_audio_path) for synthesis, and audio for the speaker-similarity model. A prompt mel has no audio: its voice gets no similarity score (say so, and give
``--eval-reference`` audio for one).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text, sha256_file
from trainer.evaluation.errors import EvaluationError
from trainer.run_options import RunOptions, as_run_options

EVAL_DIR = "eval"
EVAL_SET_FILE = "eval_set.json"
VOICES_DIR = "voices"
EVAL_SEED = 1234
EVAL_SEEDS = 3  # every text is spoken in every voice with this many seeds (EVAL_SEED, EVAL_SEED + 1, ...)
FORMAT_VERSION = 1
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".m4a", ".opus")


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


@dataclass(frozen=True)
class Voice:
    id: str
    speaker: str | None
    prompt: str  # relative to the run dir once stored (a .npy prompt mel or audio)
    audio: str | None  # audio for the speaker model (None: the prompt is a mel, no similarity)


@dataclass
class EvalSetSpec:
    """What the user asked for (trainer options / CLI flags); turned into an EvalSet by ``candidate``."""

    val_manifests: list[str] = field(default_factory=list)
    texts_file: str = ""  # one sentence per line; empty: validation transcripts
    sentences: int = 12  # how many validation transcripts
    voices: int = 1  # how many validation speakers lend their prompt
    references: list[str] = field(default_factory=list)  # audio files as voices (instead of validation prompts)
    language: str = ""  # scoring language of the sentences; empty: the validation manifest's
    second_texts_file: str = ""
    second_language: str = "en"
    decode: dict[str, Any] = field(default_factory=dict)  # DecodeSettings fields; empty: deterministic beam
    seeds: int = EVAL_SEEDS

    @classmethod
    def from_options(cls, opts: RunOptions | Mapping[str, Any]) -> EvalSetSpec:
        opts = as_run_options(opts)
        return cls(val_manifests=[str(m) for m in opts.val_manifest or []],
                   texts_file=str(opts.eval_texts or ""), sentences=int(opts.eval_sentences or 8),
                   voices=int(opts.eval_voices or 1),
                   references=[str(p) for p in opts.eval_reference or []],
                   language=str(opts.eval_language or ""),
                   second_texts_file=str(opts.eval_second_texts or ""),
                   second_language=str(opts.eval_second_language or "en"),
                   seeds=max(1, int(opts.eval_seeds or EVAL_SEEDS)))


@dataclass
class EvalSet:
    language: str | None
    sentences: list[Sentence]
    voices: list[Voice]
    decode: dict[str, Any]
    seed: int = EVAL_SEED
    second_language: str | None = None
    second_sentences: list[Sentence] = field(default_factory=list)
    voice_digests: list[str] = field(default_factory=list)
    root: Path | None = None  # the run dir the voices' paths are relative to (None: absolute)
    seeds: list[int] = field(default_factory=list)  # empty: [seed] (a set stored before seeds were repeated)

    @property
    def all_seeds(self) -> list[int]:
        return list(self.seeds) or [self.seed]

    @property
    def fingerprint(self) -> str:
        work = {"language": self.language, "sentences": [s.text for s in self.sentences], "decode": self.decode,
                "seed": self.seed, "second_language": self.second_language,
                "second": [s.text for s in self.second_sentences], "voices": self.voice_digests,
                "with_audio": [v.audio is not None for v in self.voices]}
        if self.all_seeds != [self.seed]:  # a one-seed set keeps the fingerprint it had before seeds repeated
            work["seeds"] = self.all_seeds
        return hashlib.sha256(json.dumps(work, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]

    def path_of(self, relative: str) -> Path:
        path = Path(relative)
        return path if path.is_absolute() or self.root is None else self.root / path

    def decode_settings(self, seed: int | None = None) -> Any:
        from trainer.synthesis.generation import DecodeSettings

        return DecodeSettings(**{**self.decode, "seed": self.seed if seed is None else seed})

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "fingerprint": self.fingerprint, "language": self.language,
                "seed": self.seed, "decode": self.decode, "sentences": [asdict(s) for s in self.sentences],
                "second_language": self.second_language,
                "second_sentences": [asdict(s) for s in self.second_sentences],
                "voices": [asdict(v) for v in self.voices], "voice_digests": self.voice_digests,
                "seeds": self.all_seeds}

    def summary(self) -> str:
        second = (f" + {len(self.second_sentences)} {self.second_language} sentence(s)"
                  if self.second_sentences else "")
        voices = ", ".join(v.speaker or v.id for v in self.voices)
        return (f"{len(self.sentences)} sentence(s) ({self.language or 'any language'}){second}; voice(s): {voices}; "
                f"{len(self.all_seeds)} seed(s)")


def eval_dir(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR


def _read_lines(path: Path, flag: str) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvaluationError(f"{flag} {path}: file not found") from None
    except UnicodeDecodeError:
        raise EvaluationError(f"{flag} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise EvaluationError(f"{flag} {path}: {exc.strerror or exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise EvaluationError(f"{flag} {path}: no text in the file")
    return lines


@dataclass(frozen=True)
class _ValItem:
    """A validation line as evaluation sees it: a transcript and the prompt of its speaker."""

    id: str
    text: str
    speaker: str | None
    language: str | None
    prompt: Path | None  # a prompt mel (.npy) or audio
    audio: Path | None  # the prompt's audio, when there is one
    voice_id: str  # what names the prompt's voice (a pair's prompt utterance)


def _pair_item(pair: Any) -> _ValItem | None:
    """A pair speaks its target's text in its prompt's voice (prompt_audio_path)."""
    if not (pair.target_text or "").strip():
        return None
    return _ValItem(pair.target_id or pair.id, pair.target_text or "", pair.speaker, pair.language,
                    pair.prompt_audio, pair.prompt_audio, pair.prompt_id or pair.id)


def _codes_item(entry: Any) -> _ValItem | None:
    """A codes entry speaks its text in its own prompt's voice (cond_audio, else cond_mel)."""
    if not entry.text.strip():
        return None
    return _ValItem(entry.id, entry.text, entry.speaker, entry.language, entry.cond_audio or entry.cond_mel,
                    entry.cond_audio, entry.id)


def _val_entries(manifests: list[str]) -> list[_ValItem]:
    """The transcribed lines of v1.5 codes manifests (cond_audio, else cond_mel, is the prompt) or IndexTTS2 /
    IndexTTS-2.5 paired manifests (target_text spoken, prompt_audio_path the prompt)."""
    from data_tools.manifest import (
        ManifestError,
        iter_lines,
        line_parser,
        manifest_format,
        parse_manifest_spec,
    )
    from generations.registry import format_of

    items: list[_ValItem] = []
    for spec_text in manifests:
        spec = parse_manifest_spec(spec_text)
        try:
            fmt = format_of(manifest_format(spec.path))
            parse, spoken = line_parser(fmt), _pair_item if fmt.pairs else _codes_item
            for lineno, raw in iter_lines(spec.path):
                try:  # a bad line is the checker's and the trainer's to report
                    entry = parse(raw, spec.path, lineno, spec.language) if isinstance(raw, str) else None
                except ManifestError:
                    continue
                item = None if entry is None else spoken(entry)
                if item is not None:
                    items.append(item)
        except (ManifestError, OSError) as exc:
            raise EvaluationError(f"validation manifest {spec.path}: {' '.join(str(exc).split())}") from None
    return items


def candidate(spec: EvalSetSpec) -> EvalSet:
    """The evaluation set ``spec`` describes, with absolute paths (nothing is copied or written)."""
    entries = _val_entries(spec.val_manifests) if spec.val_manifests else []
    language = spec.language or next((e.language for e in entries if e.language), None)
    if spec.texts_file:
        texts = _read_lines(Path(spec.texts_file), "--eval-texts")
        sentences = [Sentence(f"text{i + 1}", text) for i, text in enumerate(texts)]
    else:
        if not entries:
            raise EvaluationError("no evaluation sentences: give --eval-texts (one sentence per line) or a "
                                  "validation manifest whose transcripts are spoken")
        sentences = [Sentence(e.id, e.text) for e in entries[: max(1, spec.sentences)]]
    voices: list[Voice] = []
    if spec.references:
        for index, reference in enumerate(spec.references):
            path = Path(reference).expanduser()
            if not path.is_file():
                raise EvaluationError(f"--eval-reference {path}: file not found")
            if path.suffix.lower() not in AUDIO_SUFFIXES:
                raise EvaluationError(f"--eval-reference {path}: not an audio file ({', '.join(AUDIO_SUFFIXES)})")
            voices.append(Voice(f"reference{index + 1}", path.stem, str(path.resolve()), str(path.resolve())))
    else:
        seen: set[str] = set()
        for entry in entries:
            speaker = entry.speaker or entry.id
            if speaker in seen or entry.prompt is None:
                continue
            seen.add(speaker)
            voices.append(Voice(entry.voice_id, entry.speaker, str(entry.prompt),
                                str(entry.audio) if entry.audio is not None else None))
            if len(voices) >= max(1, spec.voices):
                break
        if not voices:
            raise EvaluationError("no reference voice: the validation manifest has no prompt; give --eval-reference "
                                  "audio files")
    second: list[Sentence] = []
    if spec.second_texts_file:
        lines = _read_lines(Path(spec.second_texts_file), "--eval-second-texts")
        second = [Sentence(f"{spec.second_language}{i + 1}", text) for i, text in enumerate(lines)]
    for voice in voices:
        if not Path(voice.prompt).is_file():
            raise EvaluationError(f"reference voice {voice.id}: {voice.prompt} not found")
    digests = [sha256_file(Path(v.prompt)) + ("" if v.audio in (None, v.prompt) else sha256_file(Path(v.audio)))
               for v in voices]
    return EvalSet(language=language, sentences=sentences, voices=voices, decode=dict(spec.decode),
                   second_language=spec.second_language if second else None, second_sentences=second,
                   voice_digests=digests, seeds=[EVAL_SEED + k for k in range(max(1, spec.seeds))])


def _store_voices(eval_set: EvalSet, run_dir: Path) -> EvalSet:
    """Copy the voices into ``<run>/eval/voices/`` and make their paths relative to the run dir."""
    folder = eval_dir(run_dir) / VOICES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    stored: list[Voice] = []
    for index, voice in enumerate(eval_set.voices):
        copies: dict[str, str] = {}
        for source in dict.fromkeys(p for p in (voice.prompt, voice.audio) if p):
            target = folder / f"{index + 1:02d}_{_safe(voice.id)}{Path(source).suffix.lower()}"
            if source != voice.prompt:
                target = target.with_name(f"{target.stem}_audio{target.suffix}")
            shutil.copyfile(source, target)
            copies[source] = str(target.relative_to(run_dir))
        stored.append(Voice(voice.id, voice.speaker, copies[voice.prompt],
                            copies[voice.audio] if voice.audio else None))
    eval_set.voices, eval_set.root = stored, Path(run_dir)
    return eval_set


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:60] or "voice"


def load_eval_set(run_dir: Path) -> EvalSet | None:
    path = eval_dir(run_dir) / EVAL_SET_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        eval_set = EvalSet(language=data.get("language"), sentences=[Sentence(**s) for s in data["sentences"]],
                           voices=[Voice(**v) for v in data["voices"]], decode=dict(data.get("decode") or {}),
                           seed=int(data.get("seed", EVAL_SEED)), second_language=data.get("second_language"),
                           second_sentences=[Sentence(**s) for s in data.get("second_sentences") or []],
                           voice_digests=list(data.get("voice_digests") or []), root=Path(run_dir),
                           seeds=[int(x) for x in data.get("seeds") or []])
    except (ValueError, KeyError, TypeError) as exc:
        raise EvaluationError(f"{path}: not a readable evaluation set ({' '.join(str(exc).split())}); move it away "
                              "to make a new one") from None
    if data.get("fingerprint") != eval_set.fingerprint:
        raise EvaluationError(f"{path} was edited (its fingerprint does not match its content): move it away to "
                              "make a new one")
    return eval_set


def ensure_eval_set(spec: EvalSetSpec, run_dir: Path, explicit: bool = False) -> tuple[EvalSet, str | None]:
    """The run's stored evaluation set, made from ``spec`` the first time; (set, note).

    Once stored, the set wins: when ``spec`` would give other work, ``explicit`` (the user named texts or
    voices on this command) refuses, otherwise the note says the stored set is used.
    """
    run_dir = Path(run_dir)
    stored = load_eval_set(run_dir)
    if stored is not None:
        try:
            wanted = candidate(spec)
        except EvaluationError:
            wanted = None
        if wanted is not None and wanted.fingerprint != stored.fingerprint:
            message = (f"the run's evaluation set ({eval_dir(run_dir) / EVAL_SET_FILE}: {stored.summary()}) is not "
                       "the one asked for now; scores of other work would not compare")
            if explicit:
                raise EvaluationError(message + f": move {eval_dir(run_dir)} away to start a new set")
            return stored, message + "; the stored set is used"
        return stored, None
    eval_set = _store_voices(candidate(spec), run_dir)
    atomic_write_text(eval_dir(run_dir) / EVAL_SET_FILE,
                      json.dumps(eval_set.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return eval_set, None
