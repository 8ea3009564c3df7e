"""The Test tab's synthesis, without Gradio: models to compare, the synthesis command, and its result.

The Test tab (``webui.testing.tab_testing``) only lays out what these functions return. Reference voices live in
``webui.testing.reference_voices``; a run's training samples in ``webui.training.sample_saves``. Synthesis itself runs as
a supervised subprocess
(``python -m trainer.synthesize``), never in the UI process: this module builds its argv and reads the
JSON report it writes.

- the model pickers and what a pick resolves to live in :mod:`webui.testing.listen_models` (re-exported here);
  IndexTTS2 / 2.5 sides take the S2Mel steps and emotion (:class:`EmotionChoice`) and, optionally, a trained
  S2Mel (:mod:`webui.testing.listen_s2mel`).
- :func:`synthesis_argv` builds the exact command; :func:`side_result` reads the job's outcome.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webui.testing.listen_models import (  # noqa: F401 (names callers import from here)
    ADAPTER_OFF_PREFIX,
    BASE_PREFIX,
    TRAIN_CONFIG,
    ListenError,
    ModelChoice,
    base_choice,
    base_configs,
    default_pair,
    model_choices,
    one_line,
    run_config,
    run_dirs,
    run_globs,
    test_facts,
    trains_s2mel,
    typed_path,
)
from webui.testing.model_spec import ModelSpec, resolve_model  # noqa: F401 (callers import them from here)

DEFAULT_V2_STEPS = 25  # S2Mel flow-matching steps (inference's default)
MAX_DURATION_FACTOR = 10.0  # trainer.synthesis.pipeline_v25.MelSettings25's bound
MAX_PLAY_BYTES = 64 * 1024 * 1024  # a player gets at most this much audio (a sample is a few hundred KB)
DECODE_MODES = ("greedy", "beam", "sample")
DEVICES = ("auto", "cpu", "cuda")
KEEP_RESULTS = 10
DEFAULT_TEXT = "ሰላም ለዓለም። ዛሬ አየሩ ጥሩ ነው።"


# -- the command ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeChoice:
    mode: str = "beam"
    num_beams: int = 3
    temperature: float = 1.0
    top_k: int = 30
    top_p: float = 0.8
    seed: int = 0

    def problems(self) -> list[str]:
        from trainer.synthesis.generation import DecodeSettings

        return DecodeSettings(mode=self.mode, num_beams=self.num_beams, temperature=self.temperature,  # type: ignore[arg-type]
                              top_k=self.top_k, top_p=self.top_p, seed=self.seed).problems()

    def flags(self) -> list[str]:
        """The decoding flags of ``trainer.synthesize`` for this mode (others keep the CLI's defaults)."""
        flags = ["--decode", self.mode]
        if self.mode in ("beam", "sample"):
            flags += ["--num-beams", str(self.num_beams)]
        if self.mode == "sample":
            flags += ["--temperature", f"{self.temperature:g}", "--top-k", str(self.top_k), "--top-p",
                      f"{self.top_p:g}", "--seed", str(self.seed)]
        return flags


def decode_choice(mode: str | None, num_beams: float | None, temperature: float | None, top_k: float | None,
                  top_p: float | None, seed: float | None) -> DecodeChoice:
    """Form values -> DecodeChoice; raises ListenError naming what is wrong."""
    try:
        choice = DecodeChoice(mode=str(mode or "beam"), num_beams=int(num_beams if num_beams is not None else 3),
                              temperature=float(temperature if temperature is not None else 1.0),
                              top_k=int(top_k if top_k is not None else 30),
                              top_p=float(top_p if top_p is not None else 0.8), seed=int(seed or 0))
    except (TypeError, ValueError) as exc:
        raise ListenError(f"decoding settings: {one_line(exc)}") from None
    problems = choice.problems()
    if problems:
        raise ListenError("decoding settings: " + "; ".join(problems))
    return choice


@dataclass(frozen=True)
class EmotionChoice:
    """IndexTTS2 and 2.5: the S2Mel steps and the emotion (the speaker's own, or a reference blended by alpha);
    IndexTTS-2.5 only: the duration factor (the speech's length; 1 = upstream's)."""

    steps: int = DEFAULT_V2_STEPS
    reference: Path | None = None  # staged emotion reference audio (None: the voice's own emotion)
    alpha: float = 1.0
    duration_factor: float = 1.0

    def flags(self) -> list[str]:
        flags = ["--steps", str(self.steps)]
        if self.reference is not None:
            flags += ["--emotion-reference", str(self.reference), "--emotion-alpha", f"{self.alpha:g}"]
        return flags


def emotion_choice(steps: float | None, reference: str | Path | None, alpha: float | None,
                   duration_factor: float | None = None) -> EmotionChoice:
    """Form values -> EmotionChoice (reference not yet staged); raises ListenError naming what is wrong."""
    try:
        count = int(steps if steps is not None else DEFAULT_V2_STEPS)
        weight = float(alpha if alpha is not None else 1.0)
        factor = float(duration_factor if duration_factor is not None else 1.0)
    except (TypeError, ValueError) as exc:
        raise ListenError(f"IndexTTS2 settings: {one_line(exc)}") from None
    if not 0.0 < factor <= MAX_DURATION_FACTOR:
        raise ListenError(f"IndexTTS-2.5 settings: the duration factor must be in (0, {MAX_DURATION_FACTOR:g}], "
                          f"got {factor:g}")
    if count < 1:
        raise ListenError(f"IndexTTS2 settings: S2Mel steps must be >= 1, got {count}")
    if not 0.0 <= weight <= 1.0:
        raise ListenError(f"IndexTTS2 settings: emotion alpha must be in [0, 1], got {weight:g}")
    text = str(reference or "").strip()
    return EmotionChoice(count, typed_path(text, "emotion reference") if text else None, weight, factor)


def clean_text(text: str | None) -> str:
    """The text to speak: lines joined by spaces (one utterance per side); raises ListenError when empty."""
    joined = " ".join(line.strip() for line in (text or "").splitlines() if line.strip())
    if not joined:
        raise ListenError("type a text to speak")
    return joined


def synthesis_argv(python: str, spec: ModelSpec, text: str, reference: Path, out: Path, report: Path,
                   decode: DecodeChoice, device: str = "auto", emotion: EmotionChoice | None = None) -> list[str]:
    """The exact ``python -m trainer.synthesize`` command for one side (``emotion``: IndexTTS2 only)."""
    facts = test_facts(spec.version)
    if facts.speaks_through_folder:
        assert spec.model_dir is not None
        argv = [python, "-m", "trainer.synthesize", "--model-dir", str(spec.model_dir), "--checkpoint",
                str(spec.checkpoint), "--tokenizer", str(spec.tokenizer)]
        argv += ["--w2v-bert", spec.w2v_bert] if spec.w2v_bert else []
        if spec.s2mel is not None:  # the strength always: an adapter file's recorded one does not override the tab
            argv += ["--s2mel", str(spec.s2mel), "--s2mel-strength", f"{spec.s2mel_strength:g}"]
    else:
        argv = [python, "-m", "trainer.synthesize", "--checkpoint", str(spec.checkpoint), "--config",
                str(spec.config), "--tokenizer", str(spec.tokenizer)]
        if spec.vocoder is not None:
            argv += ["--vocoder", str(spec.vocoder)]
    if not spec.adapter:
        argv.append("--no-adapter")
    argv += ["--reference", str(reference), "--text", text, "--out", str(out), "--json", str(report),
             *decode.flags()]
    if facts.speaks_through_folder:
        argv += (emotion or EmotionChoice()).flags()
    if "duration_factor" in _synthesis_options(spec.version):
        argv += ["--duration-factor", f"{(emotion or EmotionChoice()).duration_factor:g}"]
    return [*argv, "--device", device]


def _synthesis_options(version: str) -> frozenset[str]:
    from generations.registry import by_id

    try:
        return by_id(version).speech.synthesis_options
    except KeyError:
        return frozenset()


def new_results_dir(jobs_root: Path, keep: int = KEEP_RESULTS) -> Path:
    """A fresh ``<jobs_root>/results/<time>`` folder; the oldest beyond ``keep`` are removed."""
    root = jobs_root / "results"
    root.mkdir(parents=True, exist_ok=True)
    while True:  # time to the nanosecond, fixed width: names sort in creation order
        now = time.time_ns()
        folder = root / (time.strftime("%Y%m%d_%H%M%S", time.localtime(now / 1e9)) + f"_{now % 10**9:09d}")
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    old = sorted((p for p in root.iterdir() if p.is_dir() and p != folder), key=lambda p: p.name)
    for stale in old[:max(0, len(old) - (keep - 1))]:
        shutil.rmtree(stale, ignore_errors=True)
    return folder


def stage_reference(source: Path, folder: Path, name: str = "reference") -> Path:
    """Copy the chosen reference into the job's folder, so the job never depends on the upload cache."""
    if not source.is_file():
        raise ListenError(f"{name.replace('_', ' ')} audio not found: {source}")
    target = folder / f"{name}{source.suffix.lower() or '.wav'}"
    shutil.copyfile(source, target)
    return target


# -- the job's result -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SideResult:
    """One side's synthesis as the tab shows it."""

    state: str  # idle | running | finished | failed | stopped | killed
    message: str  # one line
    wav: Path | None = None
    audio_seconds: float | None = None
    seconds: float | None = None
    real_time_factor: float | None = None
    sample_rate: int | None = None
    hit_stop: bool | None = None
    notes: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return self.state == "running"


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value after ``flag`` in an argv (None when absent)."""
    for index, item in enumerate(argv[:-1]):
        if item == flag:
            return argv[index + 1]
    return None


def read_report(path: Path) -> dict[str, Any]:
    """The synthesis CLI's ``--json`` report; raises ListenError when missing or not its shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ListenError(f"no report at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ListenError(f"unreadable report {path}: {one_line(exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list) or not data["items"]:
        raise ListenError(f"report {path} lists no audio")
    return data


def _wav_rate(path: Path) -> int | None:
    import soundfile

    try:
        return int(soundfile.info(str(path)).samplerate)
    except (RuntimeError, OSError, ValueError):
        return None


def _error_line(status: Any) -> str:
    summary = str(getattr(status, "summary", "") or "")
    failure = getattr(status, "failure", None)
    detail = getattr(failure, "detail", "") if failure is not None else ""
    line = detail or summary or "failed"
    line = re.sub(r"^error:\s*", "", one_line(line))
    code = getattr(status, "exit_code", None)
    return f"{line} (exit {code})" if code is not None and f"exit {code}" not in line else line


def side_result(status: Any) -> SideResult:
    """Read one side's job (a supervisor RunStatus, duck-typed) into what the tab shows."""
    state = str(getattr(status, "state", "idle"))
    if state == "idle":
        return SideResult(state, "not run yet")
    if state == "running":
        return SideResult(state, "synthesizing…")
    if state != "finished":
        return SideResult(state, _error_line(status) if state in ("failed", "killed") else f"{state}")
    report_path = flag_value(tuple(getattr(status, "argv", ()) or ()), "--json")
    if report_path is None:
        return SideResult("failed", "the job's command has no --json report")
    try:
        report = read_report(Path(report_path))
    except ListenError as exc:
        return SideResult("failed", str(exc))
    item = report["items"][0]
    wav = Path(str(item.get("out", "")))
    if not wav.is_file():
        return SideResult("failed", f"the audio file is gone: {wav}")
    audio = float(item.get("audio_seconds") or 0.0)
    taken = float(item.get("seconds") or 0.0)
    rtf = item.get("real_time_factor")
    rate = _wav_rate(wav)
    message = f"{audio:.2f} s of audio in {taken:.2f} s"
    message += f" · real-time factor {rtf:.3f}" if isinstance(rtf, (int, float)) else ""
    message += f" · {rate} Hz" if rate else ""
    message += f" · on {report.get('device')}" if report.get("device") else ""
    return SideResult("finished", message, wav=wav, audio_seconds=audio, seconds=taken,
                      real_time_factor=float(rtf) if isinstance(rtf, (int, float)) else None, sample_rate=rate,
                      hit_stop=bool(item.get("hit_stop")), notes=tuple(str(n) for n in item.get("notes") or ()))


def audio_bytes(path: Path | None) -> bytes | None:
    """The file's bytes for a player (served as they are: the header's rate, 24 or 22.05 kHz, is kept); None when
    unusable."""
    if path is None:
        return None
    try:
        if path.stat().st_size > MAX_PLAY_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None
