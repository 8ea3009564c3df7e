"""Split a codes manifest into train and val: deterministic, speaker-aware, never leaking.

Library: ``split_manifest(manifest, out_dir, val_fraction, seed, held_out_speakers) -> SplitResult``
(``plan_split`` does the choosing on parsed entries). CLI::

    python -m data_tools.split --manifest M --out-dir D [--val-fraction 0.05] [--seed 0] [--held-out-speakers N]

writes ``D/train.jsonl`` and ``D/val.jsonl`` atomically (relative paths rewritten against ``D``; every
other field kept as it was).

- Never leaking: entries that share an id, a text ("same text" as the data checker defines it,
  before and after the text front-end) or a codes file form one group, and a group goes to one side.
- Speaker-aware: by default val holds utterances of speakers that also stay in train (each speaker
  keeps at least one group in train, and gives about ``val_fraction`` of its utterances to val).
  ``--held-out-speakers N`` additionally moves every utterance of N whole speakers to val (unseen
  voices); use ``--val-fraction 0`` to have only those in val.
- Deterministic: the same manifest and seed give the same split.
- IndexTTS2 paired manifests split by target utterance (the same planning on the targets), and stay
  leak-free: no utterance is a target in train and a prompt or target in val. A val pair whose prompt is a
  train target gets another prompt of its speaker that is not (one whose prompt features the manifest
  has); when there is none the pair is left out, and the notes say how many.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from data_tools.cli import OneLineErrorParser, run_refusing
from data_tools.fileio import atomic_write_text
from data_tools.manifest import (
    FORMAT_V2,
    FORMAT_V25,
    ManifestError,
    load_json_object,
    manifest_format,
    parse_manifest_line,
)
from data_tools.pairs_manifest import PAIR_PATH_FIELDS, PairEntry, parse_pair_object
from data_tools.pairs_manifest_v25 import V25_PATH_FIELDS, PairEntryV25, parse_pair_object_v25
from data_tools.text import normalize_text
from data_tools.text_keys import text_key

PATH_FIELDS = ("codes", "cond_mel", "cond_audio")


class SplitError(ValueError):
    """Input the splitter refuses (one-line message)."""


@dataclass
class SplitResult:
    train_path: Path
    val_path: Path
    train_count: int
    val_count: int
    groups: int  # leak-free groups the entries formed
    held_out: list[str] = field(default_factory=list)  # speakers only in val
    val_speakers: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"train: {self.train_count} entries -> {self.train_path}",
                 f"val: {self.val_count} entries from {self.val_speakers} speaker(s) -> {self.val_path}"]
        if self.held_out:
            lines.append(f"held-out speakers (val only): {', '.join(self.held_out)}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


@dataclass(frozen=True)
class SplitItem:
    """What the splitter needs to know about one entry."""

    id: str
    text: str
    speaker: str | None
    codes: str  # resolved path
    language: str | None = None


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


def leak_groups(items: list[SplitItem]) -> list[list[int]]:
    """Indices grouped so that entries sharing an id, text or codes file are together (first-seen order)."""
    uf = _UnionFind(len(items))
    first: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        keys = {("id", item.id), ("codes", item.codes), ("text", text_key(item.text)),
                ("text", text_key(normalize_text(item.text, item.language)))}
        for key in keys:
            if key[0] == "text" and not key[1]:
                continue  # a text of punctuation only says nothing
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


def plan_split(items: list[SplitItem], val_fraction: float, seed: int, held_out_speakers: int = 0) -> SplitPlan:
    """Choose the val entries (see the module docstring); raises SplitError for impossible requests."""
    if not 0.0 <= val_fraction < 1.0:
        raise SplitError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    rng = random.Random(seed)
    groups = leak_groups(items)
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
            if not _keeps_speakers_seen(speakers_of[g], train_left):
                continue
            if respect_quota and any(taken[s] + n > quota.get(s, 0) for s, n in speakers_of[g].items()):
                continue
            in_val[g] = True
            chosen += size
            taken.update(speakers_of[g])
            train_left.subtract(speakers_of[g])

    train = sorted(i for g, group in enumerate(groups) if not in_val[g] for i in group)
    val = sorted(i for g, group in enumerate(groups) if in_val[g] for i in group)
    return SplitPlan(train, val, held_out, len(groups))


def _keeps_speakers_seen(speakers: Counter, train_left: Counter) -> bool:
    """Whether moving a group to val leaves every named speaker of it with an utterance in train."""
    return all(speaker is None or train_left[speaker] - n >= 1 for speaker, n in speakers.items())


def _rebase(obj: dict, manifest_dir: Path, out_dir: Path, fields: tuple[str, ...] = PATH_FIELDS) -> dict:
    """Relative paths in ``obj`` rewritten so they still point at the same files from ``out_dir``."""
    out = dict(obj)
    for key in fields:
        value = obj.get(key)
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = Path(os.path.relpath(manifest_dir / value, out_dir)).as_posix()
    return out


def split_manifest(manifest: str | Path, out_dir: str | Path, val_fraction: float = 0.05, seed: int = 0,
                   held_out_speakers: int = 0) -> SplitResult:
    """Split ``manifest`` into ``out_dir``/train.jsonl and val.jsonl (raises SplitError on bad input)."""
    manifest = Path(manifest).absolute()
    out_dir = Path(out_dir).absolute()
    train_path, val_path = out_dir / "train.jsonl", out_dir / "val.jsonl"
    if manifest in (train_path, val_path):
        raise SplitError(f"--out-dir {out_dir} would overwrite the input manifest {manifest}")
    try:
        fmt = manifest_format(manifest)
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if fmt in (FORMAT_V2, FORMAT_V25):
        return _split_pairs(manifest, out_dir, train_path, val_path, val_fraction, seed, held_out_speakers,
                            v25=fmt == FORMAT_V25)
    items, objects = _read(manifest)
    plan = plan_split(items, val_fraction, seed, held_out_speakers)
    notes = []
    duplicate_ids = len(items) - len({item.id for item in items})
    if duplicate_ids:
        notes.append(f"{duplicate_ids} duplicate id(s) kept on one side; the data checker reports them")
    if val_fraction > 0 and not plan.val:
        notes.append("val is empty: every group is needed in train to keep its speaker seen")
    for path, indices in ((train_path, plan.train), (val_path, plan.val)):
        text = "".join(json.dumps(_rebase(objects[i], manifest.parent, out_dir), ensure_ascii=False) + "\n"
                       for i in indices)
        atomic_write_text(path, text)
    val_speakers = {items[i].speaker for i in plan.val if items[i].speaker is not None}
    return SplitResult(train_path=train_path, val_path=val_path, train_count=len(plan.train),
                       val_count=len(plan.val), groups=plan.groups, held_out=plan.held_out,
                       val_speakers=len(val_speakers), notes=notes)


PROMPT_FIELDS = ("prompt_id", "prompt_audio_path", "prompt_condition_path", "prompt_condition_len",
                 "prompt_emo_vec_path", "prompt_duration", "prompt_spk_vec_path")


def _read_pairs(manifest: Path, v25: bool = False) -> tuple[list[PairEntry | PairEntryV25], list[dict]]:
    from data_tools.manifest import iter_lines

    parse = parse_pair_object_v25 if v25 else parse_pair_object
    entries: list[PairEntry | PairEntryV25] = []
    objects: list[dict] = []
    try:
        for lineno, raw in iter_lines(manifest):
            if isinstance(raw, ManifestError):
                raise raw
            obj = load_json_object(raw, manifest, lineno)
            entries.append(parse(obj, manifest, lineno))
            objects.append(obj)
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if not entries:
        raise SplitError(f"{manifest}: manifest has no entries")
    return entries, objects


def _utterance(entry: PairEntry | PairEntryV25, role: str) -> str:
    """A pair's target or prompt utterance (its id, else its feature file)."""
    if role == "target":
        return entry.target_id or os.path.normpath(entry.codes)
    prompt_file = entry.spk_vec if isinstance(entry, PairEntryV25) else entry.condition
    return entry.prompt_id or os.path.normpath(prompt_file)


