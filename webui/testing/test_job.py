"""The Test tab's synthesis job, without Gradio: start both sides, poll them, stop them.

Each side runs as its own supervised job (``python -m trainer.synthesize ... --json report.json``, jobs ``test_a``
/ ``test_b``), never in the UI process. ``jobs/test/current.json`` records what was asked (the text, the reference
voice, each side's model and run id) so a reload, or another tab, shows the same results; ``results/<time>/`` holds
the reference copy and each side's audio and report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.plots import badge_html, message_html
from webui.testing.listen import (
    DEFAULT_V2_STEPS,
    DEVICES,
    ListenError,
    SideResult,
    audio_bytes,
    clean_text,
    decode_choice,
    emotion_choice,
    new_results_dir,
    resolve_model,
    side_result,
    stage_reference,
    synthesis_argv,
    typed_path,
)
from webui.testing.listen_s2mel import STOCK, with_s2mel

if TYPE_CHECKING:
    from webui.context import StudioContext


SIDES = ("A", "B")
TEST_JOB = "test"  # jobs/test/: current.json and results/<time>/ (reference copy, A.wav, A.json, ...)
CURRENT = "current.json"
NONE = ""
POLL_S = 1.0
TURNS = "job-turns:test-tab"  # Speak and the poll take turns: a late tick must not switch the timer off
LOG_TAIL_BYTES = 6 * 1024


def side_job(side: str) -> str:
    return f"test_{side.lower()}"


@dataclass
class SideView:
    status: str  # HTML: badge + one line
    wav: Path | None  # the result to play
    detail: str  # notes (e.g. no stop code), the model
    running: bool = False

    @property
    def audio(self) -> bytes | None:
        return audio_bytes(self.wav)


@dataclass
class TestView:
    message: str
    sides: dict[str, SideView]
    command: str
    log: str

    @property
    def running(self) -> bool:
        return any(view.running for view in self.sides.values())


def _current_path(ctx: StudioContext) -> Path:
    return ctx.job_dir(TEST_JOB) / CURRENT


def _read_current(ctx: StudioContext) -> dict[str, Any]:
    try:
        data = json.loads(_current_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_current(ctx: StudioContext, current: dict[str, Any]) -> None:
    from data_tools.fileio import atomic_write_text

    path = _current_path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(current, indent=2, ensure_ascii=False) + "\n")


_TONES = {"finished": ("DONE", "ok"), "running": ("RUNNING", "info"), "stopped": ("STOPPED", "warn"),
          "failed": ("FAILED", "error"), "killed": ("FAILED", "error")}


def _side_view(result: SideResult, model: str) -> SideView:
    label, tone = _TONES.get(result.state, (result.state.upper(), "info"))
    notes = [f"model: {model}"] if model else []
    if result.hit_stop is False:
        notes.append("no stop code: the model ran to its code limit (untrained models often do)")
    notes += [note for note in result.notes if "no stop code" not in note]
    return SideView(status=badge_html(label, result.message, tone), wav=result.wav,
                    detail="\n".join(notes), running=result.running)


def poll_test(ctx: StudioContext, message: str = "") -> TestView:
    """Both sides as they stand now (also after a page reload or a UI restart)."""
    current = _read_current(ctx)
    recorded = current.get("sides") if isinstance(current.get("sides"), dict) else {}
    sides: dict[str, SideView] = {}
    commands, logs = [], []
    for side in SIDES:
        entry = recorded.get(side) if isinstance(recorded.get(side), dict) else None
        if entry is None:
            sides[side] = SideView(status="", wav=None, detail="not run" if recorded else "")
            continue
        model = str(entry.get("model") or "")
        if entry.get("error"):
            sides[side] = SideView(status=badge_html("CANNOT RUN", str(entry["error"]), "error"), wav=None,
                                   detail=f"model: {model}" if model else "")
            continue
        supervisor = ctx.supervisor(ctx.job_dir(side_job(side)))
        status = supervisor.poll()
        if status.run_id != entry.get("run_id"):
            sides[side] = SideView(status=message_html("this side's job was replaced by another run", "warn"),
                                   wav=None, detail="")
            continue
        sides[side] = _side_view(side_result(status), model)
        commands.append(f"# {side}\n{status.command}")
        logs.append(f"# {side}\n{supervisor.log_tail(LOG_TAIL_BYTES).strip()}")
    return TestView(message=message, sides=sides, command="\n".join(commands), log="\n\n".join(logs))


def start_test(ctx: StudioContext, key_a: str | None, key_b: str | None, text: str | None,
               reference: str | None, upload: str | None, mode: str | None, num_beams: float | None,
               temperature: float | None, top_k: float | None, top_p: float | None, seed: float | None,
               vocoder: str | None, device: str | None, v2_steps: float | None = DEFAULT_V2_STEPS,
               emotion_reference: str | None = None, emotion_alpha: float | None = 1.0,
               duration_factor: float | None = 1.0, s2mel_a: str | None = STOCK,
               s2mel_b: str | None = STOCK, s2mel_strength: float | None = 1.0) -> TestView:
    """Check the form, then start one synthesis job per picked side (in parallel); ``s2mel_*``: the trained S2Mel
    each side speaks through (STOCK: its download folder's), at ``s2mel_strength`` (0 base .. 1 all)."""
    from webui.jobs.supervisor import RunAlreadyActive

    keys = {"A": (key_a or "").strip() or None, "B": (key_b or "").strip() or None}
    try:
        if poll_test(ctx).running:
            raise ListenError("a synthesis is still running: wait for it or press Stop")
        if keys["A"] is None and keys["B"] is None:
            raise ListenError("pick a model for A (and B to compare)")
        spoken = clean_text(text)
        decode = decode_choice(mode, num_beams, temperature, top_k, top_p, seed)
        emotion = emotion_choice(v2_steps, emotion_reference, emotion_alpha, duration_factor)
        if emotion.reference is not None:
            emotion_source = emotion.reference if emotion.reference.is_absolute() else ctx.workspace / emotion.reference
            if not emotion_source.is_file():
                raise ListenError(f"emotion reference audio not found: {emotion_source}")
        device = device or "auto"
        if device not in DEVICES and not device.startswith("cuda:"):
            raise ListenError(f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")
        source_text = (upload or "").strip() or (reference or "").strip()
        if not source_text:
            raise ListenError("choose a reference voice or upload one")
        source = typed_path(source_text, "reference voice")
        source = source if source.is_absolute() else ctx.workspace / source
        if not source.is_file():
            raise ListenError(f"reference audio not found: {source}")
        folder = new_results_dir(ctx.job_dir(TEST_JOB))
        staged = stage_reference(source, folder)
        if emotion.reference is not None:
            emotion = replace(emotion, reference=stage_reference(emotion_source, folder, "emotion_reference"))
    except (ListenError, OSError) as exc:
        return poll_test(ctx, message_html(str(exc)))
    current: dict[str, Any] = {"folder": str(folder), "text": spoken, "reference": str(source), "sides": {}}
    started = []
    s2mels = {"A": s2mel_a, "B": s2mel_b}
    for side, key in keys.items():
        if key is None:
            continue
        entry: dict[str, Any] = {"key": key}
        try:
            spec = resolve_model(key, ctx.workspace, vocoder)
            entry["model"] = spec.label
            spec = with_s2mel(spec, s2mels[side], ctx.workspace, s2mel_strength)
            entry["model"] = spec.label
            if spec.problem:
                raise ListenError(spec.problem)
            argv = synthesis_argv(ctx.python, spec, spoken, staged, folder / f"{side}.wav", folder / f"{side}.json",
                                  decode, device, emotion)
            entry["run_id"] = ctx.run_background(side_job(side), argv).poll().run_id
            started.append(side)
        except (ListenError, RunAlreadyActive, RuntimeError, OSError) as exc:
            entry["error"] = " ".join(str(exc).split())
        current["sides"][side] = entry
    _write_current(ctx, current)
    if started:
        message = badge_html("STARTED", f"synthesizing with {' and '.join(started)} ({decode.mode} decoding)", "info")
    else:
        message = message_html("nothing started: see each side")
    return poll_test(ctx, message)


def stop_test(ctx: StudioContext) -> TestView:
    """Stop both sides' jobs (SIGINT, then escalating)."""
    problems = []
    for side in SIDES:
        try:
            ctx.supervisor(ctx.job_dir(side_job(side))).stop(grace_s=5.0, term_s=5.0, kill_s=5.0)
        except RuntimeError as exc:
            problems.append(f"{side}: {exc}")
    return poll_test(ctx, message_html("; ".join(problems)) if problems else "")
