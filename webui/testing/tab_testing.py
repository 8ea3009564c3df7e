"""The Test tab: hear two models side by side (A | B) speak the same text with the same voice and settings.

Pick any base model or checkpoint of the workspace's runs for each side, type a text (Amharic works;
paste is fine), choose a reference voice (a generated stand-in, audio under ``references/``, a validation
prompt that is an audio file, or an upload), and decoding settings; IndexTTS2 and IndexTTS-2.5 models also take the
S2Mel steps and an emotion reference blended by alpha, IndexTTS-2.5 the duration factor (IndexTTS-1.5 sides
ignore them), and each IndexTTS2 / 2.5 side a trained S2Mel (an S2Mel run's checkpoint or an exported adapter;
the same GPT with the stock S2Mel on A and the trained one on B is the GPT-only vs GPT + S2Mel comparison). Each side runs as its own supervised
job (``python -m trainer.synthesize ... --json report.json``, jobs ``test_a`` / ``test_b``), never in the UI
process; the players show the result with its length and real-time factor, or one line saying why not.

All rules (which files go with a checkpoint, the command, reading the report) live in ``webui.testing.listen``,
the reference voices in ``webui.testing.reference_voices``, the form and players' layout in ``webui.testing.tab_testing_layout``;
callbacks here are plain functions over the context, ``build(ctx)`` wires them.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.plots import badge_html, message_html
from webui.testing.listen import (
    BASE_PREFIX,
    DEFAULT_V2_STEPS,
    DEVICES,
    ListenError,
    ModelChoice,
    SideResult,
    audio_bytes,
    clean_text,
    decode_choice,
    default_pair,
    emotion_choice,
    model_choices,
    new_results_dir,
    resolve_model,
    side_result,
    stage_reference,
    synthesis_argv,
    typed_path,
)
from webui.testing.listen_exports import newest_of_project
from webui.testing.listen_s2mel import STOCK, picker_entries, with_s2mel
from webui.testing.s2mel_scores_view import scores_html as s2mel_scores_html
from webui.testing.tab_testing_layout import form_inputs
from webui.testing.tab_testing_layout import players as layout_players

if TYPE_CHECKING:
    from trainer.project import Project
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
               s2mel_b: str | None = STOCK) -> TestView:
    """Check the form, then start one synthesis job per picked side (in parallel); ``s2mel_*``: the trained S2Mel
    each side speaks through (STOCK: its download folder's)."""
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
            spec = with_s2mel(spec, s2mels[side], ctx.workspace)
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


def describe_pick(key: str | None, workspace: Path, vocoder: str | None, s2mel: str | None = STOCK) -> str:
    """One line under a model picker: the files it will use (its S2Mel too), or why it cannot be spoken with."""
    if not (key or "").strip():
        return badge_html("NOT USED", "pick a model to compare", "info")
    try:
        spec = with_s2mel(resolve_model(key, workspace, vocoder), s2mel, workspace)
    except ListenError as exc:
        return badge_html("CANNOT SPEAK", str(exc), "error")
    if spec.problem:
        return badge_html("CANNOT SPEAK", spec.problem, "error")
    return badge_html("READY", spec.describe(workspace), "ok") + _scores_html(spec.checkpoint) + s2mel_scores_html(
        spec.s2mel)


def _scores_html(checkpoint: Path) -> str:
    """The checkpoint's evaluation scores (python -m trainer.evaluate), when it was measured."""
    from trainer.evaluation.results import scores_line, scores_of

    result = scores_of(checkpoint)
    if result is None:
        return ""
    return ('<div class="test-scores" data-cer="{cer}">evaluation of step {step} on its run\'s set: {line}</div>'
            .format(cer=html.escape(str(result.get("cer"))), step=int(result.get("step") or 0),
                    line=html.escape(scores_line(result))))


# -- layout -----------------------------------------------------------------------------------------------


def _view_outputs(view: TestView, shown: list[str] | None = None) -> tuple[Any, ...]:
    """Values for the tab's outputs; a player whose file is already shown gets no new audio (gr.skip)."""
    shown = shown if isinstance(shown, list) and len(shown) == len(SIDES) else [None] * len(SIDES)
    values: list[Any] = [view.message]
    now: list[str | None] = []
    for side, before in zip(SIDES, shown):
        side_view = view.sides[side]
        wav = str(side_view.wav) if side_view.wav is not None else None
        values += [side_view.status, gr.skip() if wav is not None and wav == before else side_view.audio,
                   side_view.detail]
        now.append(wav)
    return (*values, view.command, view.log, now)


def _same_file(key: str, path: Path) -> bool:
    try:
        return Path(key.removeprefix(BASE_PREFIX)).resolve() == path.resolve()
    except (OSError, ValueError):
        return False


def project_pair(project: Project, choices: list[ModelChoice]) -> tuple[str | None, str | None]:
    """(A, B) for a project: its base model, and its newest model: the newer of its newest export and its newest
    run's latest checkpoint (else the newest checkpoint of its generation the pickers list)."""
    config = project.model_path / "config.yaml"
    base = next((c.key for c in choices if c.kind == "base" and _same_file(c.key, config)),
                BASE_PREFIX + str(config) if config.is_file() else None)
    newest = newest_of_project(project)
    if newest is not None:
        return base, next((c.key for c in choices if _same_file(c.key, newest)), str(newest))
    own = [c for c in choices if c.version == project.generation]
    trained = next((c.key for c in own if c.kind == "latest"), next((c.key for c in own if c.kind != "base"), None))
    return base, trained


def _pickers(workspace: Path, project: Project | None = None) -> SimpleNamespace:
    choices = model_choices(workspace)
    first_a, first_b = project_pair(project, choices) if project is not None else default_pair(choices)
    listed = [(c.label, c.key) for c in choices]
    with gr.Row(equal_height=True):
        model_a = gr.Dropdown(choices=listed, value=first_a, allow_custom_value=True, scale=5, label="Model A",
                              elem_id="test-model-a", info="a base model or any checkpoint (or type a path)")
        model_b = gr.Dropdown(choices=[("(none)", NONE), *listed], value=first_b or NONE, allow_custom_value=True,
                              scale=5, label="Model B", elem_id="test-model-b", info="(none): A only")
        refresh = gr.Button("Refresh models", scale=1, elem_id="test-refresh-models")
    decoders = picker_entries(workspace)
    with gr.Row(equal_height=True):  # GPT only vs GPT + S2Mel: the same model on both sides, a trained S2Mel on B
        s2mel_a, s2mel_b = (gr.Dropdown(choices=decoders, value=STOCK, scale=5, label=f"S2Mel {side} (IndexTTS2 / 2.5)",
                                        elem_id=f"test-s2mel-{side.lower()}", info="a trained S2Mel (an S2Mel run's "
                                        "checkpoint or exported adapter) or the download folder's own")
                            for side in SIDES)
    with gr.Row():
        files_a = gr.HTML(value=lambda: describe_pick(first_a, workspace, ""), elem_id="test-files-a")
        files_b = gr.HTML(value=lambda: describe_pick(first_b, workspace, ""), elem_id="test-files-b")
    followed = gr.State(first_b)  # the project's newest model B last moved to (it moves again to a newer one)
    return SimpleNamespace(model_a=model_a, model_b=model_b, refresh=refresh, files_a=files_a, files_b=files_b,
                           s2mel_a=s2mel_a, s2mel_b=s2mel_b, followed=followed)


def _wire(ctx: StudioContext, picks: SimpleNamespace, inputs: SimpleNamespace, players: SimpleNamespace,
          timer: gr.Timer) -> None:
    workspace, outputs, message = ctx.workspace, players.outputs, players.outputs[0]

    def on_start(*values: Any):
        view = start_test(ctx, *values)
        return (*_view_outputs(view), gr.Timer(active=True))

    def on_stop(held: list[str] | None):  # the next tick switches the timer off
        return _view_outputs(stop_test(ctx), held)

    def on_tick(current_message: str, held: list[str] | None):
        view = poll_test(ctx, current_message)
        return (*_view_outputs(view, held), gr.Timer(active=view.running))

    def on_refresh(a: str, b: str, s2mel_a: str, s2mel_b: str):
        listed_now = [(c.label, c.key) for c in model_choices(workspace)]
        decoders = picker_entries(workspace)
        keep = {value for _, value in decoders}
        return (gr.Dropdown(choices=listed_now, value=a), gr.Dropdown(choices=[("(none)", NONE), *listed_now], value=b),
                *(gr.Dropdown(choices=decoders, value=v if v in keep else STOCK) for v in (s2mel_a, s2mel_b)))

    i = inputs
    players.start.click(on_start, inputs=[picks.model_a, picks.model_b, i.text, i.reference, i.upload, i.mode,
                                          i.num_beams, i.temperature, i.top_k, i.top_p, i.seed, i.vocoder, i.device,
                                          i.v2_steps, i.emotion_reference, i.emotion_alpha, i.duration_factor,
                                          picks.s2mel_a, picks.s2mel_b],
                        outputs=[*outputs, timer], concurrency_id=TURNS, concurrency_limit=1)
    players.stop.click(on_stop, inputs=players.shown, outputs=outputs)
    timer.tick(on_tick, inputs=[message, players.shown], outputs=[*outputs, timer], show_progress="hidden",
               concurrency_id=TURNS, concurrency_limit=1)
    decoders = [picks.s2mel_a, picks.s2mel_b]
    picks.refresh.click(on_refresh, inputs=[picks.model_a, picks.model_b, *decoders],
                        outputs=[picks.model_a, picks.model_b, *decoders])
    for model, decoder, files in ((picks.model_a, picks.s2mel_a, picks.files_a),
                                  (picks.model_b, picks.s2mel_b, picks.files_b)):
        for changed in (model, decoder):
            changed.change(lambda key, voc, s2mel: describe_pick(key, workspace, voc, s2mel),
                           inputs=[model, i.vocoder, decoder], outputs=files)
    i.vocoder.change(lambda a, b, voc, sa, sb: (describe_pick(a, workspace, voc, sa), describe_pick(b, workspace, voc, sb)),
                     inputs=[picks.model_a, picks.model_b, i.vocoder, *decoders], outputs=[picks.files_a, picks.files_b])


def followed_b(ctx: StudioContext, name: str | None, current: str | None,
               followed: str | None) -> tuple[str | None, str | None]:
    """(Model B, the newest model followed) when the tab opens: B moves to the project's newest run checkpoint or
    export when one appeared since B last followed it; a B the user picked stays while nothing newer appears."""
    project = ctx.project(name)
    newest = project_pair(project, model_choices(ctx.workspace))[1] if project is not None else None
    if newest is None or newest == followed:
        return current, followed
    return newest, newest


def build(ctx: StudioContext) -> Any:
    """Lay out the Test tab (called by the shell inside ``with gr.Tab("Test")``); returns how it follows the
    project's newest model when opened."""
    gr.Markdown("### Listen: two models, the same text, the same voice\n"
                "Each side runs `python -m trainer.synthesize` as its own process (it keeps going if you close "
                "the browser). IndexTTS-1.5 speaks through BigVGAN at 24 kHz; IndexTTS2 through the download folder "
                "its config.yaml is in (S2Mel + BigVGAN v2, 22.05 kHz), with the S2Mel steps and emotion below; IndexTTS-2.5 "
                "likewise, with its duration factor. An export is a complete folder and speaks as it is; opening "
                "this tab moves Model B to the project's newest run or export. "
                "A LoRA run's checkpoints are offered with the adapter on and off. "
                "GPT only vs GPT + S2Mel: pick the same model on both sides and a trained S2Mel for B.")
    state = ctx.project_state
    picks = _pickers(ctx.workspace, ctx.opening_project(state.value) if state is not None else None)
    inputs = form_inputs(ctx)
    players = layout_players()
    timer = gr.Timer(POLL_S, active=True)  # the first tick shows the last results after a page load
    _wire(ctx, picks, inputs, players, timer)
    if state is not None:  # another project picked in this session: its base and newest checkpoint
        state.change(lambda name: _project_picks(ctx, name), inputs=state,
                     outputs=[picks.model_a, picks.model_b, picks.followed])

    def opened(name: str | None, a: str | None, b: str | None, followed: str | None) -> tuple[Any, Any, Any]:
        listed = [(c.label, c.key) for c in model_choices(ctx.workspace)]  # exports and runs made since
        value_b, now = followed_b(ctx, name, b, followed)
        # new choices only: a pick the user makes while this runs is not overwritten by the value read at its start
        moved_b = {"value": value_b} if value_b != b else {}
        return (gr.Dropdown(choices=listed), gr.Dropdown(choices=[("(none)", NONE), *listed], **moved_b), now)

    def on_select(tab: gr.Tab) -> None:
        if state is not None:
            tab.select(opened, inputs=[state, picks.model_a, picks.model_b, picks.followed],
                       outputs=[picks.model_a, picks.model_b, picks.followed], show_progress="hidden")

    return on_select


def _project_picks(ctx: StudioContext, name: str | None) -> tuple[Any, Any, Any]:
    project = ctx.project(name)
    if project is None:
        return gr.skip(), gr.skip(), gr.skip()
    first_a, first_b = project_pair(project, model_choices(ctx.workspace))
    return first_a or gr.skip(), first_b or NONE, first_b
