"""What the Hub says about a model set right now: the commit each repository resolves to, each file's real size
and checksum, and the repository's licence tag. Network problems become one-line :class:`HubProblem` errors.

The endpoint is ``HF_ENDPOINT`` (read when called, so a test server set in the environment is honoured) and the
token ``--token`` or else ``HF_TOKEN`` / the saved login (huggingface_hub's own lookup). Every request
huggingface_hub sends for us (model info, file lists, downloads, repository creation, uploads) waits at most
``HF_HUB_DOWNLOAD_TIMEOUT`` seconds (huggingface_hub's own setting, default 10) to connect and for each read and
write: :func:`bounded_session` puts that bound on its shared client, because several of its calls pass
``timeout=None`` (no limit) by default. A Hub that accepts the connection and never answers therefore ends in one
line that names the host and what timed out, never a hang.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from trainer.models.catalog import HubSource, ModelSet

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_ENV = "HF_HUB_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0


class HubProblem(RuntimeError):
    """The Hub could not answer as needed (unreachable, gated, missing repository or file): one line."""


class HubUnreachable(HubProblem):
    """No answer at all: the connection failed or a request timed out (asking again now would wait again)."""


def hub_problem(exc: BaseException, repo_id: str, what: str = "") -> HubProblem:
    """The one-line error for a failed Hub call; :class:`HubUnreachable` when nothing answered."""
    import httpx2

    kind = HubUnreachable if isinstance(exc, (httpx2.TransportError, OSError)) else HubProblem
    return kind(describe_error(exc, repo_id, what))


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def timeout_s() -> float:
    """Seconds any one Hub request may wait to connect, read or write (``HF_HUB_DOWNLOAD_TIMEOUT``, read when
    called; a missing, unreadable or non-positive value means the default)."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def _bounded_client() -> Any:
    """huggingface_hub's client (its request hook, redirects followed) whose every request is time-bounded."""
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    class BoundedClient(httpx2.Client):
        def send(self, request: Any, **kwargs: Any) -> Any:
            # Replaces the per-request timeout too: huggingface_hub passes timeout=None (wait forever) on many calls.
            request.extensions["timeout"] = httpx2.Timeout(timeout_s()).as_dict()
            return super().send(request, **kwargs)

    return BoundedClient(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True,
                         timeout=httpx2.Timeout(timeout_s()))


def bounded_session() -> None:
    """Make huggingface_hub's shared client the time-bounded one (once per process; call before any Hub call)."""
    from huggingface_hub.utils import _http

    if _http._GLOBAL_CLIENT_FACTORY is not _bounded_client:
        _http.set_client_factory(_bounded_client)


def offline_mode() -> bool:
    """huggingface_hub's own switch: HF_HUB_OFFLINE=1 (or yes/true/on)."""
    return (os.environ.get("HF_HUB_OFFLINE") or "").strip().lower() in ("1", "yes", "true", "on")


@dataclass(frozen=True)
class RemoteFile:
    repo_id: str
    path: str  # inside the repository
    local: str  # inside the model folder
    size: int
    sha256: str | None  # LFS files: the Hub's sha256
    git_sha1: str | None  # regular (non-LFS) files: the git blob id, the Hub's checksum for them

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha256}" if self.sha256 else f"git-sha1:{self.git_sha1}"


@dataclass(frozen=True)
class RemoteSource:
    source: HubSource
    revision: str  # the commit the files come from
    licence: str  # the Hub's license tag when it has one, else the catalogue's
    files: tuple[RemoteFile, ...]


def api(token: str | None = None) -> Any:
    from huggingface_hub import HfApi

    bounded_session()
    return HfApi(endpoint=endpoint(), token=token)


