"""The Tokenizer tab's sample box: one sentence tokenized in-process by the base and the extended tokenizer
(two small models, cached while their files are unchanged), pieces labelled base / new / unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

from data_tools.text import registered_languages
from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from webui.form_inputs import InputProblem, existing_file
from webui.plots import badge_html, empty_frame, message_html

AUTO_LANGUAGE = "auto"
SAMPLE_TEXT = "ሰላም ለዓለም። ይህ የአማርኛ ምሳሌ ነው፣ 2025 ዓ.ም."
SAMPLE_COLUMNS = ["tokenizer", "vocab size", "tokens", "new ids", "share new %", "unknown", "normalized text"]
NEW, BASE, UNKNOWN = "new", "base", "unknown"
PIECE_COLORS = {NEW: "#2e86de", BASE: "#95a5a6", UNKNOWN: "#c0392b"}


def language_choices() -> list[str]:
    return [AUTO_LANGUAGE, *registered_languages()]


def chosen_language(value: str | None) -> str | None:
    """The dropdown's language, None for "auto" (the front-end detects it)."""
    return None if not value or value == AUTO_LANGUAGE else value


@lru_cache(maxsize=16)
def _load_tokenizer(path: str, mtime_ns: int, size: int) -> TextTokenizer:
    return TextTokenizer(path)


def load_tokenizer(path: Path) -> TextTokenizer:
    """A TextTokenizer, cached while the file is unchanged (the sample box re-tokenizes on every edit)."""
    stat = path.stat()
    return _load_tokenizer(str(path), stat.st_mtime_ns, stat.st_size)


@dataclass
class Tokenization:
    """One tokenizer's view of the sample: pieces labelled base/new/unknown, ids, counts."""

    name: str
    vocab_size: int
    normalized: str
    pieces: list[str]
    ids: list[int]
    labels: list[str]

    @property
    def new_count(self) -> int:
        return sum(1 for label in self.labels if label == NEW)

    @property
    def unknown_count(self) -> int:
        return sum(1 for label in self.labels if label == UNKNOWN)

    @property
    def share_new(self) -> float:
        return 100.0 * self.new_count / len(self.ids) if self.ids else 0.0

    def highlighted(self) -> list[tuple[str, str | None]]:
        """(piece, label) pairs for gr.HighlightedText; the ids are shown next to it."""
        return [(piece, label) for piece, label in zip(self.pieces, self.labels)]

    def ids_text(self) -> str:
        return " ".join(str(i) for i in self.ids)

    def summary_row(self) -> dict[str, object]:
        return {
            "tokenizer": self.name,
            "vocab size": self.vocab_size,
            "tokens": len(self.ids),
            "new ids": self.new_count,
            "share new %": round(self.share_new, 1),
            "unknown": self.unknown_count,
            "normalized text": self.normalized,
        }


def tokenize_sample(tokenizer: TextTokenizer, text: str, name: str, base_vocab_size: int | None,
                    language: str | None = None) -> Tokenization:
    """Tokenize ``text``; ids at or above ``base_vocab_size`` count as new (None: nothing is new)."""
    normalized = tokenizer.normalize(text, language)
    ids = tokenizer.encode_normalized(normalized)
    pieces = [tokenizer.sp.IdToPiece(i) for i in ids]
    labels: list[str] = []
    for token_id in ids:
        if token_id == tokenizer.unk_id:
            labels.append(UNKNOWN)
        elif base_vocab_size is not None and token_id >= base_vocab_size:
            labels.append(NEW)
        else:
            labels.append(BASE)
    return Tokenization(name=name, vocab_size=tokenizer.vocab_size, normalized=normalized, pieces=pieces,
                        ids=ids, labels=labels)


@dataclass
class SampleView:
    """What the sample section shows; ``message`` is an error line (empty when all went well)."""

    message: str = ""
    summary: pd.DataFrame = field(default_factory=lambda: empty_frame(SAMPLE_COLUMNS))
    base_pieces: list[tuple[str, str | None]] = field(default_factory=list)
    base_ids: str = ""
    extended_pieces: list[tuple[str, str | None]] = field(default_factory=list)
    extended_ids: str = ""


def compare_tokenization(text: str, base_path: str, extended_path: str, language: str | None,
                         workspace: Path | str) -> SampleView:
    """The sample sentence under the base and the extended tokenizer, side by side."""
    if not (text or "").strip():
        return SampleView(message=message_html("type a sentence to see how it tokenizes", "info"))
    try:
        base_file = existing_file(base_path, workspace, "base tokenizer", required=False)
        extended_file = existing_file(extended_path, workspace, "extended tokenizer", required=False)
        if base_file is None and extended_file is None:
            raise InputProblem("give a base or an extended tokenizer")
        base = load_tokenizer(base_file) if base_file else None
        extended = load_tokenizer(extended_file) if extended_file else None
    except (InputProblem, TokenizerError, OSError) as exc:
        return SampleView(message=message_html(str(exc)))
    lang = chosen_language(language)
    base_size = base.vocab_size if base is not None else None
    view = SampleView()
    rows = []
    if base is not None:
        result = tokenize_sample(base, text, "base", None, lang)
        view.base_pieces, view.base_ids = result.highlighted(), result.ids_text()
        rows.append(result.summary_row())
    if extended is not None:
        result = tokenize_sample(extended, text, "extended", base_size, lang)
        view.extended_pieces, view.extended_ids = result.highlighted(), result.ids_text()
        rows.append(result.summary_row())
    view.summary = pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
    if base is None:
        view.message = badge_html("NOTE", "no base tokenizer: new ids cannot be told apart", "info")
    return view
