"""Which of a tokenizer's new pieces the training data trains, and which letters of its script it never sees.

An extended tokenizer's appended pieces are new rows of the GPT's text embedding and head. A piece that no
training text encodes to never gets a gradient: its row stays at its initial value, and a text that needs it at
synthesis speaks noise there. Likewise a letter of the new script that the data never has was never heard. This
counts both over the training manifest's texts, normalised by the front-end as training normalises them.

The rules here are the one implementation the pre-flight (``trainer.plan_coverage``: over the items it loads), the
Tokenizer tab's verify and the Test tab (``webui.testing.text_coverage``: SentencePiece pieces, and IndexTTS-2.5's
byte-level merges and unseen letters) share: which ids a grown vocabulary appends (:func:`appended_ids`; a 2.5
table's merges come after its spare row), which of them some text reaches (:func:`trained_appended`), and which
chunks of a text to mark (:func:`marked_chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from data_tools.text import script_letters, scripts_in

EXAMPLES = 12


@dataclass(frozen=True)
class TokenCoverage:
    texts: int
    appended: int  # pieces after the base model's (0: no base given)
    trained: int  # appended pieces some text encodes to
    untrained: list[str] = field(default_factory=list)  # the appended pieces no text encodes to, in id order
    letters: int = 0  # letters of the new script (0: the texts are not in a script with a repertoire)
    unseen_letters: str = ""  # its letters no text has

    def to_json(self) -> dict[str, object]:
        return {"texts": self.texts, "appended": self.appended, "trained": self.trained,
                "untrained": len(self.untrained), "untrained_examples": self.untrained[:EXAMPLES],
                "letters": self.letters, "unseen_letters": self.unseen_letters}

    def message(self) -> str:
        parts = []
        if self.appended:
            parts.append(f"{self.trained} of {self.appended} appended pieces occur in the {self.texts} training "
                         "texts")
            if self.untrained:
                shown = " ".join(self.untrained[:EXAMPLES]) + (" ..." if len(self.untrained) > EXAMPLES else "")
                parts.append(f"{len(self.untrained)} never do (their rows will not train): {shown}")
        if self.letters:
            seen = self.letters - len(self.unseen_letters)
            text = f"{seen} of {self.letters} letters of the script occur"
            if self.unseen_letters:
                text += f"; never: {self.unseen_letters[:40]}" + ("..." if len(self.unseen_letters) > 40 else "")
            parts.append(text)
        return "; ".join(parts) or f"{self.texts} training texts, nothing appended to check"


def token_coverage(texts: Iterable[str], encode: Callable[[str], list[int]], pieces: Sequence[str],
                   base_size: int | None) -> TokenCoverage:
    """Coverage of ``pieces[base_size:]`` (the appended ones) and of the texts' script over normalised ``texts``."""
    seen_ids: set[int] = set()
    characters: set[str] = set()
    count = 0
    for text in texts:
        if not text:
            continue
        count += 1
        seen_ids.update(encode(text))
        characters.update(text)
    appended = range(base_size, len(pieces)) if base_size is not None else range(0)
    untrained = [pieces[index] for index in appended if index not in seen_ids]
    scripts = sorted(scripts_in("".join(sorted(characters))))
    letters = "".join(script_letters(script) for script in scripts)
    unseen = "".join(ch for ch in letters if ch not in characters)
    return TokenCoverage(texts=count, appended=len(appended), trained=len(appended) - len(untrained),
                         untrained=untrained, letters=len(letters), unseen_letters=unseen)


def appended_ids(base_size: int, total: int, spare_rows: int = 0) -> range:
    """The ids of the ``total - base_size`` pieces a grown text vocabulary appends to a base of ``base_size`` ids.
    ``spare_rows``: rows of the base's text table after its ids that no piece has (IndexTTS-2.5: one, so its
    merges take ids from 60,510 while its base has 60,509 ids)."""
    return range(base_size + spare_rows, total + spare_rows)


def trained_appended(id_lists: Iterable[Iterable[int]], appended: range) -> frozenset[int]:
    """The ``appended`` ids some text's ids hold: the appended rows a run on these texts trains (the pre-flight
    over the items it loads, the Test tab over the run's manifests)."""
    seen: set[int] = set()
    for ids in id_lists:
        seen.update(int(i) for i in ids if int(i) in appended)
    return frozenset(seen)


def seen_characters(texts: Iterable[str]) -> frozenset[str]:
    """Every character of ``texts``."""
    seen: set[str] = set()
    for text in texts:
        seen.update(text)
    return frozenset(seen)


def unseen_letters(text: str, seen: frozenset[str]) -> list[str]:
    """The letters of ``text`` of a script with a repertoire (Ethiopic) that ``seen`` lacks, in order of use."""
    letters = set("".join(script_letters(script) for script in scripts_in(text)))
    return list(dict.fromkeys(ch for ch in text if ch in letters and ch not in seen))


def marked_chunks(chunks: Sequence[tuple[str, Sequence[int]]], appended: range, trained: frozenset[int],
                  unseen: Sequence[str] = ()) -> list[int]:
    """Positions of a text's chunks (shown text, the ids behind it) to mark: a chunk holding an appended id no
    training text holds (its row never trained), or one of the ``unseen`` letters (never heard)."""
    return [index for index, (shown, ids) in enumerate(chunks)
            if any(i in appended and i not in trained for i in ids) or any(ch in shown for ch in unseen)]


def byte_chunks(ids: Sequence[int], token_bytes: Callable[[int], bytes]) -> list[tuple[str, list[int]]]:
    """A byte-level tokenizer's ids grouped into whole characters: (text, ids) per group, so a letter whose UTF-8
    bytes span several tokens shows once, with all of them."""
    chunks: list[tuple[str, list[int]]] = []
    pending, held = b"", []
    for token_id in ids:
        pending += token_bytes(token_id)
        held.append(token_id)
        try:
            text = pending.decode("utf-8")
        except UnicodeDecodeError:
            continue
        chunks.append((text, held))
        pending, held = b"", []
    if held:
        chunks.append((pending.decode("utf-8", errors="replace"), held))
    return chunks
