"""The Listen tab: judge checkpoints by ear, from the clips the evaluation already kept.

- A grid of models (the base, then checkpoints) x texts x reference voices, one player per cell, fed by
  ``<run>/eval/audio/`` (``trainer.evaluation.audio_store``): nothing is synthesised here.
- A blind A/B test: the same text in the same voice from two models, unlabeled and in random order; the
  listener picks A, B or equal (buttons, or the keys A, B and E). Choices are stored with the run
  (``<run>/eval/listening.jsonl``) and summed up as a preference rate with its interval. Which model plays
  as A stays on the server (the page holds only a token), so the page cannot give it away.
"""

from __future__ import annotations

import base64
import html
import secrets
import threading
from pathlib import Path
from typing import Any

import gradio as gr

from generations.registry import DEMO_RUNS, demo_folders
from trainer.evaluation.audio_store import clips_on_disk
from trainer.evaluation.listening import Trial, next_trial, preference_line, record_choice
from webui.context import StudioContext

MAX_GRID_MODELS = 6  # the base and the newest checkpoints
MAX_GRID_ROWS = 24
MAX_CLIP_BYTES = 8 << 20
MAX_PENDING = 256

CSS = """
#listen-grid table { border-collapse: collapse; }
#listen-grid td, #listen-grid th { padding: 4px 6px; border-bottom: 1px solid #e5e7eb; vertical-align: middle; }
#listen-grid audio { width: 220px; height: 32px; }
#listen-ab .listen-ab-player { display: flex; gap: 10px; align-items: center; margin: 6px 0; }
#listen-ab button { margin-right: 8px; padding: 4px 12px; border: 1px solid #9ca3af; border-radius: 6px; }
#listen-ab kbd { font-family: ui-monospace, monospace; border: 1px solid #9ca3af; border-radius: 3px; padding: 0 3px; }
"""

# The keys A, B and E choose while the A/B panel is shown (never while typing in a field); clicks on the
# buttons do the same. The server answers with the next trial's HTML.
AB_JS = """
const choose = (choice) => {
  const panel = element.querySelector('.listen-ab[data-token]');
  if (!panel || element.dataset.busy) return;
  element.dataset.busy = '1';
  server.listen_choose(panel.dataset.run, panel.dataset.token, choice)
    .then((next) => { props.value = next; })
    .finally(() => { delete element.dataset.busy; });
};
element.addEventListener('click', (event) => {
  const button = event.target.closest('[data-choice]');
  if (button) choose(button.dataset.choice);
});
window.__listenChoose = choose;
if (!window.__listenKeys) {
  window.__listenKeys = true;
  document.addEventListener('keydown', (event) => {
    const panel = document.querySelector('#listen-ab .listen-ab[data-token]');
    if (!panel || panel.offsetParent === null || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    const tag = (target.tagName || '').toLowerCase();
    if (tag === 'input' || tag === 'textarea' || tag === 'select' || target.isContentEditable) return;
    const choice = {a: 'A', b: 'B', e: 'equal'}[(event.key || '').toLowerCase()];
    if (!choice) return;
    event.preventDefault();
    window.__listenChoose(choice);
  });
}
"""


# ----- runs and clips --------------------------------------------------------------------------------------


PROJECT_RUNS = "projects/*/runs"


def run_roots() -> tuple[str, ...]:
    """The demos' runs/ folders (the registry's demo folders) and the voice projects'."""
    return (*demo_folders(DEMO_RUNS), PROJECT_RUNS)


def listening_runs(workspace: Path) -> list[str]:
    """Run folders (two levels under the workspace's runs/, the demos' and the projects' runs/) whose evaluation
    kept clips, newest first."""
    workspace = Path(workspace)
    found = [p.parent.parent for root in run_roots() for pattern in ("*/eval/audio", "*/*/eval/audio")
             for p in workspace.glob(f"{root}/{pattern}") if p.is_dir()]
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return [str(p) for p in dict.fromkeys(found)]


def _project_first(ctx: StudioContext, name: str | None) -> list[str]:
    """The runs with kept clips, the session's project's own first (newest first within each)."""
    from trainer.project import project_runs

    runs = listening_runs(ctx.workspace)
    project = ctx.project(name)
    if project is None:
        return runs
    own = {str(run) for run in project_runs(project)}
    return [run for run in runs if run in own] + [run for run in runs if run not in own]


def followed_run(ctx: StudioContext, name: str | None, current: str | None,
                 followed: str | None) -> tuple[str | None, str | None]:
    """(the run picked, the project's newest run followed) when the tab opens: the pick moves to the project's
    newest run with kept clips when one appeared since it last moved; a run the user picked stays meanwhile."""
    from trainer.project import project_runs

    project = ctx.project(name)
    if project is None:
        return current, followed
    own = {str(run) for run in project_runs(project)}
    newest = next((run for run in listening_runs(ctx.workspace) if run in own), None)
    if newest is None or newest == followed:
        return current, followed
    return newest, newest


