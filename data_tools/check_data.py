"""Check manifests before a long training run: structure, files, lengths, language, speakers,
durations, duplicates and train/val leakage. Every format the trainer reads, each line checked by its format's
checker (``ManifestFormat.check_chunk``: the codes manifest's ``data_tools.check_chunks``, the paired ones'
``generations/<gen>/data/check.py``); a manifest argument may end in ``::lang``.

Library: ``check_manifests(train, val, tokenizer, config, language, workers) -> DataReport`` (the web
UI calls it and shows the report's tables); ``write_code_len_fixes(report)`` writes corrected paired
manifests beside the originals (``data_tools.code_lengths``). CLI::

    python -m data_tools.check_data --manifest M [--manifest M2 ...] [--val-manifest V ...]
        [--tokenizer T] [--config C] [--language am] [--json report.json] [--workers N] [--no-file-checks]
        [--fix-code-len]

Exit codes: 0 clean; 1 problems found (errors or warnings; the verdict says which); 2 usage (bad flags,
a manifest, tokenizer or config that cannot be opened) with one ``error: ...`` line on stderr; 3 the
checker itself failed (a bug: ``error: ...`` and the traceback on stderr), never confused with a verdict.

Agreement with the trainer: lines are parsed by the same parsers, files read by the trainer's own code
(``data_tools.item_files``) and judged by the same rules (``data_tools.shape_rules``), so whatever the
trainer refuses is an error here, and data with no errors loads in the trainer.

Severity: an *error* means training would fail or learn garbage (unparseable lines, missing or broken
files, codes containing start/stop ids or out of range, text or codes longer than the model fits,
duplicate ids, the same utterance (id or codes) in train and val, an empty manifest). Everything else
is a *warning*: duplicate texts or codes inside a split, the same text in train and val, lines not in
the expected language, unknown tokens, very short clips, transcripts that do not fit their audio's
length, and speaker-diversity concerns.

Speed: manifests are cut into chunks of whole lines, checked in worker processes (one per core) and
merged in order (``data_tools.check_merge``); duplicate and leakage detection run on 64-bit hashes
with numpy. ``.npy`` conditioning mels are checked from their header; codes files are read (they are
small) to check their values.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from data_tools.check_chunks import LANGUAGE_SCRIPTS
from data_tools.check_merge import ProblemList, SplitAccumulator, speaker_warnings
from data_tools.check_pool import chunk_tasks, cpu_count, run_chunks
from data_tools.check_records import CheckSettings
from data_tools.check_report import DataReport
from data_tools.cli import OneLineErrorParser, progress_bar, run_refusing, usage_error
from data_tools.code_lengths import CodeLenFix, fix_manifest
from data_tools.fileio import UnusableFile, regular_file_size
from data_tools.manifest import ManifestError, manifest_format, parse_manifest_spec
from generations.format_facts import ManifestFormat
from generations.registry import GENERATIONS, format_of, generation_of_format

MAX_LISTED_PER_CODE = 1000
MIN_CHUNK_BYTES = 256 * 1024
MAX_CHUNK_BYTES = 4 * 1024 * 1024
EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE, EXIT_CHECKER_ERROR = 0, 1, 2, 3

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


class CheckUsageError(ValueError):
    """Inputs the checker cannot start on (missing manifest, unreadable tokenizer/config, bad option)."""


def check_manifests(
    train: Sequence[str | Path],
    val: Sequence[str | Path] = (),
    tokenizer: str | Path | None = None,
    config: str | Path | None = None,
    language: str | None = None,
    workers: int = 0,
    *,
    check_files: bool = True,
    chunk_bytes: int | None = None,
    progress: ProgressCallback | None = None,
    max_listed: int = MAX_LISTED_PER_CODE,
    text_scheme: str = "merges",
    text_merges: str | Path | None = None,
) -> DataReport:
    """Check train (and val) manifests; ``workers=0`` uses every core. Raises CheckUsageError on bad inputs."""
    started = time.perf_counter()
    train_specs = [parse_manifest_spec(p) for p in train]
    val_specs = [parse_manifest_spec(p) for p in val]
    train_paths = [spec.path for spec in train_specs]
    val_paths = [spec.path for spec in val_specs]
    if not train_paths:
        raise CheckUsageError("no train manifest given")
    sizes = []
    for path in (*train_paths, *val_paths):
        try:
            sizes.append(regular_file_size(path))
        except UnusableFile as exc:
            raise CheckUsageError(f"{path}: manifest not found" if exc.kind == "missing" else str(exc)) from None
    settings = _settings(tokenizer, config, language, check_files, text_scheme, text_merges)
    workers = workers or cpu_count()

    problems = ProblemList(max_listed)
    specs = [*train_specs, *val_specs]
    formats = _formats(specs, problems)
    _refuse_tokenizer_mismatch(tokenizer, specs, formats)
    step = chunk_bytes or max(MIN_CHUNK_BYTES, min(MAX_CHUNK_BYTES, sum(sizes) // max(1, 4 * workers) + 1))
    tasks = [task for index, spec in enumerate(specs) if formats[index] is not None
             for task in chunk_tasks(spec.path, index, step, formats[index], spec.language)]
    train_acc = SplitAccumulator("train", train_paths, 0, problems)
    val_acc = SplitAccumulator("val", val_paths, len(train_paths), problems)
    for index, fmt in enumerate(formats):
        if fmt is None:
            (train_acc if index < len(train_paths) else val_acc).refused(index)
    total_bytes = sum(sizes)
    done_bytes = 0
    for result in run_chunks(tasks, settings, workers):
        (train_acc if result.manifest_index < len(train_paths) else val_acc).add(result)
        done_bytes += result.bytes_read
        if progress is not None:
            progress(done_bytes, total_bytes)

    train_stats = train_acc.finish(settings)
    val_stats = val_acc.finish(settings) if val_paths else None
    leakage = val_acc.find_leakage(train_acc) if val_paths else {}
    speaker_warnings(train_stats, problems)
    fixes = train_acc.fixes + val_acc.fixes

    elapsed = time.perf_counter() - started
    lines = train_stats.lines + (val_stats.lines if val_stats else 0)
    errors = [p for p in problems.items if p.severity == "error"]
    warnings = [p for p in problems.items if p.severity == "warning"]
    verdict = "errors" if errors else "warnings" if warnings else "clean"
    return DataReport(
        verdict=verdict,
        errors=errors,
        warnings=warnings,
        problem_counts=dict(problems.counts),
        train=train_stats,
        val=val_stats,
        leakage=leakage,
        settings={
            "check_files": check_files,
            "language": language,
            "tokenizer": str(tokenizer) if tokenizer else None,
            "text_scheme": settings.text_scheme,
            "config": str(config) if config else None,
            "max_text_tokens": settings.max_text_tokens,
            "max_mel_tokens": settings.max_mel_tokens,
            "mel_code_limit": settings.mel_code_limit,
            "workers": min(workers, len(tasks)) if len(tasks) > 1 else 1,
        },
        elapsed_s=round(elapsed, 3),
        lines_per_s=round(lines / elapsed, 1) if elapsed > 0 else 0.0,
        formats={str(spec.path): fmt or "unknown" for spec, fmt in zip(specs, formats)},
        code_len_fixes=fixes,
    )


def _formats(specs: list, problems: ProblemList) -> list[str | None]:
    """Each manifest's format; a manifest of another format than the first is an error (the trainer refuses)."""
    formats: list[str | None] = []
    first: tuple[Path, str] | None = None
    for spec in specs:
        try:
            fmt = manifest_format(spec.path)
        except ManifestError as exc:
            problems.add("error", "not-a-training-manifest", f"{exc.path}:{exc.line}" if exc.line else str(exc.path),
                         exc.message)
            formats.append(None)
            continue
        if first is None:
            first = (spec.path, fmt)
        elif fmt != first[1]:
            problems.add("error", "mixed-formats", str(spec.path),
                         f"{spec.path} is {format_of(fmt).name} but {first[0]} is {format_of(first[1]).name}: one run "
                         "trains one format")
        formats.append(fmt)
    return formats


