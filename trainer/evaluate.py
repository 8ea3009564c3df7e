"""Measure a run's checkpoints: ``python -m trainer.evaluate RUN_DIR [--eval-asr MODEL] ...``.

    python -m trainer.evaluate runs/am1 --eval-asr facebook/mms-1b-all --eval-asr-lang amh \\
        --eval-speaker-model microsoft/wavlm-base-plus-sv --best-by cer
    python -m trainer.evaluate runs/am_v2 --model-dir checkpoints/IndexTTS-2   # an IndexTTS2 run
    python -m trainer.evaluate runs/am25 --model-dir checkpoints/IndexTTS-2.5  # an IndexTTS-2.5 run

Every ``model_step<N>.pth`` of RUN_DIR not yet measured on the run's evaluation set (and, once, the base
model) speaks the set's sentences in its reference voices (IndexTTS2 and IndexTTS-2.5: through the download
folder of ``--model-dir``, else of ``--config``); the clips are transcribed (CER, WER) and compared
with the voices (speaker similarity). Results: ``model_step<N>.eval.json`` beside each checkpoint and an
``eval`` event in ``metrics.jsonl``; ``--best-by cer|sim`` points best.pth at the best. Measured checkpoints
are skipped, so a rerun only measures what is new.

Every flag defaults to the run's ``train_config.yaml`` (the trainer's options of the same names), so a run
trained with ``--eval-asr ...`` needs none. The evaluation set is made on first use and stored in
``RUN_DIR/eval/eval_set.json``; naming other sentences or voices than it holds is refused.

``--follow`` (used by the trainer for ``--eval-at-saves``): read step numbers from stdin, one per committed
save, and measure each until stdin closes.

``--best-by val_loss|cer|sim`` given here is remembered for the run (``RUN_DIR/eval/best_by.json``, until a
resumed run writes its own train_config.yaml): best.pth is pointed by it after the measuring, and
``--only-best`` points it without measuring anything (no model is loaded: the Checkpoints tab's choice).

Exit codes: 0 done; 2 refused (one ``error: ...`` line); 130 interrupted; 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from data_tools.cli import OneLineErrorParser
from trainer.errors import EXIT_OK, EXIT_STOPPED, run_cli
from trainer.evaluation.best import followed
from trainer.evaluation.errors import EvaluationError
from trainer.run_options import OptionTypeError, RunOptions, stored_run_options

# Trainer options the evaluation reads (from train_config.yaml unless given here), and flags of its own.
RUN_OPTIONS = ("config", "tokenizer", "vocoder", "model_dir", "w2v_bert", "base_checkpoint", "val_manifest")
EVAL_OPTIONS = ("eval_asr", "eval_asr_lang", "eval_speaker_model", "eval_texts", "eval_sentences", "eval_voices",
                "eval_reference", "eval_language", "eval_second_texts", "eval_second_language", "eval_second_asr_lang",
                "eval_base",
                "eval_device", "eval_threads", "best_by", "keep_best", "eval_seeds", "best_cer_limit",
                "best_sim_limit")
SET_OPTIONS = ("eval_texts", "eval_sentences", "eval_voices", "eval_reference", "eval_language",
               "eval_second_texts", "eval_second_language", "eval_seeds")


def build_parser() -> argparse.ArgumentParser:
    from trainer.options import option_by_name

    parser = OneLineErrorParser(prog="python -m trainer.evaluate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="the run's output directory")
    for name in RUN_OPTIONS + EVAL_OPTIONS:
        option = option_by_name(name)
        kwargs: dict[str, Any] = {"dest": name, "default": None,
                                  "help": option.help.replace("%", "%%") + " (default: the run's train_config.yaml)"}
        if option.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif option.repeatable:
            kwargs["action"] = "append"
        elif option.kind == "int":
            kwargs["type"] = int
        elif option.kind == "float":
            kwargs["type"] = float
        elif option.kind == "choice":
            kwargs["choices"] = option.choices
        if option.kind == "path":
            kwargs["type"] = _expanded
        parser.add_argument(option.flag, **kwargs)
    parser.add_argument("--test-set", type=Path, metavar="TEST_JSONL",
                        help="measure one checkpoint on the frozen test set (test.jsonl of python -m data_tools.split "
                             "--test-fraction; refused when changed since it was frozen); never used for --best-by")
    parser.add_argument("--checkpoint", type=Path, metavar="PTH",
                        help="with --test-set: the checkpoint to measure (default: best.pth, else latest.pth)")
    parser.add_argument("--follow", action="store_true",
                        help="measure the saves a trainer announces on stdin (one step per line) until it closes")
    parser.add_argument("--only-best", action="store_true",
                        help="measure nothing: point best.pth by --best-by (default: what the run follows) now")
    parser.add_argument("--json", type=Path, metavar="REPORT", help="also write the new results as JSON here")
    return parser


def _expanded(text: str) -> str:
    return str(Path(text).expanduser())


def run_options(run_dir: Path) -> RunOptions:
    """The run's resolved trainer options (train_config.yaml; names that are no longer options left out), or the
    defaults when the run has none; EvaluationError for a file that cannot be read or holds a mistyped value."""
    import yaml

    path = run_dir / "train_config.yaml"
    if not path.is_file():
        return RunOptions()
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EvaluationError(f"{path}: unreadable ({' '.join(str(exc).split())})") from None
    if not isinstance(loaded, dict):
        return RunOptions()
    try:
        return stored_run_options(loaded)
    except OptionTypeError as exc:
        raise EvaluationError(f"{path}: {exc}") from None


def evaluator_for(args: argparse.Namespace, say: Any = print) -> Any:
    """The Evaluator of ``args`` over the run's options (also used by tests and the bench)."""
    from data_tools.config import load_config
    from generations.registry import generation_of_config
    from trainer.evaluation.eval_set import EvalSetSpec, ensure_eval_set
    from trainer.evaluation.runner import EvalSettings, Evaluator
    from trainer.evaluation.scorers import ModelScorer

    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        raise EvaluationError(f"run directory {run_dir}: not found")
    given = {name: value for name in RUN_OPTIONS + EVAL_OPTIONS if (value := getattr(args, name, None)) is not None}
    # a choice made after training outranks train_config.yaml's; a flag given here outranks both
    opts = run_options(run_dir).replace(**{"best_by": followed(run_dir)[0], **given})
    explicit = [name for name in SET_OPTIONS if getattr(args, name, None) not in (None, [])]
    for flag, value in (("--config", opts.config), ("--tokenizer", opts.tokenizer)):
        if not value:
            raise EvaluationError(f"{flag} is needed (the run has no train_config.yaml naming it)")
    config_path = Path(opts.config)
    generation = generation_of_config(load_config(config_path))
    eval_set, note = ensure_eval_set(EvalSetSpec.from_options(opts), run_dir, explicit=bool(explicit))
    if note:
        say(f"note: {note}")
    device = str(opts.eval_device or "cpu")
    import torch

    torch.set_num_threads(max(1, int(opts.eval_threads or 1)))
    settings = EvalSettings(
        run_dir=run_dir, config=config_path, tokenizer=Path(opts.tokenizer),
        vocoder=Path(opts.vocoder) if opts.vocoder else None, version=generation.id, device=device,
        best_by=str(opts.best_by),
        base_checkpoint=Path(opts.base_checkpoint) if opts.eval_base and opts.base_checkpoint else None,
        model_dir=Path(opts.model_dir) if opts.model_dir else None, w2v_bert=str(opts.w2v_bert or "") or None,
        floor_manifests=[str(m) for m in opts.val_manifest or []],
        real_manifests=[str(m) for m in opts.train_manifest or []],
        cer_limit=float(opts.best_cer_limit), sim_limit=float(opts.best_sim_limit))
    scorer = ModelScorer(str(opts.eval_asr or ""), str(opts.eval_speaker_model or ""), device,
                         asr_lang=str(opts.eval_asr_lang or "") or None, main_language=eval_set.language,
                         second_asr_lang=str(opts.eval_second_asr_lang or "") or None)
    evaluator = Evaluator(settings, eval_set, scorer, say=say)
    evaluator.backend  # noqa: B018 (refuse an unsupported model version or a bad vocoder before any work)
    say(f"evaluation set: {eval_set.summary()} ({run_dir / 'eval' / 'eval_set.json'})")
    return evaluator


