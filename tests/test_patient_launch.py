"""The studio's start waits for its own server's first answer (webui/patient_launch.py) instead of Gradio's single
3-second try, which made the studio refuse to start on a loaded machine."""

from __future__ import annotations

import http.server
import socket
import threading

from webui.patient_launch import patient_localhost_check, server_answers


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_server_that_starts_after_the_first_try_is_waited_for():
    port = _free_port()
    answered: list[bool] = []
    asking = threading.Thread(target=lambda: answered.append(server_answers(f"http://127.0.0.1:{port}/", 30.0)))
    asking.start()
    server = http.server.HTTPServer(("127.0.0.1", port), _Answer)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        asking.join(timeout=40)
        assert answered == [True]
    finally:
        server.shutdown()


def test_a_server_that_never_answers_is_given_up_at_the_deadline():
    assert server_answers(f"http://127.0.0.1:{_free_port()}/", 0.3) is False


def test_the_patient_check_stands_in_for_gradios_only_while_launching():
    from gradio import networking

    impatient = networking.url_ok
    with patient_localhost_check():
        assert networking.url_ok is server_answers
    assert networking.url_ok is impatient
