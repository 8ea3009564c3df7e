"""``python -m data_tools.tokenizer train | extend | verify | extend25``.

  train   SentencePiece on a new-language corpus (text files, one line each, or JSONL manifests' "text"),
          every line through the text front-end first:
            python -m data_tools.tokenizer train --input am.txt --out tokenizers/am --vocab-size 8000 \\
                --model-type bpe --language am
  extend  base model + the new model's pieces -> extended model (base ids unchanged):
            python -m data_tools.tokenizer extend --base checkpoints/bpe.model --new tokenizers/am.model \\
                --out tokenizers/am_extended.model [--target-size 20000] [--corpus am.txt]
  verify  checks of an extended model (table, or --json); exit 1 when a hard check fails:
            python -m data_tools.tokenizer verify --tokenizer tokenizers/am_extended.model \\
                --base checkpoints/bpe.model --samples-new am_val.txt --samples-base en.txt \\
                [--manifest train.jsonl --config checkpoints/config.yaml]
  extend25  IndexTTS-2.5: learn Ethiopic merges on top of the 2.5 tiktoken table (base ids unchanged):
            python -m data_tools.tokenizer extend25 --base tokenizers/indextts25/multilingual_zh_ja_yue_char_del.tiktoken \\
                --corpus am.txt --merges 2000 --out tokenizers/indextts25/ethiopic_merges_am.json \\
                [--upstream-table export/multilingual_zh_ja_yue_char_del.tiktoken]

Exit codes: 0 done (verify: all hard checks passed), 1 verify found a failed hard check,
2 bad input (one line ``error: ...`` on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data_tools.cli import OneLineErrorParser, run_refusing
from data_tools.tokenizer.spm_model import TokenizerToolError


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.tokenizer", description="Train, extend and verify tokenizers.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)

    train = sub.add_parser("train", help="train a SentencePiece model on a corpus (through the front-end)")
    train.add_argument("--input", type=Path, action="append", required=True,
                       help="corpus: a text file (one line each) or a JSONL manifest; repeatable")
    train.add_argument("--out", type=Path, required=True, help="output prefix: writes PREFIX.model and PREFIX.vocab")
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--model-type", choices=("bpe", "unigram"), default="bpe")
    train.add_argument("--language", default=None, help="language code for the front-end (default: by script)")
    train.add_argument("--character-coverage", type=float, default=1.0)
    train.add_argument("--max-lines", type=int, default=None, help="use at most this many lines")

    extend = sub.add_parser("extend", help="append a new model's pieces to a base model")
    extend.add_argument("--base", type=Path, required=True, help="base model (e.g. IndexTTS's bpe.model)")
    extend.add_argument("--new", type=Path, required=True, help="model trained on the new language")
    extend.add_argument("--out", type=Path, required=True, help="extended model to write (.model)")
    extend.add_argument("--target-size", type=int, default=None, help="total pieces (default: all new pieces)")
    extend.add_argument("--corpus", type=Path, action="append", default=[],
                        help="also make every character of this corpus a piece (normalised); repeatable")
    extend.add_argument("--language", default=None, help="front-end language for --corpus (default: by script)")
    extend.add_argument("--no-complete-scripts", action="store_true",
                        help="do not add the rest of a new script's repertoire (e.g. the whole Ethiopic block)")
    extend.add_argument("--allow-base-character-pieces", action="store_true",
                        help="also append pieces made only of base characters (may change base-language ids)")
    extend.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")

    verify = sub.add_parser("verify", help="check an extended model against its base")
    verify.add_argument("--tokenizer", type=Path, required=True, help="the extended model")
    verify.add_argument("--base", type=Path, required=True, help="the base model")
    verify.add_argument("--samples-new", type=Path, default=None, help="new-language text (or JSONL manifest)")
    verify.add_argument("--samples-base", type=Path, default=None, help="base-language text (or JSONL manifest)")
    verify.add_argument("--language", default=None, help="front-end language of --samples-new/--manifest")
    verify.add_argument("--base-language", default=None, help="front-end language of --samples-base")
    verify.add_argument("--max-samples", type=int, default=5000, help="lines read from each samples file")
    verify.add_argument("--max-unk-rate", type=float, default=0.0, help="allowed unknown-token rate (default 0)")
    verify.add_argument("--manifest", type=Path, default=None, help="check its longest text against max_text_tokens")
    verify.add_argument("--config", type=Path, default=None, help="config.yaml giving gpt.max_text_tokens")
    verify.add_argument("--max-text-tokens", type=int, default=None, help="overrides the config's value")
    verify.add_argument("--json", default=None, help="write the report as JSON to this path ('-' for stdout)")
    extend25 = sub.add_parser("extend25", help="IndexTTS-2.5: learn Ethiopic merges on top of the tiktoken table")
    extend25.add_argument("--base", type=Path, required=True, help="the 2.5 .tiktoken table")
    extend25.add_argument("--corpus", type=Path, action="append", required=True,
                          help="Amharic text (one line each) or a JSONL manifest's texts; repeatable")
    extend25.add_argument("--merges", type=int, default=2000, help="merges to learn (default 2000)")
    extend25.add_argument("--min-count", type=int, default=2, help="stop when the best pair is rarer than this")
    extend25.add_argument("--language", default="am", help="language code of the corpus (default am)")
    extend25.add_argument("--out", type=Path, required=True, help="merges JSON to write")
    extend25.add_argument("--upstream-table", type=Path, default=None,
                          help="also write the extended .tiktoken that stock inference reads (never over --base)")
    return parser


def _progress(line: str) -> None:
    print(line, flush=True)


def _run_train(args: argparse.Namespace) -> int:
    from data_tools.tokenizer.train import train_tokenizer

    train_tokenizer(args.input, args.out, args.vocab_size, args.model_type, args.language,
                    character_coverage=args.character_coverage, max_lines=args.max_lines, progress=True,
                    log=_progress)
    return 0


def _run_extend(args: argparse.Namespace) -> int:
    from data_tools.fileio import atomic_write_text
    from data_tools.tokenizer.extend import extend_tokenizer
    from data_tools.tokenizer.train import normalized_corpus

    extra: set[str] = set()
    if args.corpus:
        lines, _ = normalized_corpus(args.corpus, args.language, progress=True)
        for line in lines:
            extra.update(line)
    report = extend_tokenizer(args.base, args.new, args.out, args.target_size,
                              complete_scripts=not args.no_complete_scripts, extra_characters=sorted(extra),
                              allow_base_character_pieces=args.allow_base_character_pieces, log=_progress)
    if args.json is not None:
        atomic_write_text(args.json, report.to_json() + "\n")
    return 0


def _run_verify(args: argparse.Namespace) -> int:
    from data_tools.fileio import atomic_write_text
    from data_tools.tokenizer.verify import read_samples, verify_tokenizer

    max_text_tokens = args.max_text_tokens
    if max_text_tokens is None and args.config is not None:
        from data_tools.config import ConfigError, load_config

        try:
            max_text_tokens = int(load_config(args.config)["gpt"]["max_text_tokens"])
        except ConfigError as exc:
            raise TokenizerToolError(str(exc)) from None
    samples_new = read_samples(args.samples_new, args.max_samples) if args.samples_new else []
    samples_base = read_samples(args.samples_base, args.max_samples) if args.samples_base else []
    report = verify_tokenizer(args.tokenizer, args.base, samples_new, samples_base, args.manifest, max_text_tokens,
                              language=args.language, base_language=args.base_language,
                              max_unk_rate=args.max_unk_rate)
    if args.json == "-":
        print(report.to_json())
    else:
        print(report.table())
        if args.json:
            atomic_write_text(Path(args.json), report.to_json() + "\n")
    return 0 if report.ok else 1


def _run_extend_table(args: argparse.Namespace) -> int:
    from data_tools.text import language_normalize
    from data_tools.tokenizer.verify import read_samples
    from generations.indextts25.data.ethiopic_merges import learn_merges, save_merges, write_upstream_table
    from generations.indextts25.data.tiktoken_table import TiktokenTable

    if args.merges < 1:
        raise TokenizerToolError("--merges must be at least 1")
    if args.upstream_table is not None and args.upstream_table.resolve() == args.base.resolve():
        raise TokenizerToolError(f"--upstream-table would overwrite the base table {args.base}")
    base = TiktokenTable.load(args.base)
    lines = [language_normalize(line, args.language) for path in args.corpus for line in read_samples(path)]
    if not lines:
        raise TokenizerToolError("the corpus has no text lines")
    merges = learn_merges(base, lines, args.merges, language=args.language, min_count=args.min_count,
                          log=_progress)
    merges.corpus = ", ".join(path.name for path in args.corpus)
    for path in (args.out, args.upstream_table):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    save_merges(merges, base, args.out)
    extended = TiktokenTable.load(args.base, merges.tokens)
    before = sum(len(base.encode_for_language(line, args.language).ids) - 1 for line in lines)
    after = sum(len(extended.encode_for_language(line, args.language).ids) - 1 for line in lines)
    chars = sum(len(line) for line in lines) or 1
    _progress(f"{len(merges.tokens)} merges -> {args.out} (ids {extended.first_added_id}.."
              f"{extended.vocab_size - 1}); tokens per character on the corpus {before / chars:.3f} -> "
              f"{after / chars:.3f}")
    if args.upstream_table is not None:
        write_upstream_table(extended, args.upstream_table)
        _progress(f"upstream table -> {args.upstream_table}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from generations.indextts25.data.tiktoken_table import TableError

    runners = {"train": _run_train, "extend": _run_extend, "verify": _run_verify, "extend25": _run_extend_table}
    try:
        return run_refusing(lambda: runners[args.command](args), (TokenizerToolError, TableError))
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
