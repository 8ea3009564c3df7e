"""Choosing a split: entries grouped so that nothing leaks, then val chosen speaker-aware and deterministically.

``plan_split`` works on parsed entries (``SplitItem``); ``data_tools.split`` (codes manifests, audio lists, the
frozen test set) and ``data_tools.split_pairs`` (IndexTTS2 / 2.5 pairs) read the manifests and write the files.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass

from data_tools.text import normalize_text
from data_tools.text_keys import text_key


class SplitError(ValueError):
    """Input the splitter refuses (one-line message)."""


@dataclass(frozen=True)
class SplitItem:
    """What the splitter needs to know about one entry."""

    id: str
    text: str
    speaker: str | None
    codes: str  # resolved path
    language: str | None = None
    source: str | None = None  # the recording the clip was cut from (ingest), when known


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def leak_keys(item: SplitItem, by_speaker: bool = False) -> set[tuple[str, str]]:
    """What an entry shares with entries that must stay on its side."""
    keys = {("id", item.id), ("codes", item.codes), ("text", text_key(item.text)),
            ("text", text_key(normalize_text(item.text, item.language)))}
    if item.source:
        keys.add(("source", item.source))
    if by_speaker and item.speaker is not None:
        keys.add(("speaker", item.speaker))
    return {key for key in keys if key[0] != "text" or key[1]}  # a text of punctuation only says nothing


def leak_groups(items: list[SplitItem], by_speaker: bool = False) -> list[list[int]]:
    """Indices grouped so that entries sharing an id, text, codes file or source recording (and with
    ``by_speaker`` a speaker) are together (first-seen order)."""
    uf = _UnionFind(len(items))
    first: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        keys = leak_keys(item, by_speaker)
        for key in keys:
            j = first.setdefault(key, i)
            if j != i:
                uf.union(i, j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(items)):
        groups[uf.find(i)].append(i)
    return sorted(groups.values(), key=lambda g: g[0])


@dataclass
class SplitPlan:
    train: list[int]  # entry indices, manifest order
    val: list[int]
    held_out: list[str]
    groups: int


def plan_split(items: list[SplitItem], val_fraction: float, seed: int, held_out_speakers: int = 0,
               by_speaker: bool = False) -> SplitPlan:
    """Choose the val entries (see the module docstring); raises SplitError for impossible requests."""
    if not 0.0 <= val_fraction < 1.0:
        raise SplitError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    rng = random.Random(seed)
    groups = leak_groups(items, by_speaker)
    speakers_of = [Counter(items[i].speaker for i in group) for group in groups]
    in_val = [False] * len(groups)

    all_speakers = sorted({item.speaker for item in items if item.speaker is not None})
    held_out: list[str] = []
    if held_out_speakers:
        if held_out_speakers < 0:
            raise SplitError("--held-out-speakers must be >= 0")
        if held_out_speakers >= len(all_speakers):
            raise SplitError(f"--held-out-speakers {held_out_speakers}: the manifest has {len(all_speakers)} "
                             "speaker(s); at least one must stay in train")
        shuffled = all_speakers[:]
        rng.shuffle(shuffled)
        held_out = sorted(shuffled[:held_out_speakers])
        held = set(held_out)
        for g, speakers in enumerate(speakers_of):
            if held & set(speakers):
                in_val[g] = True

    train_left = Counter(items[i].speaker for i in range(len(items)))
    for g, speakers in enumerate(speakers_of):
        if in_val[g]:
            train_left.subtract(speakers)
    seen = [s for s in all_speakers if s not in set(held_out)]
    seen_total = sum(train_left[s] for s in seen) + train_left[None]
    target = round(val_fraction * seen_total)
    if val_fraction > 0 and seen_total >= 2:
        target = max(1, target)
    quota = {s: round(val_fraction * train_left[s]) for s in (*seen, None)}
    taken: Counter = Counter()

    order = list(range(len(groups)))
    rng.shuffle(order)
    chosen = 0
    for respect_quota in (True, False):  # first per-speaker quotas, then fill up to the target
        for g in order:
            if chosen >= target:
                break
            if in_val[g]:
                continue
            size = sum(speakers_of[g].values())
            if chosen + size > target:
                continue
            if not by_speaker and not _keeps_speakers_seen(speakers_of[g], train_left):
                continue
            if respect_quota and any(taken[s] + n > quota.get(s, 0) for s, n in speakers_of[g].items()):
                continue
            in_val[g] = True
            chosen += size
            taken.update(speakers_of[g])
            train_left.subtract(speakers_of[g])
    if chosen == 0 and target > 0:  # every group is larger than the target (whole recordings): the smallest one
        left_in_train = sum(sum(speakers_of[g].values()) for g in range(len(groups)) if not in_val[g])
        sizes = [(sum(speakers_of[g].values()), k, g) for k, g in enumerate(order) if not in_val[g]
                 and (by_speaker or _keeps_speakers_seen(speakers_of[g], train_left))]
        fitting = [row for row in sizes if row[0] < left_in_train]  # train keeps something
        if fitting:
            g = min(fitting)[2]
            in_val[g] = True
            train_left.subtract(speakers_of[g])

    train = sorted(i for g, group in enumerate(groups) if not in_val[g] for i in group)
    val = sorted(i for g, group in enumerate(groups) if in_val[g] for i in group)
    return SplitPlan(train, val, held_out, len(groups))


def _keeps_speakers_seen(speakers: Counter, train_left: Counter) -> bool:
    """Whether moving a group to val leaves every named speaker of it with an utterance in train."""
    return all(speaker is None or train_left[speaker] - n >= 1 for speaker, n in speakers.items())


def recording_source(obj: dict) -> str | None:
    """The recording an entry was cut from (ingest's ``source``), when the line names one."""
    value = obj.get("source")
    return str(value) if isinstance(value, (str, int)) and str(value).strip() else None
