"""app.py: login required with --auth / STUDIO_AUTH (401 without it), --share and --host, bad flags, clean exits."""

from __future__ import annotations

import http.cookiejar
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.studio_process import REPO, StudioProcess, free_port, http_status

pytestmark = pytest.mark.slow


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A non-empty workspace, so app.py does not spend time creating the demo in it."""
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a demo workspace\n")
    return folder


def login(url: str, user: str, password: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    body = urllib.parse.urlencode({"username": user, "password": password}).encode()
    with opener.open(urllib.request.Request(url + "login", data=body), timeout=10) as response:
        assert response.status == 200
    return opener


def test_auth_rejects_unauthenticated_requests(workspace: Path, tmp_path: Path) -> None:
    with StudioProcess(workspace, tmp_path / "app.log", "--auth", "alice:s3cret") as app:
        app.wait_ready()
        assert http_status(app.url + "config") == 401
        assert http_status(app.url + "gradio_api/info") == 401
        with pytest.raises(urllib.error.HTTPError):
            login(app.url, "alice", "wrong")
        opener = login(app.url, "alice", "s3cret")
        with opener.open(app.url + "config", timeout=10) as response:
            assert response.status == 200
        assert "s3cret" not in app.output()  # a chosen password is never echoed
        app.proc.terminate()  # SIGTERM (e.g. systemd, docker stop) closes the server cleanly
        assert app.proc.wait(timeout=30) == 0 and "studio stopped" in app.output()
        assert "Keyboard interruption" not in app.output() and "Traceback" not in app.output()


def test_share_offline_keeps_serving_locally_with_a_generated_password(workspace: Path, tmp_path: Path) -> None:
    # A share server that refuses connections: the tunnel fails the same way as offline, and no public
    # link is ever created from a test.
    closed = f"127.0.0.1:{free_port()}"
    with StudioProcess(workspace, tmp_path / "app.log", "--share",
                       env={"GRADIO_SHARE_SERVER_ADDRESS": closed}) as app:
        app.wait_ready(timeout_s=180)
        output = app.output()
        assert "share link could not be created" in output
        assert sum("share link" in line for line in output.splitlines()) == 1  # said in one line
        assert "password" in output and "login: user 'studio'" in output
        assert http_status(app.url + "config") == 401  # a generated password still guards it
        password = output.split("password '", 1)[1].split("'", 1)[0]
        opener = login(app.url, "studio", password)
        with opener.open(app.url + "config", timeout=10) as response:
            assert response.status == 200


def test_login_comes_from_flag_env_or_is_generated_for_share() -> None:
    import app

    parser = app.build_parser()
    env = {app.AUTH_ENV: "bob:pw:with:colons"}
    assert app.resolve_auth(parser.parse_args(["--auth", "alice:s3cret"]), env) == (("alice", "s3cret"), False)
    assert app.resolve_auth(parser.parse_args([]), env) == (("bob", "pw:with:colons"), False)
    assert app.resolve_auth(parser.parse_args([]), {}) == (None, False)
    (user, password), generated = app.resolve_auth(parser.parse_args(["--share"]), {})
    assert generated and user == app.SHARE_USER and len(password) >= 12
    assert parser.parse_args([]).host == "127.0.0.1" and parser.parse_args([]).port == 7860


@pytest.mark.parametrize(("host", "needs_login"), [("0.0.0.0", True), ("192.168.1.20", True), ("::", True),
                                                   ("gpu-box.lan", True), ("127.0.0.1", False),
                                                   ("127.0.0.2", False), ("localhost", False), ("::1", False)])
def test_a_studio_reachable_from_other_machines_gets_a_generated_password(host: str, needs_login: bool) -> None:
    import app

    args = app.build_parser().parse_args(["--host", host])
    auth, generated = app.resolve_auth(args, {})
    assert generated is needs_login and (auth is not None) is needs_login
    if needs_login:
        assert f"--host {host} is reachable from other machines" in app.why_generated(args)
    chosen = app.build_parser().parse_args(["--host", host, "--auth", "alice:s3cret"])
    assert app.resolve_auth(chosen, {}) == (("alice", "s3cret"), False)  # a chosen login is kept


def test_a_taken_port_is_refused_naming_the_flag(workspace: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, str(REPO / "app.py"), "--workspace", str(workspace), "--port",
                               str(port)], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert "--port" in lines[0] and "GRADIO_SERVER_PORT" not in done.stderr and "server_port" not in done.stderr


def test_a_tab_that_fails_to_load_stops_the_app_with_one_line(workspace: Path) -> None:
    script = (
        "import sys, app, webui.studio as studio\n"
        "studio.TABS = studio.TABS + (('Ghost', 'webui.tab_ghost_missing', 'tab-ghost'),)\n"
        "raise SystemExit(app.main(sys.argv[1:]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, "--workspace", str(workspace), "--port", str(free_port())],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("error: the Ghost tab (webui.tab_ghost_missing) failed to import")
    assert "studio running" not in done.stdout


@pytest.mark.parametrize("auth", ["nocolon", ":pw", "user:"])
def test_bad_auth_is_refused_with_one_line(workspace: Path, auth: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "app.py"), "--workspace", str(workspace), "--auth", auth],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: --auth must be USER:PASSWORD")


def test_workspace_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    done = subprocess.run([sys.executable, str(REPO / "app.py"), "--workspace", str(file)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: --workspace") and "Traceback" not in done.stderr
