"""A small Hub-like HTTP server on 127.0.0.1 for the model download and publish tests (never the internet).

It serves the endpoints huggingface_hub calls: model info (``/api/models/<id>[/revision/<rev>]``), paths-info,
``/<id>/resolve/<rev>/<path>`` (HEAD and GET, with ETag / X-Repo-Commit / X-Linked-Etag / X-Linked-Size /
Content-Length and Range), and for uploads ``/api/repos/create``, ``validate-yaml``, ``preupload`` and ``commit``. Weight-like
files are served as LFS files (sha256 etag), others as regular git blobs (git sha1 etag), as the Hub does.

Switches (sets of ``(repo_id, path)``): ``cut_once`` sends half of a file's body and drops the connection the
first time; ``fail_after_cut`` makes the requests after that cut answer 503 (the client gives up and keeps its
partial file); ``corrupt`` serves a body with its first byte changed (a count of responses per file);
``missing`` 404s a file and leaves it out of the listings; ``stall`` never answers a file's HEAD or GET (until the
server stops). ``gated`` repositories answer 401 (GatedRepo) unless the request carries ``TOKEN``.
``requests`` records (method, path, Range header) of every request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

TOKEN = "hf_test_token"
LFS_SUFFIXES = (".pth", ".pt", ".bin", ".safetensors", ".model", ".tiktoken")


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeHub:
    repos: dict[str, dict[str, bytes]]
    licences: dict[str, str] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    cut_once: set[tuple[str, str]] = field(default_factory=set)
    fail_after_cut: set[tuple[str, str]] = field(default_factory=set)
    corrupt: dict[tuple[str, str], int] = field(default_factory=dict)  # responses left to corrupt
    missing: set[tuple[str, str]] = field(default_factory=set)
    stall: set[tuple[str, str]] = field(default_factory=set)  # HEAD and GET of these never answer (until stopped)
    released: threading.Event = field(default_factory=threading.Event)  # set when the server stops
    private: dict[str, bool] = field(default_factory=dict)
    commits: list[dict] = field(default_factory=list)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _cut_done: set[tuple[str, str]] = field(default_factory=set)

    def commit_of(self, repo_id: str) -> str:
        files = self.repos.get(repo_id, {})
        return hashlib.sha1(json.dumps({p: git_sha1(d) for p, d in sorted(files.items())}).encode()).hexdigest()

    def files_of(self, repo_id: str) -> dict[str, bytes]:
        return {p: d for p, d in self.repos.get(repo_id, {}).items() if (repo_id, p) not in self.missing}

    def entry(self, path: str, data: bytes) -> dict:
        row = {"type": "file", "path": path, "size": len(data), "oid": git_sha1(data)}
        if path.endswith(LFS_SUFFIXES):
            row["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return row

    def ranges_of(self, repo_id: str, path: str) -> list[str | None]:
        """The Range header of every GET of one file (None: from the start)."""
        prefix = f"/{repo_id}/resolve/"
        return [r for m, p, r in self.requests if m == "GET" and p.startswith(prefix) and p.endswith("/" + path)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: FakeHub  # set on the subclass made per server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _send_json(self, payload: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        self._send_json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authorised(self, repo_id: str) -> bool:
        if repo_id not in self.hub.gated:
            return True
        return self.headers.get("Authorization") == f"Bearer {TOKEN}"

    def _record(self) -> None:
        with self.hub.lock:
            self.hub.requests.append((self.command, unquote(urlparse(self.path).path), self.headers.get("Range")))

    def do_HEAD(self) -> None:
        self._record()
        self._resolve()

    def do_GET(self) -> None:
        self._record()
        path = unquote(urlparse(self.path).path)
        if path.startswith("/api/models/"):
            rest = path.removeprefix("/api/models/")
            repo_id = "/".join(rest.split("/")[:2])
            self._model_info(repo_id)
        elif "/resolve/" in path:
            self._resolve()
        else:
            self._error(404, "NotFound", f"no route {path}")

    def do_POST(self) -> None:
        self._record()
        path = unquote(urlparse(self.path).path)
        body = self._body()
        if path == "/api/repos/create":
            request = json.loads(body or b"{}")
            repo_id = f"{request.get('organization')}/{request['name']}" if request.get("organization") else request["name"]
            with self.hub.lock:
                if repo_id in self.hub.repos:
                    self._send_json({"error": "You already created this model repo",
                                     "url": f"http://{self.headers['Host']}/{repo_id}"}, 409,
                                    {"X-Error-Code": "RepoExists"})
                    return
                self.hub.repos[repo_id] = {}
                self.hub.private[repo_id] = request.get("visibility", "private" if request.get("private") else "public") == "private"
            self._send_json({"url": f"http://{self.headers['Host']}/{repo_id}", "name": repo_id})
            return
        if path == "/api/validate-yaml":  # create_commit checks a README.md's metadata header
            self._send_json({"errors": [], "warnings": []})
            return
        parts = path.removeprefix("/api/models/").split("/")
        repo_id, action = "/".join(parts[:2]), parts[2] if len(parts) > 2 else ""
        if repo_id not in self.hub.repos:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        elif not self._authorised(repo_id):
            self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted")
        elif action == "paths-info":
            wanted = parse_qs(body.decode()).get("paths", [])
            files = self.hub.files_of(repo_id)
            self._send_json([self.hub.entry(p, files[p]) for p in wanted if p in files])
        elif action == "preupload":
            request = json.loads(body)
            self._send_json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                       for f in request["files"]]})
        elif action == "commit":
            added = {}
            for line in body.decode().splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    added[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            with self.hub.lock:
                self.hub.repos[repo_id].update(added)
                self.hub.commits.append({"repo_id": repo_id, "files": sorted(added)})
            oid = self.hub.commit_of(repo_id)
            self._send_json({"commitUrl": f"http://{self.headers['Host']}/{repo_id}/commit/{oid}", "commitOid": oid,
                             "success": True})
        else:
            self._error(404, "NotFound", f"no route {path}")

    def _model_info(self, repo_id: str) -> None:
        if repo_id not in self.hub.repos:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return
        if not self._authorised(repo_id):
            self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted")
            return
        licence = self.hub.licences.get(repo_id)
        self._send_json({"id": repo_id, "modelId": repo_id, "sha": self.hub.commit_of(repo_id),
                         "private": self.hub.private.get(repo_id, False), "gated": repo_id in self.hub.gated,
                         "tags": [f"license:{licence}"] if licence else [],
                         "cardData": {"license": licence} if licence else {},
                         "siblings": [{"rfilename": p} for p in sorted(self.hub.files_of(repo_id))]})

    def _resolve(self) -> None:
        path = unquote(urlparse(self.path).path).lstrip("/")
        head, _, rest = path.partition("/resolve/")
        repo_id = head
        _revision, _, name = rest.partition("/")
        commit = self.hub.commit_of(repo_id)
        files = self.hub.files_of(repo_id)
        if repo_id not in self.hub.repos:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return
        if not self._authorised(repo_id):
            self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted")
            return
        if name not in files:
            self._send_json({"error": "Entry not found"}, 404, {"X-Error-Code": "EntryNotFound",
                                                                 "X-Repo-Commit": commit})
            return
        data = files[name]
        key = (repo_id, name)
        if key in self.hub.stall:  # accept, then say nothing: the client's timeout must end the wait
            self.hub.released.wait(timeout=120)
            self.close_connection = True
            return
        row = self.hub.entry(name, data)
        etag = row["lfs"]["oid"] if "lfs" in row else row["oid"]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if "lfs" in row:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
        if self.command == "HEAD":
            self.send_response(200)
            for k, v in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(k, v)
            self.end_headers()
            return
        with self.hub.lock:
            cut = key in self.hub.cut_once and key not in self.hub._cut_done
            failing = key in self.hub.fail_after_cut and key in self.hub._cut_done
            if cut:
                self.hub._cut_done.add(key)
            corrupt = self.hub.corrupt.get(key, 0) > 0
            if corrupt:
                self.hub.corrupt[key] -= 1
        if failing:
            with self.hub.lock:
                self.hub.fail_after_cut.discard(key)
            self._error(503, "Unavailable", "the test server refuses this file once after cutting it")
            return
        body = bytes([data[0] ^ 0xFF]) + data[1:] if corrupt else data
        start = 0
        requested = self.headers.get("Range")
        if requested and requested.startswith("bytes="):
            start = int(requested.removeprefix("bytes=").split("-")[0])
        part = body[start:]
        self.send_response(206 if start else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(part)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        if cut:
            self.send_header("Connection", "close")
        self.end_headers()
        if cut:
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(part)


@contextmanager
def serve(hub: FakeHub) -> Iterator[str]:
    """Serve ``hub`` on 127.0.0.1 (a free port) while the block runs; yields the endpoint URL."""
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        hub.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def silent_hub() -> Iterator[str]:
    """A "Hub" on 127.0.0.1 that accepts every connection and never answers (held open until the block ends).

    Yields its endpoint URL; the listener and every held connection are closed when the block ends."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # so the accepting thread sees the stop flag
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=10)
        for connection in held:
            connection.close()
        listener.close()
