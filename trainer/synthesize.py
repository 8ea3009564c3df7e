"""Speak text with a fine-tuned IndexTTS GPT (v1.5 or 2): ``python -m trainer.synthesize --help``.

    python -m trainer.synthesize --checkpoint runs/demo/latest.pth --config checkpoints/config.yaml \\
        --tokenizer tokenizers/amharic_extended.model --vocoder checkpoints/bigvgan_generator.pth \\
        --reference prompt.wav --text "ሰላም ለዓለም" --out out.wav

``--checkpoint`` is any of our checkpoints, an export's gpt.pth or a bare IndexTTS gpt.pth. ``--vocoder``
defaults to the config's ``bigvgan_checkpoint`` beside the config. ``--texts-file`` speaks one text per
non-blank line: ``--out DIR`` gets ``001.wav``, ``002.wav``...; ``--out NAME.wav`` gets ``NAME_001.wav``...
Decoding (``--decode``): ``beam`` (default; upstream's beam search with sampling off: 3 beams, repetition
penalty 10, length penalty 0), ``greedy``, or ``sample`` (temperature/top-k/top-p, ``--seed``; with
``--num-beams`` > 1 it is beam sampling, upstream infer.py's own default).

IndexTTS2 (``--model-dir``, an IndexTTS2 download folder; see networks.indextts2 for its layout):

    python -m trainer.synthesize --model-dir checkpoints/IndexTTS-2 --w2v-bert checkpoints/w2v-bert-2.0 \
        --checkpoint runs/am_v2/latest.pth --tokenizer tokenizers/amharic_v2.model \
        --reference prompt.wav --text "ሰላም ለዓለም። እንዴት ነህ?" --out out.wav

An export (``python -m trainer.checkpoints export``) is such a folder: ``--model-dir EXPORT`` speaks it as it is.
``--checkpoint`` (default: the folder's gpt.pth) is any v2 GPT checkpoint: ours, an export, a bare gpt.pth;
``--tokenizer`` defaults to the folder's bpe.model. Long texts are spoken in segments of at most 120 tokens cut
at sentence (then clause, then word) boundaries, joined with 200 ms of silence; 22050 Hz output. Emotion:
``--emotion-reference`` audio blended by ``--emotion-alpha`` (0..1), or ``--emotion-vector`` with 8 weights
(happy, angry, sad, afraid, disgusted, melancholic, surprised, calm; alpha scales them). ``--steps`` sets the
S2Mel flow-matching steps (default 25; fewer is faster and rougher); ``--seed`` also seeds its noise.

IndexTTS-2.5 (a ``--model-dir`` whose config.yaml says ``version: 2.5``; see networks.indextts25):

    python -m trainer.synthesize --model-dir checkpoints/IndexTTS-2.5 --checkpoint runs/am_v25/latest.pth \
        --language am --reference prompt.wav --text "ሰላም ለዓለም። እንዴት ነህ?" --duration-factor 1.1 --out out.wav

``--checkpoint`` (default: the folder's gpt.pth) is any 2.5 GPT checkpoint: ours, an export's gpt.pth, a bare
gpt.pth. The text scheme (``--text-scheme`` bytes | merges | translit) defaults to the one the checkpoint
records, else ``bytes`` (upstream's own table); ``--tokenizer`` is the .tiktoken table (default: the folder's).
``--duration-factor`` stretches the speech (S2Mel length only; 1 = upstream), ``--steps`` as for IndexTTS2.
``--adapter ADAPTER.pth`` merges a LoRA adapter file (export --adapter-only) into the GPT; a LoRA training
checkpoint speaks with its own adapters merged unless ``--no-adapter``.

Each generation's part (its options, its synthesizer) is ``generations.<name>.synthesize``, named by
its registry entry; this module holds the flags, the texts, the report and what they share.

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

DEFAULT_STEPS = 25  # networks.s2mel's (not imported here: --help stays light)
DEFAULT_CFG_RATE = 0.7
DEFAULT_SEGMENT_TOKENS = 120  # trainer.synthesis.segments' (infer_v2's max_text_tokens_per_segment)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m trainer.synthesize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    files = parser.add_argument_group("model and voice")
    files.add_argument("--checkpoint", type=Path,
                       help="GPT checkpoint (ours, an export, or gpt.pth); required for v1.5, IndexTTS2 default: "
                            "the --model-dir's gpt.pth")
    files.add_argument("--config", type=Path, help="config.yaml (gpt and bigvgan sections); v1.5 only, required")
    files.add_argument("--tokenizer", type=Path,
                       help="the SentencePiece model the GPT was trained with (required for v1.5; IndexTTS2 "
                            "default: the --model-dir's bpe.model); IndexTTS-2.5: the .tiktoken table (default: "
                            "the --model-dir's)")
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
    v2 = parser.add_argument_group("IndexTTS2")
    v2.add_argument("--model-dir", type=Path, help="IndexTTS2 download folder (config.yaml, s2mel.pth, ...): "
                                                     "speak with IndexTTS2")
    v2.add_argument("--w2v-bert", help="w2v-BERT 2.0: a local folder or a model id (default: <model-dir>/w2v-bert-2.0)")
    v2.add_argument("--emotion-reference", type=Path, help="audio whose emotion to use (default: the reference's)")
    v2.add_argument("--emotion-alpha", type=float, default=1.0,
                    help="0..1: how much of --emotion-reference (or how strong --emotion-vector) (default 1)")
    v2.add_argument("--emotion-vector", metavar="W1,...,W8",
                    help="8 emotion weights: happy, angry, sad, afraid, disgusted, melancholic, surprised, calm")
    v2.add_argument("--segment-tokens", type=int, default=DEFAULT_SEGMENT_TOKENS,
                    help="longest text segment in tokens; longer texts are cut at sentence, clause, word "
                         f"boundaries (default {DEFAULT_SEGMENT_TOKENS}, capped by the model's max_text_tokens)")
    v2.add_argument("--s2mel", type=Path, metavar="S2MEL.pth",
                    help="IndexTTS2 / 2.5: an S2Mel run checkpoint or adapter (python -m trainer.train --train s2mel) "
                         "that replaces the --model-dir's s2mel.pth (adapters merged)")
    v2.add_argument("--s2mel-strength", type=float, metavar="S",
                    help="how much of the --s2mel applies, 0 to 1: 0 speaks as the folder's s2mel.pth, 1 as the "
                         "merged export (default: the strength an adapter file was exported at, else 1)")
    v2.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"S2Mel flow-matching steps (default {DEFAULT_STEPS})")
    v2.add_argument("--cfg-rate", type=float, default=DEFAULT_CFG_RATE,
                    help=f"S2Mel classifier-free guidance (default {DEFAULT_CFG_RATE})")
    v25 = parser.add_argument_group("IndexTTS-2.5")
    v25.add_argument("--duration-factor", type=float, default=1.0,
                     help="speech length factor, 0 < f <= 10 (S2Mel length only; default 1)")
    v25.add_argument("--text-scheme", choices=("bytes", "merges", "translit"),
                     help="the 2.5 text scheme (default: the checkpoint's record, else bytes)")
    v25.add_argument("--adapter", dest="adapter_file", type=Path, metavar="ADAPTER.pth",
                     help="a LoRA adapter file (export --adapter-only) merged into the GPT")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    files.add_argument("--no-adapter", dest="adapter", action="store_false",
                       help="a LoRA checkpoint: speak with its base weights, without the adapters (default: merged)")
    return parser


V2_ONLY = ("w2v_bert", "emotion_reference", "emotion_vector")
V2_DEFAULTS = {"emotion_alpha": 1.0, "steps": DEFAULT_STEPS, "cfg_rate": DEFAULT_CFG_RATE,
               "segment_tokens": DEFAULT_SEGMENT_TOKENS}


FLAGS_OF_DESTS = {"adapter_file": "--adapter"}  # options whose dest is not their flag's name


def flag(name: str) -> str:
    return FLAGS_OF_DESTS.get(name) or "--" + name.replace("_", "-")


# Options only some generations take (their registry entries' ``speech.synthesis_options``), with their defaults.
GENERATION_OPTIONS = {"text_scheme": None, "adapter_file": None, "duration_factor": 1.0, "s2mel": None,
                      "s2mel_strength": None}


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations of the wrong generation (one line)."""
    from trainer.synthesis.errors import SynthesisError

    given = [name for name, default in GENERATION_OPTIONS.items() if getattr(args, name) != default]
    generation = None
    if given and args.model_dir is not None:
        from generations.registry import generation_of_folder

        generation = generation_of_folder(args.model_dir)
    foreign = [flag(name) for name in given if generation is None or name not in generation.speech.synthesis_options]
    if foreign:
        from generations.registry import GENERATIONS

        takers = " or ".join(entry.name for entry in GENERATIONS
                             if all(name in entry.speech.synthesis_options for name in given))
        raise SynthesisError(f"{', '.join(foreign)} need(s) an {takers or 'other'} --model-dir (its config.yaml "
                             "says which generation it is)")
    if args.model_dir is None:
        missing = [flag(name) for name in ("checkpoint", "config", "tokenizer") if getattr(args, name) is None]
        if missing:
            raise SynthesisError(f"the following arguments are required: {', '.join(missing)} (or --model-dir for "
                                 "IndexTTS2)")
        given = [flag(n) for n in V2_ONLY if getattr(args, n) is not None]
        given += [flag(n) for n, default in V2_DEFAULTS.items() if getattr(args, n) != default]
        if given:
            raise SynthesisError(f"{', '.join(given)} need(s) --model-dir (IndexTTS2 only)")
        return
    for name in ("config", "vocoder"):
        if getattr(args, name) is not None:
            raise SynthesisError(f"{flag(name)} is for IndexTTS 1.5: IndexTTS2 reads <model-dir>/config.yaml and "
                                 "its bigvgan/ folder")
    if not args.model_dir.is_dir():
        raise SynthesisError(f"--model-dir {args.model_dir}: folder not found")
    if args.reference.suffix.lower() == ".npy":
        raise SynthesisError(f"--reference {args.reference}: IndexTTS2 needs reference audio, not a mel .npy")


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
    from trainer.synthesis import SynthesisError

    check_flags(args)
    if not args.reference.is_file():
        raise SynthesisError(f"--reference {args.reference}: file not found")
    texts = read_texts(args)
    settings = decode_settings(args)
    from generations.spec import Capability

    generation = generation_of(args)
    refusal = generation.refusal(Capability.SYNTHESIZE)
    if refusal is not None or generation.speech.synthesize is None:
        raise SynthesisError(refusal or f"{generation.name} cannot synthesize")
    return generation.speech.synthesize(args, texts, settings)