def _refuse_tokenizer_mismatch(tokenizer: str | Path | None, specs: list, formats: list[str | None]) -> None:
    """Each format is tokenised by its generation's kind of table (the entry's ``reads_tokenizer``: a SentencePiece
    model, IndexTTS-2.5's .tiktoken table, ...); another kind is a usage error."""
    if tokenizer is None:
        return
    for spec, fmt in zip(specs, formats):
        if fmt is None or generation_of_format(fmt).reads_tokenizer(str(tokenizer)):
            continue
        raise CheckUsageError(f"--tokenizer {tokenizer} cannot tokenise {spec.path}: it is {format_of(fmt).name}, "
                              f"which needs {format_of(fmt).checker.table}")


def _table_format(tokenizer: str | Path) -> ManifestFormat | None:
    """The format whose own kind of table (not a SentencePiece model) ``tokenizer`` is; None: a SentencePiece model."""
    return next((entry.manifest_format for entry in GENERATIONS
                 if entry.manifest_format.checker.table_settings is not None and entry.reads_tokenizer(str(tokenizer))), None)


def write_code_len_fixes(report: DataReport | Sequence[dict]) -> list[Path]:
    """Write a corrected manifest beside each manifest with padded ``target_code_len`` values (never over it).

    Takes a report or its ``code_len_fixes`` list (what the web UI keeps); returns the files written.
    """
    by_manifest: dict[str, list[CodeLenFix]] = {}
    for fix in report.code_len_fixes if isinstance(report, DataReport) else report:
        by_manifest.setdefault(fix["manifest"], []).append(
            CodeLenFix(fix["line"], fix["id"], fix["old"], fix["new"], fix["basis"]))
    return [fix_manifest(Path(manifest), fixes) for manifest, fixes in by_manifest.items()]


