"""CTC forced alignment: where each word of a known transcript is spoken, from a CTC model's emissions.

The transcript's tokens are laid out with a blank before, between and after them (``2L+1`` states); a Viterbi
pass over the frames finds the most likely path that emits exactly those tokens in order (a state stays, moves
to the next, or skips a blank between two different tokens), as CTC training scores it. Each token then has
the frames its state held; a word spans from its first token's first frame to its last token's last frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NEVER = -1e30  # log-probability of an impossible path (finite, so sums stay comparable)


def align_tokens(log_probs: np.ndarray, tokens: Sequence[int], blank: int) -> list[tuple[int, int]] | None:
    """(first frame, last frame) of each token along the most likely CTC path; None when the frames are too
    few for the tokens (or there are no tokens)."""
    frames, states = log_probs.shape[0], 2 * len(tokens) + 1
    if not tokens or frames == 0:
        return None
    labels = np.full(states, blank, dtype=np.int64)
    labels[1::2] = tokens
    can_skip = np.zeros(states, dtype=bool)  # a token state may be entered from the token two states back
    can_skip[3::2] = labels[3::2] != labels[1:-2:2]
    emit = log_probs[:, labels]
    score = np.full(states, NEVER)
    score[:2] = emit[0, :2]
    moves = np.zeros((frames, states), dtype=np.int8)  # 0 stayed, 1 came from s-1, 2 from s-2
    for t in range(1, frames):
        stay = score
        step = np.concatenate(([NEVER], score[:-1]))
        skip = np.where(can_skip, np.concatenate(([NEVER, NEVER], score[:-2])), NEVER)
        choices = np.stack([stay, step, skip])
        moves[t] = np.argmax(choices, axis=0)
        score = np.maximum(choices.max(axis=0) + emit[t], NEVER)
    last = states - 1 if score[-1] >= score[-2] else states - 2  # ends on the final blank or the last token
    if score[last] <= NEVER / 2:
        return None
    path = np.empty(frames, dtype=np.int64)
    for t in range(frames - 1, -1, -1):
        path[t] = last
        last -= int(moves[t, last])
    spans = []
    for k in range(len(tokens)):
        held = np.flatnonzero(path == 2 * k + 1)
        spans.append((int(held[0]), int(held[-1])))
    return spans


def word_times(log_probs: np.ndarray, words: Sequence[Sequence[int]], blank: int, seconds_per_frame: float,
               delimiter: int | None = None) -> list[tuple[float, float] | None] | None:
    """(start, end) seconds of each word (None for a word with no token the model knows); the delimiter token,
    when given, is aligned between words as the model was trained. None when the words cannot be aligned."""
    tokens: list[int] = []
    owner: list[int | None] = []  # the word each token belongs to (None: a delimiter)
    for index, word in enumerate(words):
        if not word:
            continue
        if tokens and delimiter is not None:
            tokens.append(delimiter)
            owner.append(None)
        tokens += list(word)
        owner += [index] * len(word)
    spans = align_tokens(log_probs, tokens, blank)
    if spans is None:
        return None
    times: list[tuple[float, float] | None] = [None] * len(words)
    for (first, last), index in zip(spans, owner, strict=True):
        if index is None:
            continue
        start, end = first * seconds_per_frame, (last + 1) * seconds_per_frame
        known = times[index]
        times[index] = (start, end) if known is None else (min(known[0], start), max(known[1], end))
    return times


def split_words(words: Sequence[str], times: Sequence[tuple[float, float] | None], cuts: Sequence[float]
                ) -> list[str]:
    """The words in ``len(cuts) + 1`` groups: a word goes before the first cut its middle precedes; a word
    without a time goes with the word before it (or after, at the start)."""
    groups: list[list[str]] = [[] for _ in range(len(cuts) + 1)]
    place = [None if time is None else sum(1 for cut in cuts if (time[0] + time[1]) / 2 > cut) for time in times]
    known = [p for p in place if p is not None]
    current = known[0] if known else 0
    for word, where in zip(words, place, strict=True):
        current = max(current, where) if where is not None else current  # the order of words is kept
        groups[current].append(word)
    return [" ".join(group) for group in groups]
