"""Pack a prepared folder's feature files into WebDataset tar shards (large data sets: fewer, larger files).

    python -m data_tools.shards pack --prepared D [--items N | --shard-size 1GB] [--keep-files]
    python -m data_tools.shards verify --prepared D

Why WebDataset: its shards are plain POSIX tars (readable by ``tar``, Python's ``tarfile`` and every object
store), written with the ``webdataset`` library (``ShardWriter``) and readable by its own streaming loader. Each
item's ``.npy`` files sit together under the item's key (``<id>.codes.npy``, ``<id>.cond_mels.npy``). The trainer
does not stream them in tar order: ``shards/index.json`` (``data_tools.shard_index``) lets it read any member
by offset, so the exact sampler keeps ordering the epoch (``data_tools.shard_reader``).

Only ``.npy`` files under the folder's subfolders are packed (audio prompts stay files); manifests are left as
they are. After the index is written the packed files are removed (unless ``--keep-files``); a pack interrupted
before that is redone by running it again, one interrupted after it finishes the removal.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path

from data_tools.cli import OneLineErrorParser, run_refusing
from data_tools.fileio import UnusableFile
from data_tools.npy import read_file_header
from data_tools.shard_index import (
    SHARDS_DIR,
    ArrayHead,
    ShardError,
    ShardIndex,
    index_path,
    read_index,
    scan_shard,
    write_index,
)

DEFAULT_SHARD_BYTES = 1 << 30
SHARD_PATTERN = "shard-%06d.tar"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"1GB"``, ``"500MB"``, ``"64KB"`` or a byte count -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GB, 500MB)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match[2].upper()]
    return max(1, int(float(match[1]) * scale))


def feature_files(prepared: Path) -> list[tuple[str, str, Path]]:
    """``(key, field, file)`` of every ``.npy`` under ``prepared``'s subfolders but ``shards/``, ordered by key
    so an item's files are adjacent (one WebDataset sample): key = file stem, field = its folder."""
    found = []
    for folder in sorted(p for p in prepared.iterdir() if p.is_dir() and p.name != SHARDS_DIR):
        for path in folder.rglob("*.npy"):
            if path.is_file() and not path.is_symlink():
                field = path.parent.relative_to(prepared).as_posix().replace("/", "_").replace(".", "_")
                found.append((path.stem, field, path))
    return sorted(found, key=lambda row: (row[0], row[1]))


def member_name(key: str, field: str) -> str:
    return f"{key}.{field}.npy"


def pack(prepared: Path, *, items: int | None = None, shard_bytes: int = DEFAULT_SHARD_BYTES,
         keep_files: bool = False) -> ShardIndex:
    """Write ``prepared/shards/shard-*.tar`` and its index; remove the packed files unless ``keep_files``."""
    import webdataset

    prepared = Path(prepared).resolve()
    if not prepared.is_dir():
        raise ShardError(f"{prepared}: not a folder")
    if index_path(prepared).exists():
        index = read_index(index_path(prepared))
        return index if keep_files else _remove_packed(index)
    files = feature_files(prepared)
    if not files:
        raise ShardError(f"{prepared}: no .npy feature files to pack")
    out = prepared / SHARDS_DIR
    out.mkdir(exist_ok=True)
    for stale in out.glob("shard-*.tar"):  # an earlier pack cut short before its index
        stale.unlink()
    names = {member_name(key, field): path.relative_to(prepared).as_posix() for key, field, path in files}
    # ShardWriter cuts a shard at whichever of maxcount samples / maxsize bytes comes first; one item in memory.
    with webdataset.ShardWriter(str(out / SHARD_PATTERN), maxcount=items or 10**12, maxsize=shard_bytes,
                                verbose=0) as writer:
        for key, rows in itertools.groupby(files, key=lambda row: row[0]):
            writer.write({"__key__": key, **{f"{field}.npy": path.read_bytes() for _key, field, path in rows}})
    shards = sorted(out.glob("shard-*.tar"))
    index = write_index(prepared, shards, names, {path.relative_to(prepared).as_posix(): head
                                                   for _key, _field, path in files if (head := _array_head(path))})
    return index if keep_files else _remove_packed(index)


def _array_head(path: Path) -> ArrayHead | None:
    """The array header the index keeps for ``path`` (None for a file that is not a usable array: it is packed
    as it is, and reading it names the shard and member)."""
    try:
        header = read_file_header(path)
    except UnusableFile:
        return None
    return ArrayHead(header.dtype.str, header.shape, header.fortran_order, header.data_offset)


def _remove_packed(index: ShardIndex) -> ShardIndex:
    for rel, member in index.members.items():
        path = index.folder / rel
        if path.is_file() and not path.is_symlink() and path.stat().st_size == member.size:
            path.unlink()
    return index


def verify(prepared: Path) -> ShardIndex:
    """Every shard read through its tar headers and matched with the index; ShardError names the first bad one."""
    index = read_index(index_path(Path(prepared).resolve()))
    for number, name in enumerate(index.shards):
        shard = index.shard_path(number)
        if not shard.is_file():
            raise ShardError(f"shard {name} is missing from {shard.parent}")
        mine = {rel: (m.offset, m.size) for rel, m in index.members.items() if m.shard == number}
        found = scan_shard(shard, {_member_of(rel): rel for rel in mine})
        for rel, place in mine.items():
            if found.get(rel) != place:
                raise ShardError(f"shard {name} is damaged: member {rel} is not where the index says")
    return index


def _member_of(rel: str) -> str:
    folder, _, file = rel.rpartition("/")
    return member_name(Path(file).stem, folder.replace("/", "_").replace(".", "_"))


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m data_tools.shards", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    packing = sub.add_parser("pack", help="pack a prepared folder's .npy files into tar shards")
    packing.add_argument("--prepared", required=True, type=Path, help="the prepared folder (manifests + features)")
    limit = packing.add_mutually_exclusive_group()
    limit.add_argument("--items", type=int, help="items per shard at most")
    limit.add_argument("--shard-size", type=parse_size, default=DEFAULT_SHARD_BYTES, help="bytes per shard (1GB)")
    packing.add_argument("--keep-files", action="store_true", help="keep the per-file copies")
    checking = sub.add_parser("verify", help="check every shard against the index")
    checking.add_argument("--prepared", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack" and args.items is not None and args.items < 1:
        parser.error("--items must be >= 1")

    def run() -> int:
        if args.command == "pack":
            index = pack(args.prepared, items=args.items, shard_bytes=args.shard_size, keep_files=args.keep_files)
        else:
            index = verify(args.prepared)
        print(f"{len(index.members)} files in {len(index.shards)} shards under {index.folder / SHARDS_DIR}")
        return 0

    return run_refusing(run, (ShardError,), writing=args.prepared)


if __name__ == "__main__":
    sys.exit(main())
