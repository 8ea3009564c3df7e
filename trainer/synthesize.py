"""Speak text with a fine-tuned IndexTTS v1.5 GPT and its BigVGAN: ``python -m trainer.synthesize --help``.

    python -m trainer.synthesize --checkpoint runs/demo/latest.pth --config checkpoints/config.yaml \\
        --tokenizer tokenizers/amharic_extended.model --vocoder checkpoints/bigvgan_generator.pth \\
        --reference prompt.wav --text "ሰላም ለዓለም" --out out.wav

``--checkpoint`` is any of our checkpoints, an export's gpt.pth or a bare IndexTTS gpt.pth. ``--vocoder``
defaults to the config's ``bigvgan_checkpoint`` beside the config. ``--texts-file`` speaks one text per
non-blank line: ``--out DIR`` gets ``001.wav``, ``002.wav``...; ``--out NAME.wav`` gets ``NAME_001.wav``...
Decoding (``--decode``): ``beam`` (default; upstream's beam search with sampling off: 3 beams, repetition
penalty 10, length penalty 0), ``greedy``, or ``sample`` (temperature/top-k/top-p, ``--seed``; with
``--num-beams`` > 1 it is beam sampling, upstream infer.py's own default).

Exit codes: 0 done; 2 refused (one line ``error: ...`` on stderr: a missing reference, an empty or too long
text, a vocoder file of the wrong layout, bad flags or files); 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from data_tools.cli import OneLineErrorParser
from trainer.errors import EXIT_OK, run_cli


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m trainer.synthesize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    files = parser.add_argument_group("model and voice")
    files.add_argument("--checkpoint", required=True, type=Path, help="GPT checkpoint (ours, an export, or gpt.pth)")
    files.add_argument("--config", required=True, type=Path, help="config.yaml (gpt and bigvgan sections)")
    files.add_argument("--tokenizer", required=True, type=Path, help="the SentencePiece model the GPT was trained with")
    files.add_argument("--vocoder", type=Path, help="bigvgan_generator.pth (default: the config's bigvgan_checkpoint)")
    files.add_argument("--reference", required=True, type=Path,
                       help="reference voice: audio (any rate, mono or not) or a prompt log-mel .npy [100, frames] "
                            "as in a codes manifest's cond_mel")
    files.add_argument("--language", help="front-end language code (default: detected from the script)")
    what = parser.add_argument_group("text and output")
    texts = what.add_mutually_exclusive_group(required=True)
    texts.add_argument("--text", help="the text to speak")
    texts.add_argument("--texts-file", type=Path, help="UTF-8 file, one text per non-blank line")
    what.add_argument("--out", required=True, type=Path, help="output .wav (or folder / name pattern with --texts-file)")
    what.add_argument("--json", type=Path, metavar="REPORT", help="also write a JSON report (durations, real-time factor)")
    decoding = parser.add_argument_group("decoding")
    decoding.add_argument("--decode", choices=("greedy", "beam", "sample"), default="beam")
    decoding.add_argument("--num-beams", type=int, default=3, help="beams for beam/sample (default 3)")
    decoding.add_argument("--temperature", type=float, default=1.0, help="sample only (default 1.0)")
    decoding.add_argument("--top-k", type=int, default=30, help="sample only; 0 = off (default 30)")
    decoding.add_argument("--top-p", type=float, default=0.8, help="sample only; 1 = off (default 0.8)")
    decoding.add_argument("--repetition-penalty", type=float, default=10.0, help="1 = off (default 10)")
    decoding.add_argument("--length-penalty", type=float, default=0.0, help="beam hypotheses (default 0)")
    decoding.add_argument("--seed", type=int, default=0, help="sample only (default 0)")
    decoding.add_argument("--max-codes", type=int, help="most codes per text (default: the model's max_mel_tokens)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    files.add_argument("--no-adapter", dest="adapter", action="store_false",
                       help="a LoRA checkpoint: speak with its base weights, without the adapters (default: merged)")
    return parser


def read_texts(args: argparse.Namespace) -> list[str]:
    from trainer.synthesis.errors import SynthesisError

    if args.text is not None:
        if not args.text.strip():
            raise SynthesisError("--text is empty")
        return [args.text]
    path: Path = args.texts_file
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise SynthesisError(f"--texts-file {path}: file not found") from None
    except UnicodeDecodeError:
        raise SynthesisError(f"--texts-file {path}: not UTF-8 text") from None
    except OSError as exc:
        raise SynthesisError(f"--texts-file {path}: {exc.strerror or exc}") from None
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise SynthesisError(f"--texts-file {path} holds no text (every line is blank)")
    return texts


def output_paths(out: Path, count: int, single: bool) -> list[Path]:
    """Where each text's audio goes (see the module docstring)."""
    if single:
        return [out]
    width = max(3, len(str(count)))
    if out.suffix.lower() == ".wav":
        return [out.with_name(f"{out.stem}_{i + 1:0{width}d}.wav") for i in range(count)]
    return [out / f"{i + 1:0{width}d}.wav" for i in range(count)]


