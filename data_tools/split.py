"""Split a codes manifest into train and val: deterministic, speaker-aware, never leaking.

Library: ``split_manifest(manifest, out_dir, val_fraction, seed, held_out_speakers) -> SplitResult``
(``data_tools.split_plan.plan_split`` does the choosing on parsed entries;
``data_tools.split_pairs`` chooses a paired manifest's). CLI::

    python -m data_tools.split --manifest M --out-dir D [--val-fraction 0.05] [--seed 0] [--held-out-speakers N]
        [--by-speaker] [--test-fraction 0.05]

writes ``D/train.jsonl`` and ``D/val.jsonl`` atomically (relative paths rewritten against ``D``; every
other field kept as it was). The manifest is a codes manifest, a paired manifest, or an audio list as raw
ingest saves it (``{"id", "audio", "text", "speaker", "source", ...}`` per line).

- Never leaking: entries that share an id, a text ("same text" as the data checker defines it,
  before and after the text front-end), a codes file or a source recording (``source``: ingest records the
  recording each clip was cut from) form one group, and a group goes to one side: the room, the microphone
  and the words of one recording never reach both sides. ``--by-speaker`` also keeps every clip of one
  speaker on one side (val then holds voices train never heard).
- A frozen test set: ``--test-fraction F`` first sets whole groups aside in ``D/test.jsonl`` (before any
  training; never used for best-by; measured on request and at export) and records its SHA-256 in
  ``D/test.digest.json``. A later split into the same folder keeps that test set: a test.jsonl changed on
  disk is refused by its digest, its entries are left out of train and val, and a manifest entry that
  shares a recording (or text, or id) with the test set is refused in one line (it would leak).
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
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from data_tools.cli import OneLineErrorParser, run_refusing
from data_tools.fileio import atomic_write_text
from data_tools.manifest import ManifestError, line_parser, load_json_object, manifest_format
from data_tools.split_pairs import split_pairs
from data_tools.split_plan import SplitError, SplitItem, leak_keys, plan_split, recording_source
from data_tools.text_keys import text_key
from generations.format_facts import ManifestFormat
from generations.registry import default_format, format_of

TEST_FILE = "test.jsonl"
TEST_DIGEST_FILE = "test.digest.json"


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
    test_path: Path | None = None
    test_count: int = 0
    test_digest: str | None = None
    test_frozen_before: bool = False  # the test set was there already (kept, not chosen now)

    def summary(self) -> str:
        lines = [f"train: {self.train_count} entries -> {self.train_path}",
                 f"val: {self.val_count} entries from {self.val_speakers} speaker(s) -> {self.val_path}"]
        if self.test_path is not None:
            how = "kept as frozen" if self.test_frozen_before else "set aside and frozen"
            lines.append(f"test: {self.test_count} entries -> {self.test_path} ({how}; sha256 "
                         f"{(self.test_digest or '')[:16]}…)")
        if self.held_out:
            lines.append(f"held-out speakers (val only): {', '.join(self.held_out)}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _rebase(obj: dict, manifest_dir: Path, out_dir: Path, fields: tuple[str, ...]) -> dict:
    """Relative paths in ``obj`` rewritten so they still point at the same files from ``out_dir``."""
    out = dict(obj)
    for key in fields:
        value = obj.get(key)
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = Path(os.path.relpath(manifest_dir / value, out_dir)).as_posix()
    return out


def split_manifest(manifest: str | Path, out_dir: str | Path, val_fraction: float = 0.05, seed: int = 0,
                   held_out_speakers: int = 0, by_speaker: bool = False, test_fraction: float = 0.0) -> SplitResult:
    """Split ``manifest`` into ``out_dir``/train.jsonl and val.jsonl, keeping or first setting aside the frozen
    test.jsonl (raises SplitError on bad input or a leak)."""
    manifest = Path(manifest).absolute()
    out_dir = Path(out_dir).absolute()
    train_path, val_path, test_path = out_dir / "train.jsonl", out_dir / "val.jsonl", out_dir / TEST_FILE
    if manifest in (train_path, val_path, test_path):
        raise SplitError(f"--out-dir {out_dir} would overwrite the input manifest {manifest}")
    if not 0.0 <= test_fraction < 1.0:
        raise SplitError(f"--test-fraction must be in [0, 1), got {test_fraction}")
    try:
        fmt = format_of(manifest_format(manifest))
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if fmt.pairs:
        if test_fraction or frozen_test_exists(out_dir):
            raise SplitError("a frozen test set is set aside from a codes manifest or an audio list (as ingest "
                             "saves it), not from a paired manifest: split those first")
        return _split_pairs(manifest, out_dir, train_path, val_path, val_fraction, seed, held_out_speakers,
                            fmt, by_speaker=by_speaker)
    items, objects = _read(manifest, fmt)
    notes = []
    test_digest, test_count, frozen_before = None, 0, frozen_test_exists(out_dir)
    if frozen_before:
        test_digest = verify_test_set(test_path)
        test_items, _ = _read(test_path, fmt)
        keep = _outside_test(items, test_items, manifest, test_path, by_speaker)
        test_count = len(test_items)
        if test_fraction:
            notes.append(f"the frozen test set {test_path} is kept as it is (--test-fraction chose it before)")
    elif test_fraction > 0:
        chosen = plan_split(items, test_fraction, seed + 1, 0, by_speaker)
        if not chosen.val:
            raise SplitError(f"--test-fraction {test_fraction}: no group of entries could be set aside (every one is "
                             "needed in train to keep its speaker seen)")
        rows = [_rebase(objects[i], manifest.parent, out_dir, fmt.path_fields) for i in chosen.val]
        test_digest = _freeze_test(test_path, rows, manifest, seed)
        test_count, keep = len(chosen.val), chosen.train
    else:
        keep = list(range(len(items)))
    items, objects = [items[i] for i in keep], [objects[i] for i in keep]
    if not items:
        raise SplitError(f"{manifest}: no entries are left for train and val beside the frozen test set")
    plan = plan_split(items, val_fraction, seed, held_out_speakers, by_speaker)
    duplicate_ids = len(items) - len({item.id for item in items})
    if duplicate_ids:
        notes.append(f"{duplicate_ids} duplicate id(s) kept on one side; the data checker reports them")
    if val_fraction > 0 and not plan.val:
        notes.append("val is empty: every group is needed in train to keep its speaker seen")
    for path, indices in ((train_path, plan.train), (val_path, plan.val)):
        text = "".join(json.dumps(_rebase(objects[i], manifest.parent, out_dir, fmt.path_fields),
                                  ensure_ascii=False) + "\n" for i in indices)
        atomic_write_text(path, text)
    val_speakers = {items[i].speaker for i in plan.val if items[i].speaker is not None}
    return SplitResult(train_path=train_path, val_path=val_path, train_count=len(plan.train),
                       val_count=len(plan.val), groups=plan.groups, held_out=plan.held_out,
                       val_speakers=len(val_speakers), notes=notes,
                       test_path=test_path if test_digest else None, test_count=test_count, test_digest=test_digest,
                       test_frozen_before=frozen_before)


# ----- the frozen test set ------------------------------------------------------------------------------


def frozen_test_exists(out_dir: Path) -> bool:
    return (Path(out_dir) / TEST_FILE).exists() or (Path(out_dir) / TEST_DIGEST_FILE).exists()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _freeze_test(test_path: Path, rows: list[dict], manifest: Path, seed: int) -> str:
    atomic_write_text(test_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    digest = _sha256(test_path)
    record = {"format": 1, "file": TEST_FILE, "sha256": digest, "entries": len(rows), "from": str(manifest),
              "seed": seed, "sources": sorted({str(r["source"]) for r in rows if r.get("source")})}
    atomic_write_text(test_path.with_name(TEST_DIGEST_FILE), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return digest


def verify_test_set(test_path: str | Path) -> str:
    """The frozen test set's SHA-256 after checking it against the digest recorded when it was set aside;
    SplitError (one line) when it was changed on disk or its digest is missing."""
    test_path = Path(test_path)
    digest_path = test_path.with_name(TEST_DIGEST_FILE)
    try:
        recorded = json.loads(digest_path.read_text(encoding="utf-8")).get("sha256")
    except FileNotFoundError:
        raise SplitError(f"{test_path}: no {TEST_DIGEST_FILE} beside it, so it is not a frozen test set (make one "
                         "with --test-fraction)") from None
    except (OSError, ValueError, AttributeError) as exc:
        raise SplitError(f"{digest_path}: unreadable ({' '.join(str(exc).split())})") from None
    try:
        actual = _sha256(test_path)
    except FileNotFoundError:
        raise SplitError(f"{test_path}: the frozen test set is missing (its digest {digest_path} is there)") from None
    if actual != recorded:
        raise SplitError(f"{test_path} changed on disk since it was frozen (sha256 {actual[:12]}…, recorded "
                         f"{str(recorded)[:12]}…): restore it, or move {TEST_FILE} and {TEST_DIGEST_FILE} away to "
                         "freeze a new one (scores on the old one then no longer compare)")
    return actual


def _outside_test(items: list[SplitItem], test_items: list[SplitItem], manifest: Path, test_path: Path,
                  by_speaker: bool) -> list[int]:
    """Indices of the manifest entries that are not in the frozen test set; SplitError for one that shares a
    recording, a text or a codes file with it (it would leak)."""
    test_ids = {(t.id, text_key(t.text)) for t in test_items}
    owner: dict[tuple[str, str], str] = {}
    for t in test_items:
        for key in leak_keys(t, by_speaker):
            owner.setdefault(key, t.id)
    keep = []
    for i, item in enumerate(items):
        if (item.id, text_key(item.text)) in test_ids:
            continue
        shared = sorted(k for k in leak_keys(item, by_speaker) if k in owner)
        if shared:
            kind, value = shared[0]
            raise SplitError(f"{manifest}: entry {item.id} shares its {kind} {value!r} with {owner[shared[0]]} of the "
                             f"frozen test set {test_path}: it would leak into training (leave it out of the manifest)")
        keep.append(i)
    return keep


def _split_pairs(manifest: Path, out_dir: Path, train_path: Path, val_path: Path, val_fraction: float, seed: int,
                 held_out_speakers: int, fmt: ManifestFormat, by_speaker: bool = False) -> SplitResult:
    split = split_pairs(manifest, val_fraction, seed, held_out_speakers, fmt, by_speaker)
    fields = fmt.path_fields
    for path, rows in ((train_path, split.train_rows), (val_path, split.val_rows)):
        atomic_write_text(path, "".join(json.dumps(_rebase(obj, manifest.parent, out_dir, fields), ensure_ascii=False)
                                        + "\n" for obj in rows))
    return SplitResult(train_path=train_path, val_path=val_path, train_count=len(split.train_rows),
                       val_count=len(split.val_rows), groups=split.plan.groups, held_out=split.plan.held_out,
                       val_speakers=split.val_speakers, notes=split.notes)


def _read(manifest: Path, fmt: ManifestFormat | None = None) -> tuple[list[SplitItem], list[dict]]:
    """Every entry (a codes manifest's validated by its format's parser; an audio list's by ``_audio_item``) and
    its JSON object; SplitError on the first bad line."""
    fmt = fmt or default_format()
    parse = line_parser(fmt)
    items: list[SplitItem] = []
    objects: list[dict] = []
    try:
        with open(manifest, encoding="utf-8") as handle:
            for lineno, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                obj = load_json_object(raw, manifest, lineno)
                if "audio" in obj and not fmt.recognises(obj):
                    items.append(_audio_item(obj, manifest, lineno))
                else:
                    entry = parse(raw, manifest, lineno)
                    if entry is None:
                        continue
                    items.append(SplitItem(entry.id, entry.text, entry.speaker, os.path.normpath(entry.codes),
                                           entry.language, recording_source(obj)))
                objects.append(obj)
    except FileNotFoundError:
        raise SplitError(f"{manifest}: manifest not found") from None
    except UnicodeDecodeError:
        raise SplitError(f"{manifest}: not valid UTF-8") from None
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if not items:
        raise SplitError(f"{manifest}: manifest has no entries")
    return items, objects


def _audio_item(obj: dict, manifest: Path, lineno: int) -> SplitItem:
    """A line of an audio list (raw ingest's manifest: id, audio, text, speaker, source)."""
    for key in ("audio", "text"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            raise SplitError(f"{manifest}:{lineno}: an audio list line needs a non-empty {key!r}")
    audio = os.path.normpath(manifest.parent / os.path.expanduser(obj["audio"]))
    speaker = obj.get("speaker")
    language = obj.get("language")
    return SplitItem(str(obj.get("id") or Path(obj["audio"]).stem), obj["text"],
                     str(speaker) if speaker is not None else None, audio,
                     language if isinstance(language, str) else None, recording_source(obj))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.split",
                                description="Split a codes manifest, an audio list (raw ingest's) or an IndexTTS2 / IndexTTS-2.5 paired "
                                            "manifest into train.jsonl / val.jsonl (speaker-aware, leak-free by text "
                                            "and source recording), with an optional frozen test.jsonl.")
    parser.add_argument("--manifest", required=True, type=Path, help="codes manifest to split")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for train.jsonl and val.jsonl")
    parser.add_argument("--val-fraction", type=float, default=0.05, help="share of utterances for val (0.05)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same split)")
    parser.add_argument("--held-out-speakers", type=int, default=0, metavar="N",
                        help="also move every utterance of N whole speakers to val")
    parser.add_argument("--by-speaker", action="store_true",
                        help="keep every clip of one speaker on one side (val: voices train never heard)")
    parser.add_argument("--test-fraction", type=float, default=0.0, metavar="F",
                        help="first set aside this share as the frozen test set D/test.jsonl (kept by later splits "
                             "into D; 0: none)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run() -> int:
        result = split_manifest(args.manifest, args.out_dir, args.val_fraction, args.seed, args.held_out_speakers,
                                args.by_speaker, args.test_fraction)
        print(result.summary())
        return 0

    return run_refusing(run, (SplitError,), writing=args.out_dir)


if __name__ == "__main__":
    raise SystemExit(main())
