"""Start the IndexTTS Fine-tuning Studio in the browser.

    python app.py [--host 127.0.0.1] [--port 7860] [--workspace ./workspace] [--share] [--auth user:password]

On first start with an empty or missing workspace, the demo workspace is created there. Training runs
started from the studio live in their own process session: closing or restarting the studio does not
stop them, and the next start finds them again. A studio reachable from other machines (--share, or a
--host other than loopback) always requires a login: without --auth a password is generated.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import ipaddress
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from data_tools.cli import OneLineErrorParser

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported anywhere

AUTH_ENV = "STUDIO_AUTH"
SHARE_USER = "studio"


class UsageError(Exception):
    """Bad command-line input: reported as one ``error:`` line, exit 2."""


class StudioBroken(Exception):
    """The studio cannot be built (a tab fails to import or build): one ``error:`` line, exit 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python app.py", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to listen on (0.0.0.0 for all; other than loopback, a login is required)")
    parser.add_argument("--port", type=int, default=7860, help="port to listen on")
    parser.add_argument("--workspace", type=Path, default=Path("workspace"),
                        help="workspace folder (created with the demo if empty or missing)")
    parser.add_argument("--share", action="store_true",
                        help="also serve through a public gradio.live link (a password is generated without --auth)")
    parser.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                        help=f"require this login (or set {AUTH_ENV}=user:password)")
    parser.add_argument("--tensorboard-host", default="127.0.0.1", metavar="HOST",
                        help="interface TensorBoard started from the studio listens on (it has no login; "
                             "default loopback only, reach it through an SSH tunnel)")
    return parser


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_auth(value: str | None, source: str) -> tuple[str, str] | None:
    if value is None or value == "":
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise UsageError(f"{source} must be USER:PASSWORD with both parts non-empty")
    return user, password


def resolve_auth(args: argparse.Namespace, environ: dict[str, str]) -> tuple[tuple[str, str] | None, bool]:
    """The login to require and whether its password was generated here: a studio reachable from other
    machines (--share, or --host other than loopback) never runs without one."""
    auth = parse_auth(args.auth, "--auth") or parse_auth(environ.get(AUTH_ENV), AUTH_ENV)
    if auth is None and (args.share or not is_loopback(args.host)):
        return (SHARE_USER, secrets.token_urlsafe(12)), True
    return auth, False


def why_generated(args: argparse.Namespace) -> str:
    reason = "--share makes a public link" if args.share else f"--host {args.host} is reachable from other machines"
    return f"generated because {reason}; pass --auth to choose one"


def is_empty_dir(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def ensure_workspace(workspace: Path) -> None:
    """Create the demo workspace in an empty or missing folder; leave a non-empty one alone."""
    if workspace.exists() and not workspace.is_dir():
        raise UsageError(f"--workspace {workspace} is a file, not a folder")
    if not is_empty_dir(workspace):
        return
    try:
        from demo.workspace import build_demo
    except ImportError as exc:  # the demo builder is part of the trainer; without it start empty
        print(f"note: demo workspace not created ({exc}); starting with an empty workspace", flush=True)
        workspace.mkdir(parents=True, exist_ok=True)
        return
    print(f"creating the demo workspace in {workspace} (first start, takes a few seconds)...", flush=True)
    build_demo(workspace)


def launch(args: argparse.Namespace, environ: dict[str, str]) -> int:
    auth, generated = resolve_auth(args, environ)
    workspace = args.workspace.expanduser().resolve()
    ensure_workspace(workspace)

    from webui.context import StudioContext
    from webui.patient_launch import patient_localhost_check
    from webui.studio import CSS, TabError, build_studio

    ctx = StudioContext.create(workspace, host=args.host, tensorboard_host=args.tensorboard_host)
    try:
        studio = build_studio(ctx)
    except TabError as exc:
        raise StudioBroken(str(exc)) from exc
    studio.queue(default_concurrency_limit=4)
    gradio_output = io.StringIO()
    try:
        # Gradio's own launch chatter (and its multi-line share failure text) is replaced by the lines below.
        with contextlib.redirect_stdout(gradio_output), patient_localhost_check():
            studio.launch(server_name=args.host, server_port=args.port, share=args.share,
                          auth=auth, prevent_thread_lock=True, quiet=True, show_error=True,
                          ssr_mode=False, css=CSS, enable_monitoring=False)
    except OSError as exc:
        # Gradio's text names its own settings (GRADIO_SERVER_PORT, server_port): say it with our flags.
        raise UsageError(f"cannot listen on {args.host}:{args.port} (the port is in use, or the address is not "
                         "one of this machine's): choose another with --port, or check --host") from exc

    local_url = studio.local_url or f"http://{args.host}:{args.port}/"
    print(f"studio running at {local_url} (workspace {workspace})", flush=True)
    if args.share:
        if studio.share_url:
            print(f"public link: {studio.share_url}", flush=True)
        else:
            print("share link could not be created (no internet or gradio.live unreachable); "
                  "serving locally only", flush=True)
    if auth is not None and generated:
        print(f"login: user {auth[0]!r}, password {auth[1]!r} ({why_generated(args)})", flush=True)
    elif auth is not None:
        print(f"login required: user {auth[0]!r}", flush=True)
    wait_for_stop_signal(lambda: bool(studio.is_running))
    with contextlib.suppress(Exception):
        studio.close(verbose=False)
    print("studio stopped; training runs keep going and are found again on the next start", flush=True)
    return 0


def wait_for_stop_signal(serving: Callable[[], bool], interval_s: float = 0.5) -> None:
    """Return on Ctrl-C or SIGTERM (also when started with SIGINT ignored, e.g. by `nohup ... &`), or when the
    server stops by itself. Gradio's own wait would print a "Keyboard interruption" line on the way out."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while serving() and not stop.wait(interval_s):
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return launch(args, dict(os.environ))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StudioBroken as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