def _allowed_run(workspace: Path, run_dir: str | None) -> Path | None:
    """``run_dir`` when it is one of the workspace's runs with kept clips (the page may send anything)."""
    if not run_dir:
        return None
    path = Path(run_dir)
    return path if str(path) in listening_runs(workspace) else None


def _data_uri(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_CLIP_BYTES:
            return None
        return "data:audio/wav;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None


def _player(path: Path | None, label: str) -> str:
    uri = _data_uri(path) if path is not None else None
    if uri is None:
        return '<span class="listen-missing">-</span>'
    return f'<audio controls preload="none" aria-label="{html.escape(label)}" src="{uri}"></audio>'


def grid_models(run_dir: Path) -> list[str]:
    """The models the grid shows: the base (when kept) and the newest checkpoints."""
    models = list(clips_on_disk(run_dir))
    base = [m for m in models if m == "base"]
    steps = [m for m in models if m != "base"]
    return base + steps[-(MAX_GRID_MODELS - len(base)):]


def grid_html(run_dir: Path | None) -> str:
    if run_dir is None:
        return '<p class="listen-note">Pick a run whose evaluation kept clips (python -m trainer.evaluate RUN).</p>'
    clips = clips_on_disk(run_dir)
    models = grid_models(run_dir)
    if not models:
        return '<p class="listen-note">No kept evaluation clips in this run yet.</p>'
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for model in models:
        for clip in clips[model]["clips"]:
            row = rows.setdefault((clip["sentence"], clip["voice"]), {"text": clip["text"], "voice": clip["voice"]})
            row[model] = clip["path"]
    head = "".join(f"<th>{html.escape(m)}</th>" for m in models)
    body = []
    for (sentence, voice), row in list(rows.items())[:MAX_GRID_ROWS]:
        cells = "".join(f'<td data-model="{html.escape(m)}">{_player(row.get(m), f"{m} {sentence} {voice}")}</td>'
                        for m in models)
        body.append(f'<tr data-sentence="{html.escape(sentence)}" data-voice="{html.escape(voice)}">'
                    f"<td>{html.escape(row['text'])}<br><small>voice {html.escape(voice)}</small></td>{cells}</tr>")
    more = len(rows) - MAX_GRID_ROWS
    note = f'<p class="listen-note">{more} more text(s) not shown.</p>' if more > 0 else ""
    return f"<table><thead><tr><th>text · voice</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"


# ----- the blind A/B test ----------------------------------------------------------------------------------


class PendingTrials:
    """Trials shown and not yet answered, by token (which model is A stays here, not in the page)."""

    def __init__(self) -> None:
        self._trials: dict[str, tuple[str, Trial]] = {}
        self._lock = threading.Lock()

    def add(self, run_dir: Path, trial: Trial) -> str:
        token = secrets.token_urlsafe(12)
        with self._lock:
            if len(self._trials) >= MAX_PENDING:
                self._trials.pop(next(iter(self._trials)))
            self._trials[token] = (str(run_dir), trial)
        return token

    def take(self, token: str) -> tuple[str, Trial] | None:
        with self._lock:
            return self._trials.pop(token, None)


PENDING = PendingTrials()


def ab_html(run_dir: Path | None, first: str | None, second: str | None, note: str = "") -> str:
    """The next trial of ``first`` against ``second`` with the preference rate so far."""
    if run_dir is None or not first or not second or first == second:
        return '<div class="listen-ab"><p>Pick a run and two different models, then start.</p></div>'
    rate = html.escape(preference_line(run_dir, first, second))
    trial = next_trial(run_dir, first, second)
    if trial is None:
        return (f'<div class="listen-ab"><p>{html.escape(first)} and {html.escape(second)} share no kept clip.</p>'
                f'<p class="listen-rate">{rate}</p></div>')
    token = PENDING.add(run_dir, trial)
    extra = f'<p class="listen-ab-note">{html.escape(note)}</p>' if note else ""
    return (f'<div class="listen-ab" data-run="{html.escape(str(run_dir))}" data-token="{token}">{extra}'
            f'<p class="listen-ab-text">“{html.escape(trial.text)}” <small>voice {html.escape(trial.voice)}</small></p>'
            f'<div class="listen-ab-player"><b>A</b>{_player(trial.a_path, "A")}</div>'
            f'<div class="listen-ab-player"><b>B</b>{_player(trial.b_path, "B")}</div>'
            '<p><button data-choice="A">A is better <kbd>A</kbd></button>'
            '<button data-choice="B">B is better <kbd>B</kbd></button>'
            '<button data-choice="equal">About the same <kbd>E</kbd></button></p>'
            f'<p class="listen-rate">{rate}</p></div>')


def rate_html(run_dir: Path | None, first: str | None, second: str | None) -> str:
    if run_dir is None or not first or not second or first == second:
        return ""
    return f'<p class="listen-rate">{html.escape(preference_line(run_dir, first, second))}</p>'


# ----- layout ----------------------------------------------------------------------------------------------


def _blind_ab(workspace: Path) -> tuple[Any, Any, Any, Any, Any]:
    """The blind A/B panel: the two model pickers, Start, the preference rate and the trial (whose choices come
    back through a server function)."""
    gr.Markdown("#### Blind A/B")
    with gr.Row():
        first = gr.Dropdown(choices=[], value=None, label="Model 1", elem_id="listen-first")
        second = gr.Dropdown(choices=[], value=None, label="Model 2", elem_id="listen-second")
        start = gr.Button("Start blind test", variant="primary", elem_id="listen-start")
    rate = gr.HTML(elem_id="listen-rate", js_on_load=None)

    def listen_choose(payload: Any) -> str:
        """The page's choice (run, trial token, "A" | "B" | "equal"; gradio hands the call's arguments over as
        one list) -> the next trial's HTML."""
        args = list(payload) if isinstance(payload, (list, tuple)) else [payload]
        run_dir, token, choice = ([*args, None, None, None])[:3]
        allowed = _allowed_run(workspace, str(run_dir or ""))
        pending = PENDING.take(str(token))
        if allowed is None or pending is None or pending[0] != str(allowed):
            return ab_html(None, None, None)
        trial = pending[1]
        note = ""
        try:
            record_choice(allowed, {"first": trial.first, "second": trial.second, "sentence": trial.sentence,
                                    "voice": trial.voice, "a": trial.a, "b": trial.b}, str(choice))
            note = f"stored: {'about the same' if choice == 'equal' else choice + ' is better'}"
        except (ValueError, OSError) as exc:
            note = f"not stored: {' '.join(str(exc).split())}"
        return ab_html(allowed, trial.first, trial.second, note)

    ab = gr.HTML(value=ab_html(None, None, None), elem_id="listen-ab", js_on_load=AB_JS,
                 server_functions=[listen_choose])
    return first, second, start, rate, ab


def build(ctx: StudioContext) -> Any:
    """Lay out the Listen tab; returns how it follows the project's newest run when opened."""
    workspace = ctx.workspace
    gr.HTML(f"<style>{CSS}</style>", padding=False)
    gr.Markdown("### Listen to checkpoints\nEvery cell plays a clip the evaluation kept (the first seed of each text "
                "and voice), so nothing is synthesised twice. The blind A/B test plays one text from two models in "
                "random order: choose with the buttons or the keys **A**, **B** and **E** (about the same).")
    runs = _project_first(ctx, ctx.project_state.value if ctx.project_state is not None else None)
    with gr.Row():
        run = gr.Dropdown(choices=runs, value=runs[0] if runs else None, allow_custom_value=True, scale=5,
                          label="Run", elem_id="listen-run", info="runs whose evaluation kept clips")
        refresh = gr.Button("Refresh", scale=1, elem_id="listen-refresh")
    followed = gr.State(runs[0] if runs else None)  # the project's newest run the pick last moved to
    grid = gr.HTML(elem_id="listen-grid", js_on_load=None)
    first, second, start, rate, ab = _blind_ab(workspace)

    def show(run_dir: str | None) -> tuple[Any, ...]:
        path = _allowed_run(workspace, run_dir)
        models = list(clips_on_disk(path)) if path is not None else []
        checkpoints = [m for m in models if m != "base"]
        one = checkpoints[-1] if checkpoints else None
        two = "base" if "base" in models else (checkpoints[-2] if len(checkpoints) > 1 else None)
        return (grid_html(path), gr.Dropdown(choices=models, value=one), gr.Dropdown(choices=models, value=two),
                rate_html(path, one, two), ab_html(None, None, None))

    def refreshed(current: str | None) -> Any:
        choices = listening_runs(workspace)
        return gr.Dropdown(choices=choices, value=current if current in choices else (choices[0] if choices else None))

    outputs = [grid, first, second, rate, ab]
    refresh.click(refreshed, inputs=run, outputs=run).then(show, inputs=run, outputs=outputs)
    for picker in (first, second):
        picker.input(lambda r, a, b: rate_html(_allowed_run(workspace, r), a, b), inputs=[run, first, second],
                     outputs=rate)
    start.click(lambda r, a, b: ab_html(_allowed_run(workspace, r), a, b), inputs=[run, first, second], outputs=ab)
    gr.on(triggers=None, fn=show, inputs=run, outputs=outputs, show_progress="hidden")  # page load and a new run
    if ctx.project_state is not None:  # another project picked in this session: its newest run

        def project_run(name: str | None) -> Any:
            runs_now = _project_first(ctx, name)
            return gr.Dropdown(choices=runs_now, value=runs_now[0] if runs_now else None)

        ctx.project_state.change(project_run, inputs=ctx.project_state, outputs=run).then(show, inputs=run,
                                                                                           outputs=outputs)

    def opened(name: str | None, current: str | None, last: str | None) -> tuple[Any, Any]:
        picked, now = followed_run(ctx, name, current, last)
        if picked == current:
            return gr.skip(), now
        return gr.Dropdown(choices=_project_first(ctx, name), value=picked), now

    def on_select(tab: gr.Tab) -> None:
        if ctx.project_state is not None:  # a run evaluated since the pick: the pick moves to it
            tab.select(opened, inputs=[ctx.project_state, run, followed], outputs=[run, followed],
                       show_progress="hidden")  # a new pick shows itself (the gr.on above)

    return on_select