def evaluate(args: argparse.Namespace) -> int:
    if args.only_best:
        return _only_best(args)
    evaluator = evaluator_for(args, say=lambda line: print(line, flush=True))
    if args.test_set is not None:
        return _measure_test(args, evaluator)
    if args.follow:
        count = evaluator.follow(sys.stdin)
        print(f"evaluation at saves finished: {count} checkpoint(s) measured", flush=True)
        return EXIT_OK
    results = evaluator.evaluate_run()
    if args.best_by is not None:  # remembered for the run; evaluate_run already pointed best.pth by CER or SIM
        from trainer.evaluation.best import record_choice

        record_choice(args.run_dir, args.best_by)
        if args.best_by == "val_loss":
            _point_best(args.run_dir, evaluator.settings.rule)
    if args.json is not None:
        from data_tools.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(results)} checkpoint(s) measured" + ("" if results else " (every checkpoint was already measured)"),
          flush=True)
    return EXIT_OK


def _rule(args: argparse.Namespace) -> Any:
    from trainer.evaluation.best import BestRule

    opts = run_options(args.run_dir)
    best_by = args.best_by or followed(args.run_dir)[0]
    cer_limit = args.best_cer_limit if args.best_cer_limit is not None else opts.best_cer_limit
    sim_limit = args.best_sim_limit if args.best_sim_limit is not None else opts.best_sim_limit
    return BestRule(best_by, float(cer_limit), float(sim_limit))


