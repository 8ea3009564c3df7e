"""``python -m trainer.s2mel.evaluate``: does the trained S2Mel help? The whole pipeline scored with and without it.

Every held-out voice (``--voices``: reference audio of speakers the run did not train on) speaks every text twice
through the same loaded IndexTTS2 / 2.5 synthesizer (the GPT of ``--checkpoint``, else the folder's): once with the
download folder's ``s2mel.pth`` (GPT only) and once with the S2Mel checkpoint or adapter merged in (GPT + S2Mel),
with the same deterministic decoding and the same CFM noise seed, so the decoder is the only difference. Each
side's clips are scored by the evaluation's judges (``trainer.evaluation.scorers``): speaker similarity to the
voice's reference (x-vector cosine, higher is better) and CER of a CTC recogniser's transcript (lower is better).

:func:`trainer.s2mel.keep.decide_adapter` turns the two score lists into the decision (``--strengths``: the trained side
is spoken at each adapter strength and :func:`trainer.s2mel.keep.choose_strength` picks one, which the decision and
the file record, and the export applies); it is written with them to
``<run>/s2mel_scores.json`` (``--out`` elsewhere), which ``python -m trainer.checkpoints export-s2mel`` reads by
default, and appended to the run's ``metrics.jsonl`` (``"event": "keep"``) with its reason, which is also printed.
The file's ``health`` block says whether an adapter changes anything at all (:mod:`trainer.s2mel.adapter_health`);
one that changes nothing is left out whatever it scores.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import EXIT_OK, UsageError, run_cli
from trainer.evaluation.results import metric_text
from trainer.s2mel.keep import KeepDecision, VoiceScore, choose_strength, decide_adapter

SCORES_FILE = "s2mel_scores.json"  # beside the run's checkpoints: what export-s2mel gates on
DEFAULT_TEXTS = ("ሰላም ለዓለም። ዛሬ አየሩ ጥሩ ነው።",)


def _clip(waveform: Any) -> np.ndarray:
    if hasattr(waveform, "detach"):
        waveform = waveform.detach().cpu().float().numpy()
    return np.asarray(waveform, dtype=np.float32).reshape(-1)


def speak_all(synth: Any, voices: Sequence[Path], texts: Sequence[str], settings: Any, mel: Any
              ) -> tuple[list[list[np.ndarray]], int]:
    """Each voice's clips (one per text) and the sample rate, through the synthesizer's current S2Mel."""
    clips, rate = [], 0
    for voice in voices:
        prepared = synth.prepare_voice(voice)
        spoken = []
        for text in texts:
            result = synth.synthesize(text, prepared, settings=settings, mel=mel)
            spoken.append(_clip(result.waveform))
            rate = int(result.sample_rate)
        clips.append(spoken)
    return clips, rate


def score_voices(voices: Sequence[Path], texts: Sequence[str], clips: Sequence[Sequence[np.ndarray]], rate: int,
                 scorer: Any, language: str | None) -> list[VoiceScore]:
    """One VoiceScore per voice: its clips' mean similarity to its reference and their CER against the texts."""
    from data_tools.scoring import ScoringError, cer

    scores = []
    for voice, spoken in zip(voices, clips):
        sims = [s for s in scorer.similarity(list(spoken), rate, voice) if not math.isnan(s)]
        hyps = scorer.transcribe(list(spoken), rate, language)
        try:
            rate_of = cer(list(texts), hyps, language).corpus
        except ScoringError as exc:
            raise UsageError(f"scoring {voice}: {exc}") from None
        scores.append(VoiceScore(voice.name, float(np.mean(sims)) if sims else float("nan"), float(rate_of)))
    return scores


def with_and_without(synth: Any, trained: Any, voices: Sequence[Path], texts: Sequence[str], scorer: Any, *,
                     language: str | None, settings: Any, mel: Any) -> tuple[list[VoiceScore], list[VoiceScore]]:
    """(GPT only, GPT + S2Mel) scores of every voice; the synthesizer's own S2Mel is back afterwards."""
    without, by_strength = with_each_decoder(synth, {1.0: trained}, voices, texts, scorer, language=language,
                                             settings=settings, mel=mel)
    return without, by_strength[1.0]


def with_each_decoder(synth: Any, decoders: dict[float, Any], voices: Sequence[Path], texts: Sequence[str],
                      scorer: Any, *, language: str | None, settings: Any, mel: Any
                      ) -> tuple[list[VoiceScore], dict[float, list[VoiceScore]]]:
    """(GPT only, {strength: GPT + S2Mel at it}) scores of every voice; the synthesizer's S2Mel is back after."""
    stock_clips, spoken, rate = speak_each_decoder(synth, decoders, voices, texts, language=language,
                                                   settings=settings, mel=mel)
    return scored(voices, texts, stock_clips, spoken, rate, scorer, language)