def vocoder_path(args: argparse.Namespace, config: dict[str, Any]) -> Path:
    from trainer.synthesis.errors import SynthesisError

    if args.vocoder is not None:
        return args.vocoder
    name = config.get("bigvgan_checkpoint")
    if not name:
        raise SynthesisError(f"--config {args.config} names no bigvgan_checkpoint: pass --vocoder")
    path = Path(name)
    return path if path.is_absolute() else args.config.parent / path


def synthesize(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from data_tools.config import load_config
    from trainer.steps import resolve_device
    from trainer.synthesis import DecodeSettings, SynthesisError, Synthesizer, write_wav

    if not args.reference.is_file():
        raise SynthesisError(f"--reference {args.reference}: file not found")
    texts = read_texts(args)
    settings = DecodeSettings(
        mode=args.decode, num_beams=args.num_beams, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, repetition_penalty=args.repetition_penalty, length_penalty=args.length_penalty,
        seed=args.seed, max_codes=args.max_codes)
    problems = settings.problems()
    if problems:
        raise SynthesisError("; ".join(problems))
    device = resolve_device(args.device)
    config = load_config(args.config)
    synth = Synthesizer.load(args.checkpoint, args.config, args.tokenizer, vocoder_path(args, config), device,
                             language=args.language, adapter=args.adapter)
    synth.check_settings(settings)
    for index, text in enumerate(texts):  # every text is checked before any audio is made
        synth.text_ids(text, "--text" if args.text is not None else f"{args.texts_file}:{index + 1}")
    reference = synth.prepare_reference(_reference_input(args.reference))
    paths = output_paths(args.out, len(texts), single=args.text is not None)
    report: list[dict[str, Any]] = []
    with tqdm(total=len(texts), desc="synthesizing", unit="text", file=sys.stderr, disable=None) as bar:
        for text, path in zip(texts, paths):
            result = synth.synthesize([text], reference, settings)[0]
            try:
                write_wav(path, result.waveform, result.sample_rate)
            except OSError as exc:
                raise SynthesisError(f"cannot write {path}: {exc.strerror or exc}") from None
            report.append({"out": str(path), **result.to_dict()})
            for note in result.notes:
                tqdm.write(f"note: {path.name}: {note}", file=sys.stderr)
            bar.update(1)
    audio = sum(item["audio_seconds"] for item in report)
    taken = sum(item["seconds"] for item in report)
    summary = {"device": str(device), "settings": vars_of(settings), "reference": str(args.reference),
               "reference_seconds": round(reference.seconds, 4), "audio_seconds": round(audio, 4),
               "seconds": round(taken, 4), "real_time_factor": round(taken / audio, 4) if audio > 0 else None,
               "items": report}
    if args.json is not None:
        from data_tools.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    for item in report:
        print(f"{item['out']}: {item['audio_seconds']:.2f} s of audio in {item['seconds']:.2f} s "
              f"({item['codes']} codes{'' if item['hit_stop'] else ', no stop code'})")
    rtf = summary["real_time_factor"]
    print(f"total: {audio:.2f} s of audio in {taken:.2f} s" + (f", real-time factor {rtf:.3f}" if rtf else ""))
    return EXIT_OK


def vars_of(settings: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(settings)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: synthesize(args))


def _reference_input(path: Path) -> Any:
    """A prompt mel ``.npy`` (the data's own cond_mel) is used as features; anything else is read as audio."""
    if path.suffix.lower() != ".npy":
        return path
    import numpy as np
    import torch

    from data_tools.npy import read_npy
    from trainer.synthesis.errors import SynthesisError

    try:
        mel = read_npy(path)
    except (OSError, ValueError) as exc:
        raise SynthesisError(f"--reference {path}: {' '.join(str(exc).split())}") from None
    return torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))


if __name__ == "__main__":
    raise SystemExit(main())

