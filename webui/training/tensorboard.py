"""TensorBoard for a run's output dir: one studio job, on a free port, and the link that says how to reach it."""

from __future__ import annotations

import html
import socket
import sys

import gradio as gr

from data_tools.paths import PathError, expand_path
from webui.context import StudioContext
from webui.jobs.supervisor import RunAlreadyActive

TENSORBOARD_JOB = "tensorboard"


def _free_port(host: str, start: int = 6006, tries: int = 50) -> int:
    for port in range(start, start + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host if host not in ("0.0.0.0", "") else "127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError(f"no free port for TensorBoard in {start}-{start + tries - 1}")


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    return host in ("localhost", "") or host.startswith("127.") or host == "::1"


def tensorboard_html(bind_host: str, port: str, page_host: str) -> str:
    """The link to TensorBoard and, where the browser is elsewhere, how to reach a loopback-only one."""
    if _loopback(bind_host):
        url = f"http://127.0.0.1:{port}/"
        link = f'<a id="train-tensorboard-url" href="{html.escape(url)}" target="_blank">TensorBoard: {html.escape(url)}</a>'
        if _loopback(page_host):
            return link + " <small>(listens on this machine only)</small>"
        machine = page_host if page_host and not page_host.endswith("gradio.live") else "THE-STUDIO-MACHINE"
        hint = f"ssh -N -L {port}:127.0.0.1:{port} USER@{machine}"
        return (link + ' <div id="train-tensorboard-hint"><small>TensorBoard has no login, so it listens on the '
                "studio's machine only (app.py --tensorboard-host changes that). From your computer, open a tunnel "
                f"and then the link: <code>{html.escape(hint)}</code></small></div>")
    shown = page_host if bind_host in ("0.0.0.0", "::") and page_host else bind_host
    url = f"http://{shown}:{port}/"
    return (f'<a id="train-tensorboard-url" href="{html.escape(url)}" target="_blank">TensorBoard: {html.escape(url)}</a>'
            f" <small>(listens on {html.escape(bind_host)} without a login, as app.py --tensorboard-host asked)</small>")


def start_tensorboard(ctx: StudioContext, output_dir: str, page_host: str = "") -> str:
    if not output_dir.strip():
        return '<span class="status-bad">set the output dir first</span>'
    try:
        logdir = expand_path(output_dir.strip(), "--output-dir")
    except PathError as exc:
        return f'<span class="status-bad">{html.escape(str(exc))}</span>'
    supervisor = ctx.registry.get(ctx.job_dir(TENSORBOARD_JOB))
    status = supervisor.poll()
    argv = list(status.argv)
    if status.running and str(logdir) in argv and ctx.tensorboard_host in argv:
        port = argv[argv.index("--port") + 1]
    else:
        if status.running:
            supervisor.stop(grace_s=5, term_s=5)
        port = str(_free_port(ctx.tensorboard_host))
        argv = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", port,
                "--host", ctx.tensorboard_host]
        try:
            supervisor.start(argv, cwd=ctx.repo_root, label=TENSORBOARD_JOB)
        except (RunAlreadyActive, RuntimeError) as exc:
            return f'<span class="status-bad">{html.escape(str(exc))}</span>'
    return tensorboard_html(ctx.tensorboard_host, port, page_host)


def page_host(request: gr.Request | None) -> str:
    """The host name the browser used to reach the studio ('' when unknown)."""
    if request is None:
        return ""
    host = request.headers.get("host") or ""
    return host.rsplit(":", 1)[0] if not host.endswith("]") else host