def _split_pairs(manifest: Path, out_dir: Path, train_path: Path, val_path: Path, val_fraction: float, seed: int,
                 held_out_speakers: int, v25: bool = False) -> SplitResult:
    entries, objects = _read_pairs(manifest, v25)
    targets: dict[str, int] = {}  # target utterance -> its first pair
    for i, entry in enumerate(entries):
        targets.setdefault(_utterance(entry, "target"), i)
    names = list(targets)
    items = [SplitItem(name, entries[i].target_text or name, entries[i].speaker, os.path.normpath(entries[i].codes),
                       entries[i].language) for name, i in targets.items()]
    plan = plan_split(items, val_fraction, seed, held_out_speakers)
    val_targets = {names[k] for k in plan.val}
    train_rows = [i for i, e in enumerate(entries) if _utterance(e, "target") not in val_targets]
    trained = {_utterance(entries[i], "target") for i in train_rows}
    prompt_source: dict[str, int] = {}  # prompt utterance -> a pair that has its prompt features
    for i, entry in enumerate(entries):
        prompt_source.setdefault(_utterance(entry, "prompt"), i)
    val_objects: list[dict] = []
    reprompted = dropped = 0
    used = {(_utterance(e, "target"), _utterance(e, "prompt")) for e in entries}
    for i, entry in enumerate(entries):
        target = _utterance(entry, "target")
        if target not in val_targets:
            continue
        obj = objects[i]
        if _utterance(entry, "prompt") in trained:
            choices = sorted(u for u, j in prompt_source.items()
                             if u not in trained and u != target and entries[j].speaker == entry.speaker
                             and (target, u) not in used)
            if not choices:
                dropped += 1
                continue
            chosen = random.Random(f"{seed}:{entry.id}").choice(choices)
            used.add((target, chosen))
            donor = objects[prompt_source[chosen]]
            obj = {k: v for k, v in obj.items() if k not in PROMPT_FIELDS}
            obj.update({k: donor[k] for k in PROMPT_FIELDS if k in donor})
            obj["id"] = f"{target}__{donor.get('prompt_id', 'prompt')}"
            reprompted += 1
        val_objects.append(obj)
    notes = []
    if reprompted:
        notes.append(f"{reprompted} val pair(s) got another prompt of their speaker (theirs is a train target)")
    if dropped:
        notes.append(f"{dropped} val pair(s) left out: no prompt of their speaker outside the train targets")
    if val_fraction > 0 and not val_objects:
        notes.append("val is empty: every target is needed in train to keep its speaker seen")
    for path, rows in ((train_path, [objects[i] for i in train_rows]), (val_path, val_objects)):
        atomic_write_text(path, "".join(json.dumps(_rebase(obj, manifest.parent, out_dir, V25_PATH_FIELDS if v25 else PAIR_PATH_FIELDS),
                                                   ensure_ascii=False) + "\n" for obj in rows))
    val_speakers = {obj.get("speaker") for obj in val_objects if obj.get("speaker") is not None}
    return SplitResult(train_path=train_path, val_path=val_path, train_count=len(train_rows),
                       val_count=len(val_objects), groups=plan.groups, held_out=plan.held_out,
                       val_speakers=len(val_speakers), notes=notes)


