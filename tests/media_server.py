"""A media server on 127.0.0.1 for link tests: files from a folder, HTTP range requests answered (so a cut
download can resume), and a switch that cuts every whole-file answer off halfway (a dropped connection)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TYPES = {".mp4": "video/mp4", ".html": "text/html; charset=utf-8", ".vtt": "text/vtt", ".webm": "video/webm",
         ".m4a": "audio/mp4", ".srt": "application/x-subrip"}


class MediaServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cut = False
        self.ranges: list[str] = []  # the Range headers asked for, in order
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                server.answer(self, head=True)

            def do_GET(self) -> None:
                server.answer(self, head=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def answer(self, request: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        path = self.root / request.path.lstrip("/").split("?")[0]
        if not path.is_file():
            request.send_error(404)
            return
        data = path.read_bytes()
        asked = request.headers.get("Range")
        start = int(asked.split("=")[1].split("-")[0]) if asked else 0
        if asked:
            self.ranges.append(asked)
        body = data[start:]
        request.send_response(206 if asked else 200)
        request.send_header("Content-Type", TYPES.get(path.suffix, "application/octet-stream"))
        request.send_header("Accept-Ranges", "bytes")
        request.send_header("Content-Length", str(len(body)))
        if asked:
            request.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        request.end_headers()
        if head:
            return
        if self.cut and not asked and path.suffix != ".html":
            request.wfile.write(body[: len(body) // 2])
            request.close_connection = True
            return
        request.wfile.write(body)


@contextmanager
def serving(root: Path) -> Iterator[MediaServer]:
    server = MediaServer(root)
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(timeout=10)