def generation_of(args: argparse.Namespace) -> Any:
    """The registry entry that speaks: the --model-dir folder's generation, else the --config's."""
    from data_tools.config import load_config
    from generations.registry import GENERATIONS, generation_of_config, generation_of_folder
    from trainer.synthesis import SynthesisError

    if args.model_dir is not None:
        found = generation_of_folder(args.model_dir)
        if found is None:
            raise SynthesisError(f"--model-dir {args.model_dir}: no IndexTTS generation reads this folder "
                                 f"({', '.join(entry.name for entry in GENERATIONS)})")
        return found
    return generation_of_config(load_config(args.config))


def decode_settings(args: argparse.Namespace) -> Any:
    from trainer.synthesis import DecodeSettings, SynthesisError

    settings = DecodeSettings(
        mode=args.decode, num_beams=args.num_beams, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, repetition_penalty=args.repetition_penalty, length_penalty=args.length_penalty,
        seed=args.seed, max_codes=args.max_codes)
    problems = settings.problems()
    if problems:
        raise SynthesisError("; ".join(problems))
    return settings


def emotion_weights(text: str | None) -> tuple[float, ...] | None:
    from trainer.synthesis import SynthesisError

    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.replace(" ", "").split(","))
    except ValueError:
        raise SynthesisError(f"--emotion-vector {text!r}: give 8 comma-separated numbers") from None