def speak_each_decoder(synth: Any, decoders: dict[float, Any], voices: Sequence[Path], texts: Sequence[str], *,
                       language: str | None, settings: Any, mel: Any
                       ) -> tuple[list[list[np.ndarray]], dict[float, list[list[np.ndarray]]], int]:
    """(GPT only clips, {strength: GPT + S2Mel clips}, sample rate); the synthesizer's S2Mel is back after."""
    original = synth.nets.s2mel
    synth.language = language
    stock_clips, rate = speak_all(synth, voices, texts, settings, mel)
    spoken = {}
    try:
        for strength, decoder in decoders.items():
            synth.nets.s2mel = decoder
            spoken[strength], _ = speak_all(synth, voices, texts, settings, mel)
    finally:
        synth.nets.s2mel = original
    return stock_clips, spoken, rate


def scored(voices: Sequence[Path], texts: Sequence[str], stock_clips: list[list[np.ndarray]],
           spoken: dict[float, list[list[np.ndarray]]], rate: int, scorer: Any, language: str | None
           ) -> tuple[list[VoiceScore], dict[float, list[VoiceScore]]]:
    return (score_voices(voices, texts, stock_clips, rate, scorer, language),
            {strength: score_voices(voices, texts, clips, rate, scorer, language) for strength, clips in spoken.items()})


def scores_record(checkpoint: Path, step: Any, without: list[VoiceScore], with_adapter: list[VoiceScore],
                  decision: KeepDecision, **facts: Any) -> dict[str, Any]:
    """What ``s2mel_scores.json`` holds (export-s2mel reads ``without``, ``with`` and ``step``)."""
    return {"checkpoint": str(checkpoint), "step": step, "without": [asdict(s) for s in without],
            "with": [asdict(s) for s in with_adapter], "keep": decision.keep, "reason": decision.reason,
            "strength": decision.strength, **facts}