# ---------------------------------------------------------------------------------------------
# Inputs


def _settings(tokenizer: str | Path | None, config: str | Path | None, language: str | None,
              check_files: bool, text_scheme: str = "merges", text_merges: str | Path | None = None) -> CheckSettings:
    if language is not None and language not in LANGUAGE_SCRIPTS:
        known = ", ".join(sorted(LANGUAGE_SCRIPTS))
        raise CheckUsageError(f"--language {language}: no script known for it (known: {known})")
    values: dict = {}
    table_format = _table_format(tokenizer) if tokenizer is not None else None
    if tokenizer is not None and table_format is not None:  # a generation's own table (read with a text scheme)
        values.update(_table_settings(table_format, tokenizer, text_scheme, text_merges))
    elif tokenizer is not None:
        from data_tools.text_tokenizer import TextTokenizer, TokenizerError

        try:
            loaded = TextTokenizer(tokenizer)
        except TokenizerError as exc:
            raise CheckUsageError(str(exc)) from None
        values.update(text_vocab=loaded.vocab_size, unk_id=loaded.unk_id)
    if config is not None:
        from data_tools.config import ConfigError, load_config
        from data_tools.shape_rules import code_limit

        try:
            gpt = load_config(config)["gpt"]
        except ConfigError as exc:
            raise CheckUsageError(str(exc)) from None
        values = {
            **values,
            "max_text_tokens": int(gpt["max_text_tokens"]),
            "max_mel_tokens": int(gpt["max_mel_tokens"]),
            "start_mel_token": int(gpt["start_mel_token"]),
            "stop_mel_token": int(gpt["stop_mel_token"]),
            "model_dim": int(gpt["model_dim"]),
            "condition_latents": int(gpt.get("condition_num_latent", 32)),
            "mel_code_limit": code_limit(gpt),
        }
    return CheckSettings(check_files=check_files, language=language,
                         tokenizer=str(tokenizer) if tokenizer is not None else None, **values)


