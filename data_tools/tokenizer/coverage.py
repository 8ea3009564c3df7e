"""Which of a tokenizer's new pieces the training data trains, and which letters of its script it never sees.

An extended tokenizer's appended pieces are new rows of the GPT's text embedding and head. A piece that no
training text encodes to never gets a gradient: its row stays at its initial value, and a text that needs it at
synthesis speaks noise there. Likewise a letter of the new script that the data never has was never heard. This
counts both over the training manifest's texts, normalised by the front-end as training normalises them.
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


def trained_ids(texts: Iterable[str], encode: Callable[[str], list[int]]) -> frozenset[int]:
    """The ids some text encodes to: the rows a run on these texts trains."""
    seen: set[int] = set()
    for text in texts:
        if text:
            seen.update(encode(text))
    return frozenset(seen)


def untrained_pieces(ids: Sequence[int], pieces: Sequence[str], trained: frozenset[int],
                     base_size: int) -> list[int]:
    """Positions in a text's ``ids`` (with their ``pieces``) of appended pieces (id >= ``base_size``) that no training
    text has: the rows behind them never trained, so the model speaks noise there."""
    if len(ids) != len(pieces):
        raise ValueError(f"{len(ids)} ids but {len(pieces)} pieces")
    return [index for index, piece_id in enumerate(ids) if piece_id >= base_size and piece_id not in trained]
