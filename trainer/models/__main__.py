"""``python -m trainer.models``: list, download, verify and publish models on the Hugging Face Hub.

    python -m trainer.models list [--workspace DIR] [--hub] [--json]
    python -m trainer.models download indextts-2 [--workspace DIR | --dir DIR] [--token T] [--offline] [--json OUT]
    python -m trainer.models verify DIR
    python -m trainer.models publish EXPORT_DIR --repo owner/name [--public] [--token T] [--message M] [--json OUT]

Downloads land in ``<workspace>/models/<folder>`` (``IndexTTS-2``, ``IndexTTS-2.5``, ``IndexTTS-1.5``,
``speech/<owner>--<name>``) unless ``--dir`` says otherwise. The endpoint is ``HF_ENDPOINT``, the token
``--token`` or ``HF_TOKEN``; ``HF_HUB_OFFLINE=1`` (or ``--offline``) asks nothing of the network. Every Hub
request waits at most ``HF_HUB_DOWNLOAD_TIMEOUT`` seconds (default 10) to connect and for each read.
Exit codes: 0 done; 1 a download was cut off (rerun to continue) or a file failed its checksum twice, or
``verify`` found problems; 2 refused (bad arguments, unknown set, Hub unreachable, silent past the timeout or
refusing, offline with a file missing or damaged), with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text
from trainer.models.catalog import ModelSet, UnknownSet, all_sets, model_set
from trainer.models.fetch import DigestMismatch, DownloadInterrupted, fetch_set
from trainer.models.hub import HubProblem, HubUnreachable, offline_mode, resolve_source
from trainer.models.integrity import verify_folder
from trainer.models.publish import PublishProblem, publish_export
from trainer.models.record import MODELS_DIR

DEFAULT_WORKSPACE = Path("workspace")


def set_folder(workspace: Path, entry: ModelSet) -> Path:
    return Path(workspace) / MODELS_DIR / entry.folder


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown (--hub asks)"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def catalogue_rows(workspace: Path, sets: tuple[ModelSet, ...] | None = None, hub: bool = False,
                   token: str | None = None) -> list[dict[str, Any]]:
    """One row per source of each set (None: the whole catalogue): repository, files, size, licence, and what the
    workspace holds.

    ``hub``: ask the Hub for real sizes and licence tags (else the catalogue's rough sizes)."""
    rows = []
    unreachable: str | None = None  # once the Hub did not answer, the other rows are not asked (each would wait)
    for entry in all_sets() if sets is None else sets:
        folder = set_folder(workspace, entry)
        for source in entry.sources:
            files = [source.local_path(name) for name in source.files]
            if source.weights:
                files.append(" | ".join(source.local_path(name) for name in source.weights))
            present = [name for name in source.files if (folder / source.local_path(name)).is_file()]
            if any((folder / source.local_path(name)).is_file() for name in source.weights):
                present.append("weights")
            row = {"set": entry.name, "title": entry.title, "kind": entry.kind, "repo_id": source.repo_id,
                   "files": files, "size": source.about_bytes, "size_from": "about", "licence": source.licence,
                   "licence_verified": source.licence_verified, "folder": str(folder),
                   "present": len(present), "needed": len(files), "note": ""}
            if hub and unreachable is not None:
                row["note"] = f"not asked: {unreachable}"
            elif hub:
                try:
                    remote = resolve_source(source, token)
                    row.update(size=sum(f.size for f in remote.files), size_from="hub", licence=remote.licence,
                               revision=remote.revision)
                except HubUnreachable as exc:
                    row["note"] = unreachable = str(exc)
                except HubProblem as exc:
                    row["note"] = str(exc)
            rows.append(row)
    return rows


def cmd_list(args: argparse.Namespace) -> int:
    sets = tuple(model_set(name) for name in args.set) if args.set else all_sets()
    rows = catalogue_rows(args.workspace, sets, hub=args.hub and not offline_mode(), token=args.token)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    current = None
    for row in rows:
        if row["set"] != current:
            current = row["set"]
            print(f"\n{row['title']} ({row['set']}) -> {row['folder']}")
        size = ("about " if row["size_from"] == "about" and row["size"] else "") + human_size(row["size"])
        print(f"  {row['repo_id']}: {', '.join(row['files'])}\n    {size}; licence: {row['licence']}"
              f"{'' if row['licence_verified'] else ' (unverified)'}; present {row['present']}/{row['needed']}")
        if row["note"]:
            print(f"    {row['note']}")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    sets = [model_set(name) for name in args.set]
    if args.dir is not None and len(sets) > 1:
        raise UsageProblem("--dir takes one set; give several sets with --workspace")
    reports = []
    for entry in sets:
        folder = args.dir if args.dir is not None else set_folder(args.workspace, entry)
        report = fetch_set(entry, folder, token=args.token, offline=args.offline, progress=not args.no_progress)
        reports.append(report.as_json())
        done = sum(1 for row in report.files if row["action"] == "downloaded")
        print(f"{entry.title}: {folder} ready ({len(report.files)} files, {done} downloaded"
              f"{', offline check only' if report.offline else ''})", flush=True)
    if args.json:
        atomic_write_text(args.json, json.dumps({"downloads": reports}, indent=2) + "\n")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    problems = verify_folder(args.folder)
    for line in problems:
        print(line)
    if not problems:
        print(f"{args.folder}: every recorded file matches its digest")
    return 1 if problems else 0


def cmd_publish(args: argparse.Namespace) -> int:
    report = publish_export(args.export_dir, args.repo, private=not args.public, token=args.token,
                            message=args.message)
    print(f"uploaded {len(report.files)} files to {report.url} ({'private' if report.private else 'public'})")
    if report.note:
        print(f"note: {report.note}")
    if args.json:
        atomic_write_text(args.json, json.dumps(report.as_json(), indent=2) + "\n")
    return 0


class UsageProblem(ValueError):
    pass


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m trainer.models", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    names = ", ".join(entry.name for entry in all_sets())

    listing = sub.add_parser("list", help="what each generation and speech model needs, and what is present")
    listing.add_argument("set", nargs="*", help=f"sets to list (default all): {names}")
    listing.add_argument("--workspace", type=Path, default=DEFAULT_WORKSPACE)
    listing.add_argument("--hub", action="store_true", help="ask the Hub for real sizes and licence tags")
    listing.add_argument("--token", default=None)
    listing.add_argument("--json", action="store_true", help="print the rows as JSON")
    listing.set_defaults(run=cmd_list)

    download = sub.add_parser("download", help="fetch sets into upstream's folder layout (resumable, verified)")
    download.add_argument("set", nargs="+", help=names)
    download.add_argument("--workspace", type=Path, default=DEFAULT_WORKSPACE,
                          help="downloads go to <workspace>/models/<folder> (default ./workspace)")
    download.add_argument("--dir", type=Path, default=None, help="the folder for one set instead")
    download.add_argument("--token", default=None, help="Hub token for gated models (default: HF_TOKEN / login)")
    download.add_argument("--offline", action="store_true", help="check the folder only (as HF_HUB_OFFLINE=1)")
    download.add_argument("--no-progress", action="store_true", help="no progress bar")
    download.add_argument("--json", type=Path, default=None, help="write a JSON report here")
    download.set_defaults(run=cmd_download)

    verify = sub.add_parser("verify", help="hash every recorded file of a model folder again")
    verify.add_argument("folder", type=Path)
    verify.set_defaults(run=cmd_verify)

    publish = sub.add_parser("publish", help="upload an export to a Hub model repository (private by default)")
    publish.add_argument("export_dir", type=Path)
    publish.add_argument("--repo", required=True, help="owner/name")
    publish.add_argument("--public", action="store_true", help="create the repository public (default private)")
    publish.add_argument("--token", default=None)
    publish.add_argument("--message", default=None, help="commit message")
    publish.add_argument("--json", type=Path, default=None, help="write a JSON report here")
    publish.set_defaults(run=cmd_publish)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (DigestMismatch, DownloadInterrupted) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (UnknownSet, UsageProblem, PublishProblem, HubProblem) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; partial files are kept and the next run continues them", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