def _table_settings(table_format: ManifestFormat, table: str | Path, scheme: str, merges: str | Path | None) -> dict:
    assert table_format.checker.table_settings is not None
    try:
        return dict(table_format.checker.table_settings(str(table), scheme, str(merges) if merges else None))
    except ValueError as exc:
        raise CheckUsageError(f"--tokenizer {table}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.check_data",
                                description="Check training manifests (v1.5 codes or IndexTTS2 paired) before training.",
                                epilog="exit codes: 0 clean, 1 problems found (errors or warnings), 2 usage error "
                                       "(bad flags, unreadable manifest/tokenizer/config), 3 the checker itself "
                                       "failed (a bug; traceback on stderr)")
    parser.add_argument("--manifest", action="append", required=True, metavar="M",
                        help="train manifest (repeatable); M::am sets that manifest's language")
    parser.add_argument("--val-manifest", action="append", default=[], metavar="V",
                        help="validation manifest (repeatable); enables the leakage check")
    parser.add_argument("--tokenizer", type=Path, help="SentencePiece model: text lengths and unknown tokens "
                        "(IndexTTS-2.5: its .tiktoken table, with --text-scheme)")
    parser.add_argument("--text-scheme", choices=("merges", "bytes", "translit"), default="merges",
                        help="IndexTTS-2.5: how text becomes ids (as the trainer's --text-scheme)")
    parser.add_argument("--text-merges", type=Path, help="IndexTTS-2.5 merges scheme: the Ethiopic merges JSON "
                        "(default: the studio's)")
    parser.add_argument("--config", type=Path, help="IndexTTS config.yaml: length limits and the code range")
    parser.add_argument("--language", help="expected language of the text, e.g. am")
    parser.add_argument("--json", type=Path, dest="json_path", metavar="PATH", help="write the full report as JSON")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (default: every core)")
    parser.add_argument("--no-file-checks", action="store_true", help="skip the referenced .npy / audio files")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--fix-code-len", action="store_true",
                        help="paired manifests: write <name>.codelen_fixed.jsonl beside each manifest whose "
                             "target_code_len values are batch-padded (the original is never changed)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run_refusing(lambda: _main(args), (CheckUsageError,))
    except Exception as exc:  # the checker's own failure: exit 3, distinct from a verdict
        import traceback

        traceback.print_exc()
        print(f"error: the data checker failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              "this is a bug in the checker, not a verdict on the data", file=sys.stderr)
        return EXIT_CHECKER_ERROR


def _main(args: argparse.Namespace) -> int:
    if args.workers < 0:
        return usage_error("--workers must be >= 0")
    with progress_bar(args.quiet, "checking", unit="B", unit_scale=True, leave=False) as progress:
        report = check_manifests(args.manifest, args.val_manifest, tokenizer=args.tokenizer, config=args.config,
                                 language=args.language, workers=args.workers,
                                 check_files=not args.no_file_checks, progress=progress,
                                 text_scheme=args.text_scheme, text_merges=args.text_merges)
    print(report.summary_text())
    if args.json_path is not None:
        from data_tools.fileio import atomic_write_text

        try:
            atomic_write_text(args.json_path, json.dumps(report.to_json(), ensure_ascii=False, indent=1) + "\n")
        except OSError as exc:
            return usage_error(f"cannot write {args.json_path}: {exc.strerror or exc}")
    if args.fix_code_len:
        try:
            written = write_code_len_fixes(report)
        except (OSError, ValueError) as exc:
            return usage_error(exc)
        for path in written:
            print(f"corrected target_code_len written to {path}")
        if not written:
            print("no padded target_code_len found: nothing to correct")
    return report.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
