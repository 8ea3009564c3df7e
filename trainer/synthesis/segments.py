"""Long text -> segments of at most N text tokens, cut where a reader would pause (IndexTTS2's segmentation).

Upstream IndexTTS2 speaks a text in segments of at most ``max_text_tokens_per_segment`` (120) tokens, each
generated on its own and joined with 200 ms of silence. Here the cuts follow the punctuation of the
normalised text, so that Amharic is never cut inside a word:

1. sentences end after ``።`` ``፧`` ``፨`` ``!`` ``?`` (and ``.`` followed by a space or the end, so that
   ``3.5`` stays whole);
2. a sentence longer than the limit is cut after clause marks ``፣`` ``፤`` ``,`` ``;`` ``፥`` ``፦``;
3. a clause still longer is cut between words (spaces); only a single word longer than the limit is cut
   between its tokens;
4. consecutive pieces are packed into one segment while they fit the limit.

Pieces are tokenised on their own and their ids concatenated: SentencePiece pieces never span a space, so for
cuts at spaces this equals tokenising the joined text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

DEFAULT_MAX_SEGMENT_TOKENS = 120  # infer_v2's max_text_tokens_per_segment
SENTENCE_END = "።፧፨!?"
CLAUSE_MARKS = "፣፤,;፥፦"
_SENTENCE_SPLIT = re.compile(rf"(?<=[{SENTENCE_END}])\s*|(?<=\.)(?:\s+|$)")
_CLAUSE_SPLIT = re.compile(rf"(?<=[{CLAUSE_MARKS}])\s*")

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class TextSegment:
    text: str  # the normalised text of the segment
    ids: list[int]


def _parts(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [part.strip() for part in pattern.split(text) if part.strip()]


def sentences(text: str) -> list[str]:
    """``text`` cut after its sentence ends (rule 1 above), e.g. for speaking and sending one sentence at a time."""
    return _parts(text, _SENTENCE_SPLIT)


def _fit(text: str, encode: Encode, limit: int, levels: Sequence[Callable[[str], list[str]]]) -> list[TextSegment]:
    """``text`` as pieces of at most ``limit`` tokens, splitting at the coarsest level that is needed."""
    ids = encode(text)
    if len(ids) <= limit:
        return [TextSegment(text, ids)]
    if not levels:  # one word longer than the limit: cut between its tokens (the text stays with the first cut)
        return [TextSegment(text if start == 0 else "", ids[start:start + limit])
                for start in range(0, len(ids), limit)]
    pieces = levels[0](text)
    if len(pieces) <= 1:
        return _fit(text, encode, limit, levels[1:])
    out: list[TextSegment] = []
    for piece in pieces:
        out.extend(_fit(piece, encode, limit, levels[1:]))
    return out


def _pack(pieces: Sequence[TextSegment], limit: int) -> list[TextSegment]:
    segments: list[TextSegment] = []
    for piece in pieces:
        last = segments[-1] if segments else None
        if last is not None and len(last.ids) + len(piece.ids) <= limit:
            segments[-1] = TextSegment(" ".join(t for t in (last.text, piece.text) if t), last.ids + piece.ids)
        else:
            segments.append(piece)
    return segments


def split_segments(normalized: str, encode: Encode, limit: int = DEFAULT_MAX_SEGMENT_TOKENS) -> list[TextSegment]:
    """Segments of ``normalized`` text (already through the front-end) of at most ``limit`` tokens each."""
    if limit < 1:
        raise ValueError(f"segment limit must be at least 1 token, got {limit}")
    clause_level: Callable[[str], list[str]] = lambda text: _parts(text, _CLAUSE_SPLIT)  # noqa: E731
    word_level: Callable[[str], list[str]] = str.split
    pieces: list[TextSegment] = []
    for sentence in _parts(normalized, _SENTENCE_SPLIT):
        pieces.extend(_fit(sentence, encode, limit, (clause_level, word_level)))
    return _pack([piece for piece in pieces if piece.ids], limit)
