"""What checkpoint evaluation costs: its wall time per checkpoint, and the training it slows beside it.

    python bench/eval_cost.py [--sentences 4] [--steps 60] [--save-interval 10] [--repeats 2]
                              [--hidden 64] [--device cpu] [--threads 1]

On a fresh demo workspace (tiny random IndexTTS-1.5 GPT and BigVGAN) with a random wav2vec2 CTC model and a
random WavLM x-vector model saved as local folders (loaded through the data tools, as a user's are):

1. Time per checkpoint: a short run's checkpoints are measured by ``python -m trainer.evaluate``'s
   Evaluator (``--sentences`` validation transcripts, one reference voice); the seconds each result
   records are split into synthesis, ASR and speaker model (median over the checkpoints).
2. Training beside it: the same training run (``--steps``, a save every ``--save-interval``) with and
   without ``--eval-at-saves``, alternated ``--repeats`` times, as ``python -m trainer.train`` processes on
   ``--threads`` thread(s) each (the evaluation child too, at a lower priority). The headline is training
   tokens/s with evaluation running / without (median of the train events, best run of each side; goal
   >= 0.9 on a machine with a spare core or GPU). On a machine whose cores other jobs keep busy, the
   evaluation competes with them and with training for the same cores: read the ratio with the load
   average printed beside it.
3. The seeds' cost: one checkpoint measured with 1 seed and with ``--seeds`` seeds (every text in every
   voice once per seed: the items the paired intervals need), side by side, and the time of the paired
   bootstrap (2000 resamples) that compares two results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from tests.speech_model_factory import WAV2VEC2_CONV, build_ctc_model, build_xvector_model  # noqa: E402
from tests.trainer_helpers import subset_manifest  # noqa: E402
from trainer.demo import build_demo  # noqa: E402

GOAL = 0.9
TRAIN_TIMEOUT_S = 900


def _train_argv(ws, data: dict[str, Path], out: Path, args: argparse.Namespace, evaluate: bool,
                models: dict[str, Path], voice: Path) -> list[str]:
    argv = [sys.executable, "-m", "trainer.train", "--train-manifest", str(data["train"]), "--val-manifest",
            str(data["val"]), "--tokenizer", str(ws.extended_tokenizer), "--config", str(ws.config),
            "--base-checkpoint", str(ws.base_checkpoint), "--output-dir", str(out), "--max-steps", str(args.steps),
            "--batch-size", "4", "--learning-rate", "1e-3", "--warmup-steps", "5", "--log-interval", "5",
            "--val-interval", "100000", "--save-interval", str(args.save_interval),
            "--keep-checkpoints", str(args.steps // args.save_interval + 1),
            "--num-workers", "0", "--device", "cpu", "--amp", "off", "--vocoder", str(ws.vocoder),
            "--sample-every", "1000000", "--eval-asr", str(models["asr"]), "--eval-speaker-model",
            str(models["speaker"]), "--eval-sentences", str(args.sentences), "--eval-reference", str(voice),
            "--no-eval-base", "--eval-device", args.device, "--eval-threads", str(args.threads)]
    return argv + (["--eval-at-saves"] if evaluate else [])


def _events(out: Path, kind: str) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == kind]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--save-interval", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64, help="width of the random CTC model")
    parser.add_argument("--device", default="cpu", help="evaluation device (cpu, cuda)")
    parser.add_argument("--threads", type=int, default=1, help="threads of training and of evaluation, each")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the evaluation set (section 3)")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp_name:
        tmp = Path(tmp_name)
        ws = build_demo(tmp / "demo")
        data = {"train": subset_manifest(ws.train_manifest, tmp / "train.jsonl", 64),
                "val": subset_manifest(ws.val_manifest, tmp / "val.jsonl", max(4, args.sentences))}
        models = {"asr": build_ctc_model(tmp / "ctc", hidden=args.hidden, conv=WAV2VEC2_CONV),
                  "speaker": build_xvector_model(tmp / "xvector")}
        voice = tmp / "voice.wav"
        import soundfile

        t = np.arange(3 * 24_000) / 24_000
        soundfile.write(voice, (0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), 24_000)

        # -- 2. training with and without evaluation beside it (first: it also leaves checkpoints for 1.)
        speeds: dict[str, list[float]] = {"plain": [], "evaluated": []}
        walls: dict[str, list[float]] = {"plain": [], "evaluated": []}
        last_evaluated: Path | None = None
        for repeat in range(args.repeats):
            for way in ("plain", "evaluated"):
                out = tmp / f"{way}{repeat}"
                started = time.perf_counter()
                done = subprocess.run(_train_argv(ws, data, out, args, way == "evaluated", models, voice), cwd=REPO,
                                      env=env, capture_output=True, text=True, timeout=TRAIN_TIMEOUT_S)
                if done.returncode != 0:
                    print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
                    return 1
                walls[way].append(time.perf_counter() - started)
                rates = [e["tokens_per_s"] for e in _events(out, "train") if e.get("tokens_per_s")]
                speeds[way].append(statistics.median(rates))
                if way == "evaluated":
                    last_evaluated = out
                    measured = [e["step"] for e in _events(out, "eval")]
                    print(f"run {repeat + 1} with evaluation: {len(measured)} save(s) measured {measured}")
        plain, evaluated = max(speeds["plain"]), max(speeds["evaluated"])

        # -- 1. evaluation time per checkpoint, split
        assert last_evaluated is not None
        results = [e for e in _events(last_evaluated, "eval") if e.get("model") == "checkpoint"]
        split = {part: statistics.median(e["seconds"][part] for e in results)
                 for part in ("synthesis", "asr", "speaker", "total")}

        # -- 3. the seeds' cost
        seed_seconds, bootstrap_s = _seeds_cost(last_evaluated, args.seeds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"evaluation per checkpoint ({args.sentences} sentence(s) x 1 voice, median of {len(results)}): "
          + ", ".join(f"{part} {seconds:.2f} s" for part, seconds in split.items()))
    print(f"training tokens/s without evaluation {speeds['plain']}, with {speeds['evaluated']} "
          f"(wall {[round(w, 1) for w in walls['plain']]} vs {[round(w, 1) for w in walls['evaluated']]} s, "
          f"the latter waiting for the last evaluation); load average {load:.1f} on {os.cpu_count()} cores")
    headline("eval_cost", "evaluation wall time per checkpoint", split["total"], "s",
             note=f"synthesis {split['synthesis']:.2f} s, ASR {split['asr']:.2f} s, speaker {split['speaker']:.2f} s; "
                  f"{args.sentences} sentences x 1 voice, demo model, {args.device}")
    ratio = evaluated / plain
    headline("eval_cost", "training tokens/s with evaluation beside it / without", ratio, "x", f">= {GOAL}",
             ratio >= GOAL, f"{evaluated:.0f} vs {plain:.0f} tokens/s, {args.threads} thread(s) each, eval on "
                            f"{args.device}, load average {load:.1f} on {os.cpu_count()} cores")
    headline("eval_cost", f"evaluation wall time per checkpoint, {args.seeds} seeds / 1 seed",
             seed_seconds[args.seeds] / seed_seconds[1], "x",
             note=f"{seed_seconds[1]:.2f} s with 1 seed, {seed_seconds[args.seeds]:.2f} s with {args.seeds}; paired "
                  f"bootstrap of two results {bootstrap_s * 1000:.0f} ms")
    return 0


def _seeds_cost(run: Path, seeds: int) -> tuple[dict[int, float], float]:
    """Seconds to measure one checkpoint with 1 seed and with ``seeds``; seconds of one paired bootstrap."""
    from trainer.evaluate import build_parser, evaluator_for
    from trainer.evaluation.eval_set import EVAL_SEED
    from trainer.evaluation.stats import compare

    evaluator = evaluator_for(build_parser().parse_args([str(run)]), say=lambda _line: None)
    checkpoint = sorted(run.glob("model_step*.pth"))[-1]
    seconds: dict[int, float] = {}
    measured = {}
    for count in dict.fromkeys((1, seeds)):
        evaluator.eval_set.seeds = [EVAL_SEED + k for k in range(count)]
        started = time.perf_counter()
        measured[count] = evaluator.measure(checkpoint)
        seconds[count] = time.perf_counter() - started
    started = time.perf_counter()
    compare(measured[seeds], measured[seeds], "cer")
    return seconds, time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
