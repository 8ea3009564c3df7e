"""Gradio's launch asks its own server for "/" once, with a 3 s timeout, and on a timeout refuses to serve
("When localhost is not accessible, a shareable link must be created"). On a GPU box busy with training, or a
loaded 2-core CI machine, the first answer can take longer than that, so the studio would die at start for
nothing. While the studio launches, that check waits up to a minute for the server's first answer instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import httpx

FIRST_ANSWER_TIMEOUT_S = 60.0


def server_answers(url: str, deadline_s: float = FIRST_ANSWER_TIMEOUT_S) -> bool:
    """True once ``url`` answers a HEAD request with a page or a login redirect, False at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return False
        try:
            status = httpx.head(url, timeout=min(10.0, left), verify=False).status_code
        except httpx.TimeoutException:
            continue
        except (httpx.ConnectError, ConnectionError):
            status = None
        if status in (200, 401, 301, 302, 303, 307, 308):
            return True
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))


@contextlib.contextmanager
def patient_localhost_check() -> Iterator[None]:
    from gradio import networking

    impatient = networking.url_ok
    networking.url_ok = server_answers
    try:
        yield
    finally:
        networking.url_ok = impatient
