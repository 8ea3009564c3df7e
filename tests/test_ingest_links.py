"""Links: a direct mp4 and a page yt-dlp's generic extractor reads, served from 127.0.0.1 (no test reaches the
internet), fetched, sliced and listed with their source; a cut download resumes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.links import fetch_links
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.store import IngestStore
from tests.ingest_factory import EnergyVad, encode_media, tone_speech
from tests.media_server import serving


def _talk(seed: int) -> np.ndarray:
    return np.concatenate([np.zeros(12000, np.float32), tone_speech(2.0, 24000, seed), np.zeros(24000, np.float32),
                           tone_speech(2.5, 24000, seed + 1), np.zeros(12000, np.float32)])


def _site(root: Path) -> Path:
    encode_media(root / "direct.mp4", _talk(1), 24000, video_seconds=1.0)
    encode_media(root / "lecture.mp4", _talk(3), 24000, video_seconds=1.0)
    (root / "lecture.vtt").write_text("WEBVTT\n\n00:00.500 --> 00:02.500\nሰላም ለዓለም\n\n"
                                      "00:03.500 --> 00:06.000\nእንዴት ናችሁ\n", encoding="utf-8")
    (root / "page.html").write_text(
        '<html><head><title>A lecture</title></head><body><video controls><source src="lecture.mp4" '
        'type="video/mp4"><track kind="subtitles" srclang="am" src="lecture.vtt"></video></body></html>',
        encoding="utf-8")
    return root


def test_a_direct_mp4_and_a_page_are_fetched_sliced_and_listed_with_their_source(tmp_path: Path) -> None:
    with serving(_site(tmp_path / "site")) as server:
        urls = (f"{server.url}/direct.mp4", f"{server.url}/page.html", f"{server.url}/missing.mp4")
        settings = IngestSettings(None, tmp_path / "out", language="am", urls=urls, licence="CC-BY-4.0")
        summary = run_ingest(settings, vad_model=EnergyVad())
        assert len(summary.problems) == 1 and "missing.mp4" in summary.problems[0] and "404" in summary.problems[0]
        rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
        by_link = {url: [r for r in rows if r["origin_url"] == url] for url in urls[:2]}
        assert [len(v) for v in by_link.values()] == [2, 2], rows
        assert all(r["licence"] == "CC-BY-4.0" for r in rows)
        assert [r["given_text"] for r in by_link[urls[1]]] == ["ሰላም ለዓለም", "እንዴት ናችሁ"]  # its subtitles cut it
        listed = IngestStore(tmp_path / "out").list_clips(page_size=10).clips
        assert {c["origin_url"] for c in listed} == set(urls[:2])

        again = run_ingest(settings, vad_model=EnergyVad())  # nothing fetched or sliced twice
        assert again.sources_done_before == 2 and again.clips == 4
        assert not server.ranges


def test_a_cut_download_resumes_where_it_stopped(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    with serving(site) as server:
        url = f"{server.url}/direct.mp4"
        server.cut = True
        first = fetch_links([url], tmp_path / "dl", retries=0)
        assert not first.files and len(first.problems) == 1 and url in first.problems[0].line()
        part = next((tmp_path / "dl").glob("*.part"))
        kept = part.stat().st_size
        assert 0 < kept < (site / "direct.mp4").stat().st_size
        server.cut = False
        second = fetch_links([url], tmp_path / "dl", retries=0)
        assert len(second.files) == 1 and second.problems == []
        assert server.ranges == [f"bytes={kept}-"]  # only the rest was asked for
        assert second.files[0].read_bytes() == (site / "direct.mp4").read_bytes()


def test_two_links_with_the_same_file_name_are_two_recordings(tmp_path: Path) -> None:
    site = tmp_path / "site"
    encode_media(site / "ep1" / "audio.m4a", _talk(5), 24000)
    encode_media(site / "ep2" / "audio.m4a", _talk(7), 24000)
    with serving(site) as server:
        urls = (f"{server.url}/ep1/audio.m4a", f"{server.url}/ep2/audio.m4a")
        settings = IngestSettings(None, tmp_path / "out", language="am", urls=urls)
        summary = run_ingest(settings, vad_model=EnergyVad())
        assert summary.problems == [] and summary.sources == 2
        fetched = sorted(p for p in (tmp_path / "out" / "downloads").glob("*.m4a"))
        assert len(fetched) == 2 and all("audio" in p.name for p in fetched)  # readable, and unique
        assert {p.read_bytes() for p in fetched} == {(site / e / "audio.m4a").read_bytes() for e in ("ep1", "ep2")}
        rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
        assert {url: sum(r["origin_url"] == url for r in rows) for url in urls} == {urls[0]: 2, urls[1]: 2}
        again = fetch_links(list(urls), tmp_path / "out" / "downloads")  # each link is remembered by itself
        assert again.files == [] and again.skipped == 2 and again.problems == []