def _point_best(run_dir: Path, rule: Any) -> tuple[int | None, str]:
    from trainer.evaluation.best import pin_lock, record_choice, repoint_best

    record_choice(run_dir, rule.best_by)
    with pin_lock(run_dir):
        step, reason = repoint_best(run_dir, rule)
    print(reason, flush=True)
    return step, reason


def _only_best(args: argparse.Namespace) -> int:
    """``--only-best``: best.pth follows the chosen number from now on, pointed at once (no model loaded)."""
    if not args.run_dir.is_dir():
        raise EvaluationError(f"run directory {args.run_dir}: not found")
    rule = _rule(args)
    step, reason = _point_best(args.run_dir, rule)
    if args.json is not None:
        from data_tools.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps({"best_by": rule.best_by, "step": step, "reason": reason}) + "\n")
    return EXIT_OK


def _measure_test(args: argparse.Namespace, evaluator: Any) -> int:
    from trainer.evaluation.frozen_measure import measure_test

    checkpoint = args.checkpoint
    if checkpoint is None:
        checkpoint = next((p for p in (args.run_dir / "best.pth", args.run_dir / "latest.pth") if p.is_file()), None)
    if checkpoint is None or not Path(checkpoint).is_file():
        raise EvaluationError(f"--checkpoint {checkpoint or args.run_dir / 'best.pth'}: file not found")
    measure_test(evaluator, args.test_set, Path(checkpoint), evaluator.settings.base_checkpoint,
                 say=lambda line: print(line, flush=True))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.follow:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return run_cli(lambda: evaluate(args))
    except KeyboardInterrupt:
        print("evaluation interrupted", file=sys.stderr, flush=True)
        return EXIT_STOPPED


if __name__ == "__main__":
    raise SystemExit(main())
