"""The Test tab's form and players (Gradio layout only): the text, the reference voice, decoding and IndexTTS2 /
2.5 settings, and the two sides' players. ``webui.testing.tab_testing`` wires them to the synthesis jobs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.testing.listen import DECODE_MODES, DEFAULT_TEXT, DEFAULT_V2_STEPS, DEVICES
from webui.testing.reference_voices import reference_choices

if TYPE_CHECKING:
    from webui.context import StudioContext


def form_inputs(ctx: StudioContext) -> SimpleNamespace:
    references = reference_choices(ctx.workspace)  # every generation's demo validation prompts
    text = gr.Textbox(value=DEFAULT_TEXT, lines=3, label="Text to speak (Amharic or any language the tokenizer has)",
                      elem_id="test-text")
    untrained = gr.HTML(elem_id="test-text-coverage")  # pieces of the text the picked models never trained
    with gr.Row():
        reference = gr.Dropdown(choices=references, value=references[0][1], allow_custom_value=True, scale=3,
                                label="Reference voice", elem_id="test-reference",
                                info="an audio file, or type the path of a prompt log-mel .npy (a cond_mel)")
        upload = gr.Audio(sources=["upload", "microphone"], type="filepath", scale=2, elem_id="test-upload",
                          label="…or upload / record a reference (used instead of the pick when given)")
    with gr.Accordion("Decoding and files", open=False):
        with gr.Row():
            mode = gr.Radio(choices=list(DECODE_MODES), value="beam", label="Decoding", elem_id="test-decode")
            num_beams = gr.Number(value=3, precision=0, minimum=1, label="Beams (beam, sample)",
                                  elem_id="test-num-beams")
            seed = gr.Number(value=0, precision=0, label="Seed (sample)", elem_id="test-seed")
        with gr.Row():
            temperature = gr.Number(value=1.0, minimum=0.01, step=0.05, label="Temperature (sample)",
                                    elem_id="test-temperature")
            top_k = gr.Number(value=30, precision=0, minimum=0, label="Top-k (sample; 0 = off)", elem_id="test-top-k")
            top_p = gr.Number(value=0.8, minimum=0.01, maximum=1.0, step=0.05, label="Top-p (sample; 1 = off)",
                              elem_id="test-top-p")
        with gr.Row():
            vocoder = gr.Textbox(value="", label="Vocoder (IndexTTS-1.5; empty: each config's bigvgan_checkpoint)",
                                 elem_id="test-vocoder", scale=3)
            device = gr.Radio(choices=list(DEVICES), value="auto", label="Device", elem_id="test-device", scale=1)
    with gr.Accordion("IndexTTS2: S2Mel steps and emotion · IndexTTS-2.5: duration", open=False):
        with gr.Row():
            v2_steps = gr.Number(value=DEFAULT_V2_STEPS, precision=0, minimum=1, label="S2Mel steps (fewer: faster, "
                                 "rougher)", elem_id="test-v2-steps", scale=1)
            duration_factor = gr.Number(value=1.0, minimum=0.1, maximum=10.0, step=0.05,
                                        label="Duration factor (IndexTTS-2.5: > 1 slower, < 1 faster speech)",
                                        elem_id="test-duration-factor", scale=1)
            emotion_alpha = gr.Slider(minimum=0.0, maximum=1.0, value=1.0, step=0.05, label="Emotion alpha (0: the "
                                      "voice's own emotion, 1: the emotion reference's)", elem_id="test-emotion-alpha",
                                      scale=2)
        emotion_reference = gr.Audio(sources=["upload", "microphone"], type="filepath", elem_id="test-emotion-reference",
                                     label="Emotion reference (optional; empty: the reference voice's own emotion)")
    return SimpleNamespace(text=text, untrained=untrained, reference=reference, upload=upload, mode=mode, num_beams=num_beams, seed=seed,
                           temperature=temperature, top_k=top_k, top_p=top_p, vocoder=vocoder, device=device,
                           v2_steps=v2_steps, emotion_reference=emotion_reference, emotion_alpha=emotion_alpha,
                           duration_factor=duration_factor)


def side_column(side: str) -> tuple[Any, Any, Any]:
    with gr.Column():
        gr.Markdown(f"#### {side}")
        status = gr.HTML(elem_id=f"test-status-{side.lower()}")
        audio = gr.Audio(value=None, interactive=False, label=side, buttons=["download"],
                         elem_id=f"test-audio-{side.lower()}")
        detail = gr.Textbox(value="", lines=2, interactive=False, show_label=False, elem_id=f"test-detail-{side.lower()}")
    return status, audio, detail


def players() -> SimpleNamespace:
    with gr.Row():
        start = gr.Button("Synthesize", variant="primary", elem_id="test-run")
        stop = gr.Button("Stop", variant="stop", elem_id="test-stop")
    message = gr.HTML(elem_id="test-message")
    with gr.Row(equal_height=False):
        status_a, audio_a, detail_a = side_column("A")
        status_b, audio_b, detail_b = side_column("B")
    with gr.Accordion("Commands and logs", open=False):
        command = gr.Textbox(lines=4, interactive=False, label="Commands run (exactly)", elem_id="test-command")
        log = gr.Textbox(lines=10, max_lines=20, interactive=False, label="Logs", elem_id="test-log")
    shown = gr.State(None)  # the wav each player holds, so ticks resend no audio
    return SimpleNamespace(start=start, stop=stop, shown=shown,
                           outputs=[message, status_a, audio_a, detail_a, status_b, audio_b, detail_b, command, log,
                                    shown])