def log_keep_event(run_dir: Path, record: dict[str, Any]) -> None:
    """Append the decision to the run's metrics.jsonl (its log), where the run has one."""
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        event = {"part": "s2mel", "event": "keep", "step": record.get("step"), "keep": record["keep"],
                 "strength": record.get("strength", 1.0), "reason": record["reason"]}
        with open(metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, ensure_ascii=False) + "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer.s2mel.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("s2mel", type=Path, help="the S2Mel run checkpoint (or exported adapter) to judge")
    parser.add_argument("--model-dir", type=Path, required=True, help="the IndexTTS2 / 2.5 download folder it "
                        "trained from")
    parser.add_argument("--voices", type=Path, nargs="+", required=True, help="reference audio of held-out voices")
    parser.add_argument("--text", action="append", help="a text every voice speaks (repeatable; default: one "
                        "Amharic sentence)")
    parser.add_argument("--texts", type=Path, help="a file of texts, one per line (added to --text)")
    parser.add_argument("--language", default="am", help="the texts' language (ASR adapter, CER normalisation)")
    parser.add_argument("--checkpoint", type=Path, help="the GPT to speak with (default: the folder's)")
    parser.add_argument("--tokenizer", type=Path, help="the GPT's tokenizer (IndexTTS2: default the folder's)")
    parser.add_argument("--w2v-bert", default="", help="w2v-BERT folder or id (default: the folder's)")
    parser.add_argument("--speaker-model", required=True, help="x-vector speaker model folder or id (similarity)")
    parser.add_argument("--asr", required=True, help="CTC recogniser folder or id (CER)")
    parser.add_argument("--asr-lang", default=None, help="the recogniser's language adapter (MMS: amh)")
    parser.add_argument("--steps", type=int, default=10, help="S2Mel CFM steps (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="CFM noise seed, the same on both sides")
    parser.add_argument("--max-codes", type=int, default=None, help="cap the GPT's codes per segment")
    parser.add_argument("--min-similarity-gain", type=float, default=0.0)
    parser.add_argument("--max-cer-increase", type=float, default=0.0,
                        help="the most CER may rise with the adapter, as a fraction (0.01: one percentage point)")
    parser.add_argument("--strengths", type=_strengths, default=(1.0,), metavar="S[,S...]",
                        help="adapter strengths (0 < S <= 1) to speak the trained side at; the gate keeps the best "
                             "that passes and records it (default 1)")
    parser.add_argument("--out", type=Path, help=f"scores file (default: {SCORES_FILE} beside the checkpoint)")
    parser.add_argument("--device", default="cpu")
    return parser


def _strengths(text: str) -> tuple[float, ...]:
    from trainer.s2mel.strength import check_strength

    try:
        values = sorted({check_strength(part, "--strengths") for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not values or values[0] == 0.0:
        raise argparse.ArgumentTypeError("--strengths: give one or more strengths above 0 (0 is the stock side)")
    return tuple(values)


def _texts(args: argparse.Namespace) -> list[str]:
    texts = [t.strip() for t in (args.text or []) if t.strip()]
    if args.texts is not None:
        try:
            texts += [line.strip() for line in args.texts.read_text(encoding="utf-8").splitlines() if line.strip()]
        except OSError as exc:
            raise UsageError(f"--texts {args.texts}: {exc}") from None
    return texts or list(DEFAULT_TEXTS)


def evaluate(args: argparse.Namespace, scorer: Any = None) -> dict[str, Any]:
    """The scores and decision (also written and logged); ``scorer``: the judges (default: ModelScorer)."""
    from generations.registry import generation_of_folder
    from generations.spec import Capability
    from trainer.checkpoints.format import CheckpointError
    from trainer.checkpoints.loading import load_checkpoint
    from trainer.evaluation.errors import EvaluationError
    from trainer.evaluation.scorers import ModelScorer
    from trainer.s2mel.adapter_health import s2mel_adapter_block, s2mel_health, unchanged_reason
    from trainer.s2mel.export import S2MelExportError, build_trained_s2mel
    from trainer.s2mel.lora import S2MelLoRAError
    from trainer.s2mel.strength import at_strength
    from trainer.steps import resolve_device
    from trainer.synthesis.errors import SynthesisError
    from trainer.synthesis.generation import DecodeSettings

    generation = generation_of_folder(args.model_dir) if args.model_dir.is_dir() else None
    if generation is None or generation.s2mel is None or not (args.model_dir / "s2mel.pth").is_file():
        raise UsageError(f"--model-dir {args.model_dir}: not an IndexTTS2 / 2.5 download folder with s2mel.pth"
                         + (f" ({generation.refusal(Capability.TRAIN_S2MEL)})" if generation is not None else ""))
    missing = [str(v) for v in [args.s2mel, *args.voices] if not Path(v).is_file()]
    if missing:
        raise UsageError(f"file not found: {', '.join(missing)}")
    texts = _texts(args)
    device = resolve_device(args.device)
    opts = {"w2v_bert": args.w2v_bert, "base_checkpoint": str(args.checkpoint or ""),
            "tokenizer": str(args.tokenizer or "")}
    try:
        stored = load_checkpoint(args.s2mel, mmap=True)
        step = stored.get("step")
        sources = generation.s2mel.sources(opts, args.model_dir, device)
        synth = sources.synthesizer
        trained = build_trained_s2mel(args.s2mel, args.model_dir / "s2mel.pth", sources.config["s2mel"],
                                      **sources.model_kwargs)
        decoders = {strength: at_strength(trained, synth.nets.s2mel, strength).to(device)
                    for strength in args.strengths}
        mel = synth.MEL_SETTINGS(steps=args.steps, seed=args.seed)
        settings = DecodeSettings(mode="greedy", max_codes=args.max_codes)
        judges = scorer or ModelScorer(args.asr, args.speaker_model, str(device), asr_lang=args.asr_lang,
                                       main_language=args.language)
        stock_clips, spoken, rate = speak_each_decoder(synth, decoders, args.voices, texts, language=args.language,
                                                       settings=settings, mel=mel)
        strongest = max(decoders)  # merges to the base exactly when every strength does
        health = s2mel_health(s2mel_adapter_block(stored, decoders[strongest], synth.nets.s2mel, stock_clips,
                                                  spoken[strongest]))
        without, by_strength = scored(args.voices, texts, stock_clips, spoken, rate, judges, args.language)
    except (CheckpointError, S2MelExportError, S2MelLoRAError, SynthesisError, EvaluationError) as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    gate = {"min_similarity_gain": args.min_similarity_gain, "max_cer_increase": args.max_cer_increase,
            "unchanged": unchanged_reason(health)}
    decision = (decide_adapter(without, by_strength[1.0], **gate) if list(by_strength) == [1.0]
                else choose_strength(without, by_strength, **gate))
    tried = {f"{strength:g}": [asdict(s) for s in scores] for strength, scores in by_strength.items()}
    record = scores_record(args.s2mel, step, without, by_strength[decision.strength], decision, by_strength=tried, texts=texts, language=args.language,
                           speaker_model=args.speaker_model, asr=args.asr, steps=args.steps, seed=args.seed,
                           gpt=str(args.checkpoint or "the folder's"), health=health)
    from data_tools.fileio import atomic_write_text

    out = args.out or args.s2mel.parent / SCORES_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    log_keep_event(args.s2mel.parent, record)
    return {**record, "written": str(out)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        record = evaluate(args)
        for side in ("without", "with"):
            for score in record[side]:
                print(f"{'GPT + S2Mel' if side == 'with' else 'GPT only   '}  {score['voice']}: similarity "
                      f"{score['similarity']:.4f}, CER {metric_text('cer', score['cer'])}", flush=True)
        print(f"health: {record['health']['summary']}", flush=True)
        print(record["reason"], flush=True)
        print(f"wrote {record['written']}", flush=True)
        return EXIT_OK

    return run_cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