def with_trained_s2mel(args: argparse.Namespace, synth: Any, device: Any, **model_kwargs: Any) -> None:
    """``--s2mel``: the synthesizer speaks through that S2Mel run checkpoint or adapter (merged, eval mode), at
    ``--s2mel-strength`` (:mod:`trainer.s2mel.strength`)."""
    from trainer.synthesis import SynthesisError

    strength = getattr(args, "s2mel_strength", None)
    if args.s2mel is None:
        if strength is not None:
            raise SynthesisError("--s2mel-strength applies to a trained S2Mel: give --s2mel too")
        return
    import dataclasses

    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.loading import load_checkpoint
    from trainer.s2mel.export import S2MelExportError, build_trained_s2mel, recorded_strength
    from trainer.s2mel.lora import S2MelLoRAError
    from trainer.s2mel.strength import at_strength, check_strength

    if not args.s2mel.is_file():
        raise SynthesisError(f"--s2mel {args.s2mel}: file not found")
    try:
        strength = (recorded_strength(load_checkpoint(args.s2mel, mmap=True)) if strength is None
                    else check_strength(strength, "--s2mel-strength"))
        model = build_trained_s2mel(args.s2mel, synth.nets.files.s2mel, synth.nets.config["s2mel"], **model_kwargs)
        model = at_strength(model, synth.nets.s2mel, strength)
    except (S2MelExportError, S2MelLoRAError, CheckpointError, ValueError) as exc:
        raise SynthesisError(f"--s2mel {args.s2mel}: {' '.join(str(exc).split())}") from None
    synth.nets = dataclasses.replace(synth.nets, s2mel=model.to(device))


def emotion_report(emotion: Any) -> dict[str, Any]:
    return {"reference": None if emotion.reference is None else str(emotion.reference), "alpha": emotion.alpha,
            "weights": None if emotion.weights is None else list(emotion.weights)}


def where(args: argparse.Namespace, index: int) -> str:
    return "--text" if args.text is not None else f"{args.texts_file}:{index + 1}"


def speak_all(args: argparse.Namespace, texts: list[str], speak: Any, header: dict[str, Any]) -> int:
    """Speak each text to its output path, print a line per file, and write the JSON report."""
    from tqdm import tqdm

    from trainer.synthesis import SynthesisError, write_wav

    paths = output_paths(args.out, len(texts), single=args.text is not None)
    report: list[dict[str, Any]] = []
    with tqdm(total=len(texts), desc="synthesizing", unit="text", file=sys.stderr, disable=None) as bar:
        for text, path in zip(texts, paths):
            result = speak(text)
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
    summary = {**header, "reference": str(args.reference), "audio_seconds": round(audio, 4),
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


def reference_input(path: Path) -> Any:
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