def _read(manifest: Path) -> tuple[list[SplitItem], list[dict]]:
    """Every entry (validated by the manifest parser) and its JSON object; SplitError on the first bad line."""
    items: list[SplitItem] = []
    objects: list[dict] = []
    try:
        with open(manifest, encoding="utf-8") as handle:
            for lineno, raw in enumerate(handle, 1):
                entry = parse_manifest_line(raw, manifest, lineno)
                if entry is None:
                    continue
                items.append(SplitItem(entry.id, entry.text, entry.speaker, os.path.normpath(entry.codes),
                                       entry.language))
                objects.append(json.loads(raw))
    except FileNotFoundError:
        raise SplitError(f"{manifest}: manifest not found") from None
    except UnicodeDecodeError:
        raise SplitError(f"{manifest}: not valid UTF-8") from None
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if not items:
        raise SplitError(f"{manifest}: manifest has no entries")
    return items, objects


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.split",
                                description="Split a codes, IndexTTS2 or IndexTTS-2.5 paired manifest into train.jsonl / val.jsonl (speaker-aware, leak-free).")
    parser.add_argument("--manifest", required=True, type=Path, help="codes manifest to split")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for train.jsonl and val.jsonl")
    parser.add_argument("--val-fraction", type=float, default=0.05, help="share of utterances for val (0.05)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same split)")
    parser.add_argument("--held-out-speakers", type=int, default=0, metavar="N",
                        help="also move every utterance of N whole speakers to val")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run() -> int:
        result = split_manifest(args.manifest, args.out_dir, args.val_fraction, args.seed, args.held_out_speakers)
        print(result.summary())
        return 0

    return run_refusing(run, (SplitError,), writing=args.out_dir)


if __name__ == "__main__":
    raise SystemExit(main())
