"""The Test tab: hear two models side by side (A | B) speak the same text with the same voice and settings.

Pick any base model or checkpoint of the workspace's runs for each side, type a text (Amharic works;
paste is fine), choose a reference voice (a generated stand-in, audio under ``references/``, a validation
prompt that is an audio file, or an upload), and decoding settings; IndexTTS2 and IndexTTS-2.5 models also take the
S2Mel steps and an emotion reference blended by alpha, IndexTTS-2.5 the duration factor (IndexTTS-1.5 sides
ignore them), and each IndexTTS2 / 2.5 side a trained S2Mel (an S2Mel run's checkpoint or an exported adapter;
the same GPT with the stock S2Mel on A and the trained one on B is the GPT-only vs GPT + S2Mel comparison). Each side runs as its own supervised
job (``python -m trainer.synthesize ... --json report.json``, jobs ``test_a`` / ``test_b``), never in the UI
process; the players show the result with its length and real-time factor, or one line saying why not.

The job (start, poll, stop both sides) is ``webui.testing.test_job``; all rules (which files go with a checkpoint,
the command, reading the report) live in ``webui.testing.listen``,
the reference voices in ``webui.testing.reference_voices``, the form and players' layout in ``webui.testing.tab_testing_layout``;
callbacks here are plain functions over the context, ``build(ctx)`` wires them.
"""

from __future__ import annotations

import html
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.plots import badge_html
from webui.testing.listen import (
    BASE_PREFIX,
    ListenError,
    ModelChoice,
    default_pair,
    model_choices,
    resolve_model,
)
from webui.testing.listen_exports import newest_of_project
from webui.testing.listen_s2mel import STOCK, picker_entries, with_s2mel
from webui.testing.s2mel_scores_view import scores_html as s2mel_scores_html
from webui.testing.tab_testing_layout import form_inputs
from webui.testing.tab_testing_layout import players as layout_players
from webui.testing.test_job import NONE, POLL_S, SIDES, TURNS, TestView, poll_test, start_test, stop_test
from webui.testing.text_coverage import coverage_html

if TYPE_CHECKING:
    from trainer.project import Project
    from webui.context import StudioContext

def describe_pick(key: str | None, workspace: Path, vocoder: str | None, s2mel: str | None = STOCK,
                  strength: float | None = 1.0) -> str:
    """One line under a model picker: the files it will use (its S2Mel too), or why it cannot be spoken with."""
    if not (key or "").strip():
        return badge_html("NOT USED", "pick a model to compare", "info")
    try:
        spec = with_s2mel(resolve_model(key, workspace, vocoder), s2mel, workspace, strength)
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
        # shown while a trained S2Mel is picked on either side (trainer.s2mel.strength: 0 base .. 1 all of it)
        strength = gr.Slider(0.0, 1.0, value=1.0, step=0.05, scale=3, visible=False, label="S2Mel adapter strength",
                             elem_id="test-s2mel-strength", info="0 speaks as the folder's s2mel.pth, 1 as the "
                             "merged export")
    with gr.Row():
        files_a = gr.HTML(value=lambda: describe_pick(first_a, workspace, ""), elem_id="test-files-a")
        files_b = gr.HTML(value=lambda: describe_pick(first_b, workspace, ""), elem_id="test-files-b")
    followed = gr.State(first_b)  # the project's newest model B last moved to (it moves again to a newer one)
    return SimpleNamespace(model_a=model_a, model_b=model_b, refresh=refresh, files_a=files_a, files_b=files_b,
                           s2mel_a=s2mel_a, s2mel_b=s2mel_b, strength=strength, followed=followed)


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
                                          picks.s2mel_a, picks.s2mel_b, picks.strength],
                        outputs=[*outputs, timer], concurrency_id=TURNS, concurrency_limit=1)
    players.stop.click(on_stop, inputs=players.shown, outputs=outputs)
    timer.tick(on_tick, inputs=[message, players.shown], outputs=[*outputs, timer], show_progress="hidden",
               concurrency_id=TURNS, concurrency_limit=1)
    decoders = [picks.s2mel_a, picks.s2mel_b]
    picks.refresh.click(on_refresh, inputs=[picks.model_a, picks.model_b, *decoders],
                        outputs=[picks.model_a, picks.model_b, *decoders])
    for model, decoder, files in ((picks.model_a, picks.s2mel_a, picks.files_a),
                                  (picks.model_b, picks.s2mel_b, picks.files_b)):
        for changed in (model, decoder, picks.strength):
            changed.change(lambda key, voc, s2mel, s: describe_pick(key, workspace, voc, s2mel, s),
                           inputs=[model, i.vocoder, decoder, picks.strength], outputs=files)
    i.vocoder.change(lambda a, b, voc, sa, sb, s: (describe_pick(a, workspace, voc, sa, s),
                                                   describe_pick(b, workspace, voc, sb, s)),
                     inputs=[picks.model_a, picks.model_b, i.vocoder, *decoders, picks.strength],
                     outputs=[picks.files_a, picks.files_b])
    for decoder in decoders:  # the strength slider shows while a trained S2Mel is picked
        decoder.change(lambda sa, sb: gr.Slider(visible=bool((sa or "").strip() or (sb or "").strip())),
                       inputs=decoders, outputs=picks.strength, show_progress="hidden")

    def on_text(a: str | None, b: str | None, voc: str | None, text: str) -> str:
        return coverage_html(workspace, {"A": a, "B": None if b == NONE else b}, voc, text or "")

    gr.on([i.text.change, picks.model_a.change, picks.model_b.change], on_text,
          inputs=[picks.model_a, picks.model_b, i.vocoder, i.text], outputs=i.untrained, show_progress="hidden",
          trigger_mode="always_last", concurrency_limit=1)


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
