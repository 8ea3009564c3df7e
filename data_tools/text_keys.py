"""Vectorised per-text facts for many texts at once: letter counts per script, and "same text" keys.

The data checker and the splitter look at hundreds of thousands of lines; a Python loop over every
character would dominate their run time. Here a chunk of texts becomes one array of code points, and
a lazily filled per-code-point table gives each one's script (the rules of ``data_tools.text.script_of``)
and its key character, so the per-text work is a few numpy operations.

"The same text" (duplicates, train/val leakage, split groups): Unicode NFC, case-folded, every
character that is not a letter or digit treated as a space, spaces collapsed. Two readings of one
sentence that differ only in punctuation, spacing or case are the same text.
"""

from __future__ import annotations

import unicodedata

import numpy as np

from data_tools.text import script_of

SCRIPTS = ("ethiopic", "latin", "other")
_SCRIPT_CODES = {None: 0, "ethiopic": 1, "latin": 2, "other": 3}
_SPACE = 0x20
_TABLE_SIZE = 0x110000

_script_table = np.zeros(_TABLE_SIZE, dtype=np.uint8)  # 0 none, 1 ethiopic, 2 latin, 3 other
_key_table = np.zeros(_TABLE_SIZE, dtype=np.uint32)
_known = np.zeros(_TABLE_SIZE, dtype=bool)

# Polynomial hash over key characters, modulo 2**64 (numpy integer arithmetic wraps).
_BASE = np.uint64(0x100000001B3)
_BASE_INVERSE = np.uint64(pow(int(_BASE), -1, 2**64))


def _fill(codepoints: np.ndarray) -> None:
    unseen = codepoints[~_known[codepoints]]
    if not unseen.size:
        return
    # The distinct ones by sort and compare: np.unique would do the same, but its first call imports numpy.ma
    # (15-30 ms), once in every checker worker process.
    unseen = np.sort(unseen)
    unseen = unseen[np.concatenate(([True], unseen[1:] != unseen[:-1]))]
    for cp in unseen.tolist():
        ch = chr(cp)
        _script_table[cp] = _SCRIPT_CODES[script_of(ch)]
        if ch.isalnum():
            folded = ch.casefold()
            _key_table[cp] = ord(folded) if len(folded) == 1 else cp
        else:
            _key_table[cp] = _SPACE
        _known[cp] = True


def _codepoints(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The NFC texts' code points, one array, and each text's length in it (one join, one NFC test)."""
    joined = "".join(texts)
    if unicodedata.is_normalized("NFC", joined):
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        normalized = [unicodedata.normalize("NFC", t) for t in texts]
        joined = "".join(normalized)
        lengths = np.fromiter(map(len, normalized), dtype=np.int64, count=len(texts))
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if points.size:
        _fill(points)
    return points, lengths


class TextBatch:
    """Many texts as one code-point array (NFC); each text is a segment of it."""

    def __init__(self, texts: list[str]) -> None:
        self.count = len(texts)
        self.points, self.lengths = _codepoints(texts)
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64) if texts else \
            np.zeros(0, dtype=np.int64)
        self.owner = np.repeat(np.arange(self.count, dtype=np.int64), self.lengths)

    def script_counts(self) -> np.ndarray:
        """(texts, 4) letter counts: columns none, ethiopic, latin, other (``script_of`` rules)."""
        classes = _script_table[self.points].astype(np.int64)
        return np.bincount(self.owner * 4 + classes, minlength=4 * self.count).reshape(self.count, 4)

    def _key_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Key characters kept (words, one space between them) and the text each belongs to."""
        mapped = _key_table[self.points]
        word = mapped != _SPACE
        # Keep every word character, and a space that follows a word character of the same text...
        keep = word.copy()
        keep[1:] |= word[:-1] & ~word[1:] & (self.owner[1:] == self.owner[:-1])
        points, owner = mapped[keep], self.owner[keep]
        # ...unless it ends its text (trailing punctuation or spaces).
        if points.size:
            last = np.ones(points.size, dtype=bool)
            last[:-1] = owner[1:] != owner[:-1]
            drop = last & (points == _SPACE)
            if drop.any():
                points, owner = points[~drop], owner[~drop]
        return points, owner

    def keys(self) -> list[str]:
        """The key of every text as a string (readable; ``key_hashes`` is the fast form)."""
        points, owner = self._key_points()
        bounds = np.searchsorted(owner, np.arange(self.count + 1))
        text = points.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
        return [text[bounds[i]:bounds[i + 1]] for i in range(self.count)]

    def key_hashes(self) -> np.ndarray:
        """uint64 hash of every text's key; 0 for a text without letters or digits (nothing to compare)."""
        out = np.zeros(self.count, dtype=np.uint64)
        points, owner = self._key_points()
        if points.size:
            powers, inverse = _powers(points.size)
            bounds = np.searchsorted(owner, np.arange(self.count + 1))
            lengths = np.diff(bounds)
            present = np.flatnonzero(lengths > 0)
            weighted = (points.astype(np.uint64) + np.uint64(1)) * powers
            sums = np.add.reduceat(weighted, bounds[present])
            out[present] = sums * inverse[bounds[present]]  # shift each text's powers to start at 0
            out ^= lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            out = _mix(out)
            out[out == 0] = 1
            out[lengths == 0] = 0  # nothing to compare: a text of punctuation only
        return out


_power_cache: list[np.ndarray] = []


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE**k and BASE**-k (mod 2**64) for k < n, from a table grown on demand."""
    if not _power_cache or _power_cache[0].size < n:
        size = max(n, 2 * _power_cache[0].size if _power_cache else 1 << 16)
        powers = np.full(size, _BASE, dtype=np.uint64)
        powers[0] = 1
        inverse = np.full(size, _BASE_INVERSE, dtype=np.uint64)
        inverse[0] = 1
        _power_cache[:] = [np.cumprod(powers, dtype=np.uint64), np.cumprod(inverse, dtype=np.uint64)]
    return _power_cache[0][:n], _power_cache[1][:n]


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads the polynomial hash over all 64 bits."""
    z = values.copy()
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def text_key(text: str) -> str:
    """The "same text" key of one text (see the module docstring)."""
    return TextBatch([text]).keys()[0]
