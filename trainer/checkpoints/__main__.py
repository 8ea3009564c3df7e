"""``python -m trainer.checkpoints verify|inspect|list|repair|export|export-s2mel``: the checkpoint toolkit.

Exit codes: verify 0 COMPLETE / 1 PARTIAL / 2 INVALID or incompatible; the other verbs 0 done, 2 refused
(one line ``error: ...`` on stderr). The UI calls the same library functions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from data_tools.cli import OneLineErrorParser

EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m trainer.checkpoints", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=OneLineErrorParser)

    verify = verbs.add_parser("verify", help="check every component; COMPLETE / PARTIAL / INVALID (exit 0/1/2)")
    verify.add_argument("path", type=Path)
    verify.add_argument("-v", "--verbose", action="store_true", help="details of the sound components too")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--tokenizer", type=Path, help="also check it fits this tokenizer")
    verify.add_argument("--config", type=Path, help="also check it fits this config.yaml")

    inspect = verbs.add_parser("inspect", help="step, epoch, losses, hyper-parameters, sizes, versions")
    inspect.add_argument("path", type=Path)
    inspect.add_argument("--json", action="store_true")

    listing = verbs.add_parser("list", help="every checkpoint of an output directory, newest first")
    listing.add_argument("dir", type=Path)
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--no-verify", action="store_true", help="do not load the files (faster, no verdicts)")

    repair = verbs.add_parser("repair", help="upgrade an older/community checkpoint into a NEW file")
    repair.add_argument("path", type=Path)
    repair.add_argument("--out", type=Path, required=True, help="new file to write (never the input)")
    repair.add_argument("--config", type=Path, help="config.yaml the run started from (needed for community files)")
    repair.add_argument("--tokenizer", type=Path, help="the tokenizer the run used (records its sha256)")
    repair.add_argument("--base-vocab-size", type=int, help="text vocabulary of the base model (frozen rows)")
    repair.add_argument("--json", action="store_true")

    export = verbs.add_parser("export", help="inference folder: gpt.pth, config.yaml, tokenizer, LICENSE-NOTICE, "
                              "MODEL_CARD.md and the base model folder's other files")
    export.add_argument("path", type=Path)
    export.add_argument("--out", type=Path, required=True, help="output folder")
    export.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default="fp32")
    export.add_argument("--safetensors", action="store_true", help="also write gpt.safetensors")
    export.add_argument("--config", type=Path, help="base config.yaml for the non-gpt sections")
    export.add_argument("--tokenizer", type=Path, help="tokenizer model (default: the one the checkpoint records)")
    export.add_argument("--force", action="store_true", help="replace an earlier export in --out")
    export.add_argument("--adapter-only", action="store_true", help="a LoRA checkpoint: write its adapters alone "
                        "(OUT/adapter.pth) instead of the bundle with them merged")
    export.add_argument("--base", type=Path, help="base gpt.pth to measure the fine-tune against (default: the "
                        "--base-checkpoint the run recorded); weights bitwise equal to it are refused")
    export.add_argument("--base-files", choices=("copy", "link"), default="copy",
                        help="how the base model folder's other files (S2Mel, BigVGAN, codecs, ...) go into the "
                        "export: copy (default: the folder works when moved) or link (symbolic links)")
    export.add_argument("--model-dir", type=Path, help="the base model folder those files come from (default: the "
                        "folder of --config, else the one the run recorded)")
    s2mel = verbs.add_parser("export-s2mel", help="an S2Mel run checkpoint -> a stock s2mel.pth (adapters merged) or "
                             "the adapter alone")
    s2mel.add_argument("path", type=Path)
    s2mel.add_argument("--out", type=Path, required=True, help="output folder (s2mel.pth or s2mel_adapter.pth)")
    s2mel.add_argument("--model-dir", type=Path, required=True, help="the IndexTTS2 / 2.5 download folder the run "
                       "trained from (its s2mel.pth and config.yaml)")
    s2mel.add_argument("--adapter-only", action="store_true", help="a LoRA run: write its adapter alone")
    s2mel.add_argument("--scores", type=Path, help="held-out voices scored GPT-only and GPT + S2Mel (JSON): export "
                       "only when the S2Mel helps")
    s2mel.add_argument("--keep", choices=("auto", "keep", "drop"), default="auto", help="override the scores' "
                       "decision (default auto)")
    s2mel.add_argument("--force", action="store_true", help="replace an earlier export in --out")
    s2mel.add_argument("--strength", type=float, metavar="S", help="adapter strength 0..1 to write the decoder at "
                       "(0: the base s2mel.pth, 1: all of the run; default: the strength the scores' gate chose, "
                       "else 1)")
    return parser


def _export_s2mel(args: argparse.Namespace) -> int:
    from trainer.s2mel.export_cli import S2MelExportRefused, export_s2mel

    try:
        report = export_s2mel(args.path, args.out, args.model_dir, adapter_only=args.adapter_only,
                              scores=args.scores, keep=args.keep, force=args.force, strength=args.strength)
    except S2MelExportRefused as exc:
        raise _Refusal(str(exc)) from None
    print("\n".join(report.lines()))
    return EXIT_OK


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2, default=str, ensure_ascii=False))


def _verify(args: argparse.Namespace) -> int:
    from trainer.checkpoints.verify import verify_checkpoint

    report = verify_checkpoint(args.path, tokenizer=args.tokenizer, config=args.config)
    if args.json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines(verbose=args.verbose)))
    return report.exit_code


def _inspect(args: argparse.Namespace) -> int:
    from trainer.checkpoints.inspect import inspect_checkpoint, inspect_lines

    info = inspect_checkpoint(args.path)
    if args.json:
        _print_json(info)
    else:
        print("\n".join(inspect_lines(info)))
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from trainer.checkpoints.listing import list_checkpoints, listing_lines

    if not args.dir.is_dir():
        raise _Refusal(f"not a directory: {args.dir}")
    summaries = list_checkpoints(args.dir, verify=not args.no_verify)
    if args.json:
        _print_json([s.to_dict() for s in summaries])
    elif not summaries:
        print(f"no checkpoints in {args.dir}")
    else:
        print("\n".join(listing_lines(summaries)))
    return EXIT_OK


def _repair(args: argparse.Namespace) -> int:
    from trainer.checkpoints.repair import repair_checkpoint

    report = repair_checkpoint(args.path, args.out, tokenizer=args.tokenizer, config=args.config,
                               base_vocab_size=args.base_vocab_size)
    if args.json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trainer.checkpoints.export import export_checkpoint

    with tqdm(total=1, desc="export", file=sys.stderr, disable=None) as bar:
        report = export_checkpoint(args.path, args.out, args.dtype, args.safetensors, config=args.config,
                                   tokenizer=args.tokenizer, force=args.force, base=args.base,
                                   adapter_only=args.adapter_only, base_files=args.base_files,
                                   model_dir=args.model_dir)
        bar.update(1)
    print("\n".join(report.lines()))
    return EXIT_OK


class _Refusal(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from data_tools.config import ConfigError
    from data_tools.text_tokenizer import TokenizerError
    from trainer.checkpoints.format import CheckpointError

    handlers = {"verify": _verify, "inspect": _inspect, "list": _list, "repair": _repair, "export": _export,
                "export-s2mel": _export_s2mel}
    try:
        return handlers[args.verb](args)
    except (CheckpointError, ConfigError, TokenizerError, _Refusal) as exc:
        sys.stdout.flush()
        sys.stderr.write("error: " + " ".join(str(exc).split()) + "\n")
        return EXIT_REFUSED
    except OSError as exc:
        sys.stdout.flush()
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        sys.stderr.write(f"error: {exc.strerror or exc}{where}\n")
        return EXIT_REFUSED


if __name__ == "__main__":
    raise SystemExit(main())