def describe_error(exc: BaseException, repo_id: str, what: str = "") -> str:
    """One line for a failed Hub call about ``repo_id`` (``what``: which call, e.g. "file list")."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}{' ' + what if what else ''}"
    if isinstance(exc, httpx2.TimeoutException):
        return timeout_line(exc, where)
    if isinstance(exc, OfflineModeIsEnabled):
        return f"{where}: offline mode is on (HF_HUB_OFFLINE), so the Hub was not asked"
    if isinstance(exc, GatedRepoError):
        return (f"{where}: the repository is gated: accept its terms on its model page, then give a token "
                "(--token or HF_TOKEN)")
    if isinstance(exc, RepositoryNotFoundError):
        return f"{where}: no such model on {endpoint()} (or it is private and no valid token was given)"
    if isinstance(exc, RevisionNotFoundError):
        return f"{where}: no such revision"
    if isinstance(exc, RemoteEntryNotFoundError):
        return f"{where}: the Hub has no such file"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return f"{where}: the Hub refused access (HTTP {status}): check the token (--token or HF_TOKEN)"
    if status is not None:
        said = exc.response.headers.get("X-Error-Message")  # type: ignore[attr-defined]
        return f"{where}: the Hub answered HTTP {status}" + (f" ({said})" if said else "")
    text = " ".join(str(exc).split())[:240] or type(exc).__name__
    return (f"{where}: cannot reach the Hub at {endpoint()} ({type(exc).__name__}: {text}); check the network, "
            "or set HF_HUB_OFFLINE=1 to use what is already downloaded")


_TIMEOUT_PHASES = {"ConnectTimeout": "to accept the connection", "ReadTimeout": "to answer",
                   "WriteTimeout": "to take the request", "PoolTimeout": "to free a connection"}


def timeout_line(exc: BaseException, where: str) -> str:
    """One line for a Hub request that timed out: which host, which call, which phase, and the setting."""
    try:
        host = exc.request.url.host  # type: ignore[attr-defined]  # a redirect's host (a CDN) when that one hung
    except (AttributeError, RuntimeError):
        host = urlparse(endpoint()).netloc
    phase = _TIMEOUT_PHASES.get(type(exc).__name__, "to answer")
    return (f"{where}: timed out: the Hub at {host} took longer than {timeout_s():g} s {phase} "
            f"({TIMEOUT_ENV} sets the limit); check the network, or set HF_HUB_OFFLINE=1 to use what is already "
            "downloaded")


def _hub_errors() -> tuple[type[BaseException], ...]:
    import httpx2

    return (httpx2.HTTPError, OSError, ValueError)


def licence_of(info: Any, fallback: str) -> str:
    card = getattr(info, "card_data", None)
    licence = getattr(card, "license", None) if card is not None else None
    if not licence:
        licence = next((tag.split(":", 1)[1] for tag in (getattr(info, "tags", None) or [])
                        if isinstance(tag, str) and tag.startswith("license:")), None)
    return str(licence) if licence else fallback


def resolve_source(source: HubSource, token: str | None = None) -> RemoteSource:
    """The commit, licence and files (size, checksum) of one source; refuses a missing required file."""
    client = api(token)
    try:
        info = client.model_info(source.repo_id, revision=source.revision, token=token, timeout=timeout_s())
    except _hub_errors() as exc:
        raise hub_problem(exc, source.repo_id, "model info") from None
    revision = str(info.sha or source.revision)
    names = {sibling.rfilename for sibling in (info.siblings or [])}
    missing = [name for name in source.files if name not in names]
    wanted = [name for name in source.files if name in names]
    if source.weights:
        weights = next((name for name in source.weights if name in names), None)
        if weights is None:
            missing.append(" or ".join(source.weights))
        else:
            wanted.append(weights)
    if missing:
        raise HubProblem(f"{source.repo_id} (revision {revision[:12]}) has no {', '.join(missing)}: the set needs "
                         f"{'it' if len(missing) == 1 else 'them'}")
    wanted += [name for name in source.optional if name in names]
    try:
        entries = client.get_paths_info(source.repo_id, wanted, revision=revision, token=token)
    except _hub_errors() as exc:
        raise hub_problem(exc, source.repo_id, "file list") from None
    by_path = {entry.path: entry for entry in entries if hasattr(entry, "size")}
    files = []
    for name in wanted:
        entry = by_path.get(name)
        if entry is None:
            raise HubProblem(f"{source.repo_id} (revision {revision[:12]}): the Hub lists {name} but gave no size "
                             "or checksum for it")
        lfs = getattr(entry, "lfs", None)
        files.append(RemoteFile(source.repo_id, name, source.local_path(name), int(entry.size),
                                getattr(lfs, "sha256", None) if lfs else None, None if lfs else entry.blob_id))
    return RemoteSource(source, revision, licence_of(info, source.licence), tuple(files))


def resolve_set(model_set: ModelSet, token: str | None = None) -> list[RemoteSource]:
    return [resolve_source(source, token) for source in model_set.sources]
