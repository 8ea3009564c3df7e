"""Train a SentencePiece model on a corpus, every line through the text front-end first.

The pieces therefore match what the trainer and inference feed the tokenizer (``normalize_text``).
SentencePiece's own normaliser is set to ``identity``: the front-end already did NFC, punctuation and
numbers, and a second normalisation (NFKC) would make pieces that the front-end's output never contains.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from data_tools.fileio import fsync_dir
from data_tools.text import normalize_text
from data_tools.tokenizer.spm_model import TokenizerToolError, _one_line
from generations.registry import format_of_line

MODEL_TYPES = ("bpe", "unigram")
MANIFEST_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class CorpusStats:
    files: int
    lines: int
    skipped_empty: int
    characters: int


def iter_corpus_lines(path: Path) -> Iterator[tuple[str, str | None, int]]:
    """``(raw text, language or None, line number)`` of a text file (one line each) or a JSONL manifest
    (its ``text`` field, and ``language`` when present)."""
    path = Path(path)
    is_manifest = path.suffix.lower() in MANIFEST_SUFFIXES
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 (closed by the with below)
    except FileNotFoundError:
        raise TokenizerToolError(f"corpus file not found: {path}") from None
    except OSError as exc:
        raise TokenizerToolError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    with handle:
        lineno = 0
        while True:
            try:
                raw = handle.readline()
            except UnicodeDecodeError:
                raise TokenizerToolError(f"{path}:{lineno + 1}: not valid UTF-8") from None
            if not raw:
                return
            lineno += 1
            if not is_manifest:
                yield raw.rstrip("\n"), None, lineno
                continue
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise TokenizerToolError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise TokenizerToolError(f"{path}:{lineno}: expected a JSON object with a string 'text' field")
            fmt = format_of_line(obj)  # a training manifest's format names its fields; any other line: text/language
            text_field, language_field = (fmt.text_field, fmt.language_field) if fmt else ("text", "language")
            if not isinstance(obj.get(text_field), str):
                raise TokenizerToolError(f"{path}:{lineno}: expected a JSON object with a string '{text_field}' field")
            language = obj.get(language_field) if isinstance(obj.get(language_field), str) else None
            yield obj[text_field], language, lineno


def normalized_corpus(inputs: list[Path], language: str | None, max_lines: int | None = None,
                      progress: bool = False) -> tuple[list[str], CorpusStats]:
    """All non-empty normalised lines of ``inputs`` (``language`` overrides a manifest's own field)."""
    lines: list[str] = []
    skipped = 0
    bar = _progress_bar(progress, "normalising")
    try:
        for path in inputs:
            for raw, line_language, _ in iter_corpus_lines(Path(path)):
                text = normalize_text(raw, language or line_language)
                bar.update(1)
                if not text:
                    skipped += 1
                    continue
                lines.append(text)
                if max_lines is not None and len(lines) >= max_lines:
                    break
            if max_lines is not None and len(lines) >= max_lines:
                break
    finally:
        bar.close()
    stats = CorpusStats(files=len(inputs), lines=len(lines), skipped_empty=skipped,
                        characters=sum(len(line) for line in lines))
    return lines, stats


def train_tokenizer(
    inputs: list[Path],
    out_prefix: Path,
    vocab_size: int,
    model_type: str = "bpe",
    language: str | None = None,
    *,
    character_coverage: float = 1.0,
    max_lines: int | None = None,
    max_piece_length: int = 16,
    byte_fallback: bool = False,
    num_threads: int | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Train ``<out_prefix>.model`` (+ ``.vocab``) on ``inputs`` and return the ``.model`` path.

    ``inputs`` are text files (one utterance per line) or JSONL manifests (their ``text`` field).
    Every line goes through ``normalize_text(line, language)`` first. Ids 0/1/2 are ``<unk>``, ``<s>``,
    ``</s>`` as in IndexTTS's ``bpe.model``. Raises TokenizerToolError with a one-line reason.
    """
    if model_type not in MODEL_TYPES:
        raise TokenizerToolError(f"model type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    if vocab_size < 8:
        raise TokenizerToolError(f"vocab size must be at least 8, got {vocab_size}")
    if not inputs:
        raise TokenizerToolError("no corpus files given")
    out_prefix = Path(out_prefix)
    emit = log or (lambda _line: None)
    lines, stats = normalized_corpus([Path(p) for p in inputs], language, max_lines, progress)
    if not lines:
        raise TokenizerToolError(f"no text in {', '.join(str(p) for p in inputs)}")
    emit(f"corpus: {stats.lines} lines ({stats.characters} characters) from {stats.files} file(s)"
         + (f", {stats.skipped_empty} empty after normalisation" if stats.skipped_empty else ""))
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    threads = num_threads or max(1, min(8, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory(prefix=f".{out_prefix.name}.", dir=out_prefix.parent) as scratch:
        tmp_prefix = Path(scratch) / "model"
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_prefix=str(tmp_prefix),
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                normalization_rule_name="identity",
                max_sentencepiece_length=max_piece_length,
                byte_fallback=byte_fallback,
                num_threads=threads,
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                minloglevel=2,
            )
        except (RuntimeError, OSError) as exc:
            raise TokenizerToolError(f"SentencePiece training failed: {_one_line(exc)}") from None
        model_path = out_prefix.with_name(out_prefix.name + ".model")
        vocab_path = out_prefix.with_name(out_prefix.name + ".vocab")
        # Same-folder renames: a reader sees the old model or the new one, never half of one.
        os.replace(tmp_prefix.with_suffix(".model"), model_path)
        os.replace(tmp_prefix.with_suffix(".vocab"), vocab_path)
    fsync_dir(model_path.parent)
    processor = spm.SentencePieceProcessor(model_file=str(model_path))
    emit(f"trained {model_type} tokenizer: {processor.GetPieceSize()} pieces -> {model_path}")
    return model_path


class _NoBar:
    def update(self, _n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(enabled: bool, desc: str):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    # disable=None: no bar when stderr is not a terminal (logs and pipes stay clean)
    return tqdm(desc=desc, unit=" lines", file=sys.stderr, leave=False, disable=None)
