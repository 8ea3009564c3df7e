"""Links in: a video page, a direct media link or a playlist, fetched with yt-dlp into a folder of recordings.

Audio only at the best quality offered (``bestaudio/best``: a page with no audio-only format gives its best
file and PyAV takes the audio track out of it), the subtitles in the chosen language beside it when the page has
them (renamed ``<name>.vtt``/``.srt``, so the slicer cuts at their cues), and ``<name>.source.json`` recording
where it came from: the link, the page, title, uploader, the licence the page states and the one the user gave.

Resumable: a download a kill or a dropped connection cut short stays as ``.part`` and the next run asks the
server for the rest (an HTTP range request); what a link fetched is listed in ``fetched/<digest>.txt`` (yt-dlp's
download archive, one per link) and not fetched again. A link that fails is one problem line; the others go on.

Fetched files are keyed by the whole link, not by the name the server gives: ``<extractor>-<id>-<digest>.<ext>``,
where ``<digest>`` is the first 10 hex digits of the link's sha256 (``link_key``), so ``.../ep1/audio.mp3`` and
``.../ep2/audio.mp3`` (both id ``audio``) are two recordings, and a name stays readable.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_tools.ingest.jsonfiles import write_json
from data_tools.ingest.sources import ORIGIN_SUFFIX, Problem

ARCHIVES = "fetched"  # one yt-dlp download archive per link: <digest>.txt
SUBTITLE_FORMATS = ("vtt", "srt")


class LinkError(ValueError):
    """A link that cannot be fetched (one line: the link and the reason)."""


@dataclass
class FetchResult:
    files: list[Path] = field(default_factory=list)  # the media fetched in this run
    skipped: int = 0  # links fetched by an earlier run
    problems: list[Problem] = field(default_factory=list)


class _Log:
    """yt-dlp's messages kept (its errors become our one line), never printed."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def debug(self, message: str) -> None:
        pass

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def error(self, message: str) -> None:
        self.errors.append(" ".join(message.removeprefix("ERROR: ").split()))


def is_link(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def fetch_links(urls: list[str], into: Path, subtitle_language: str | None = None, licence: str | None = None,
                retries: int = 3, progress: Callable[[int, int], None] | None = None) -> FetchResult:
    """Each link (a page, a direct media link, a playlist) fetched into ``into``; see the module's text."""
    import yt_dlp

    into.mkdir(parents=True, exist_ok=True)
    result = FetchResult()
    for done, url in enumerate(urls):
        if progress:
            progress(done, len(urls))
        if not is_link(url):
            result.problems.append(Problem(url, "not an http(s) link"))
            continue
        log = _Log()
        options = _options(into, link_key(url), subtitle_language, retries, log)
        try:
            with yt_dlp.YoutubeDL(options) as downloader:
                info = downloader.extract_info(url, download=True)
        except yt_dlp.utils.YoutubeDLError as exc:
            reason = log.errors[-1] if log.errors else " ".join(str(exc).removeprefix("ERROR: ").split())
            result.problems.append(Problem(url, f"cannot fetch it ({reason[:300]}); rerun to continue a cut "
                                                "download"))
            continue
        entries = _entries(info)
        if not entries:
            result.skipped += 1  # in the download archive: fetched by an earlier run
        for entry in entries:
            media = _downloaded(entry)
            if media is None:
                if entry.get("id") is not None:
                    result.skipped += 1
                continue
            _keep_subtitles(entry, media)
            write_json(media.with_name(media.stem + ORIGIN_SUFFIX), origin_fields(entry, url, licence))
            result.files.append(media)
    if progress:
        progress(len(urls), len(urls))
    return result


def link_key(url: str) -> str:
    """The link's own part of its files' names: two links never share one, whatever their file names."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:10]


def _options(into: Path, key: str, subtitle_language: str | None, retries: int, log: _Log) -> dict[str, Any]:
    (into / ARCHIVES).mkdir(exist_ok=True)
    return {
        "format": "bestaudio/best",
        "paths": {"home": str(into), "temp": str(into)},
        "outtmpl": {"default": f"%(extractor)s-%(id)s-{key}.%(ext)s"},
        "restrictfilenames": True,
        "writesubtitles": bool(subtitle_language),
        "subtitleslangs": [subtitle_language] if subtitle_language else [],
        "subtitlesformat": "/".join(SUBTITLE_FORMATS) + "/best",
        "download_archive": str(into / ARCHIVES / f"{key}.txt"),
        "continuedl": True,
        "retries": retries,
        "fragment_retries": retries,
        "socket_timeout": 30,
        "noplaylist": False,
        "ignoreerrors": False,
        "overwrites": False,
        "logger": log,
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "color": {"stdout": "never", "stderr": "never"},
    }


def _entries(info: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not info:
        return []
    if info.get("_type") in ("playlist", "multi_video"):
        return [entry for item in info.get("entries") or [] for entry in _entries(item)]
    return [info]


def _downloaded(entry: dict[str, Any]) -> Path | None:
    for download in entry.get("requested_downloads") or []:
        path = download.get("filepath")
        if path and Path(path).is_file():
            return Path(path)
    return None


def _keep_subtitles(entry: dict[str, Any], media: Path) -> None:
    """``<name>.<lang>.vtt`` -> ``<name>.vtt``: the slicer pairs a recording with the subtitle of its stem."""
    for track in (entry.get("requested_subtitles") or {}).values():
        path = Path(track.get("filepath") or "")
        if path.is_file() and path.suffix.lower() in tuple(f".{s}" for s in SUBTITLE_FORMATS):
            path.replace(media.with_suffix(path.suffix.lower()))
            return


def origin_fields(entry: dict[str, Any], url: str, licence: str | None) -> dict[str, Any]:
    """Where a fetched recording came from: kept beside it and carried by its clips."""
    return {"url": url, "page": entry.get("webpage_url") or url, "title": entry.get("title"),
            "uploader": entry.get("uploader"), "licence": licence or entry.get("license"),
            "licence_stated": entry.get("license"), "extractor": entry.get("extractor"), "id": entry.get("id"),
            "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
