"""Issue 31 item 1: base models from a Hub-like server on 127.0.0.1 (never the internet).

Downloads resume after a cut connection and after an interrupted run, every file is checked against the Hub's
checksum (a corrupted body or a damaged local file is refused by name and fetched again), a missing file and
offline mode end in one line, and the downloaded IndexTTS2 folder loads strictly in synthesis and training.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub_server import TOKEN, FakeHub, serve
from trainer.models.catalog import HubSource, ModelSet, all_sets
from trainer.models.fetch import DigestMismatch, DownloadInterrupted, fetch_set, partial_path
from trainer.models.hub import HubProblem
from trainer.models.integrity import verify_folder
from trainer.models.record import read_record

REPO = Path(__file__).resolve().parents[1]
BIG = 24 * 1024 * 1024  # over huggingface_hub's 10 MiB download chunk, so a cut leaves bytes on disk
TOY = ModelSet("toy", "Toy", "toy", "asr", (
    HubSource("org/toy", ("config.json",), weights=("model.safetensors", "pytorch_model.bin"),
              optional=("vocab.json",), licence="MIT"),
    HubSource("org/vocoder", ("bigvgan_generator.pt",), subfolder="bigvgan"),
))


def toy_hub(weights: bytes = b"w" * 4096) -> FakeHub:
    return FakeHub({"org/toy": {"config.json": b'{"model_type": "toy"}', "model.safetensors": weights,
                                "vocab.json": b"{}", "README.md": b"# toy"},
                    "org/vocoder": {"bigvgan_generator.pt": b"v" * 3000}}, licences={"org/toy": "mit"})


@pytest.fixture
def endpoint(monkeypatch):
    """Serve a hub (set ``endpoint.hub`` first) and point HF_ENDPOINT at it; stopped after the test."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)

    class Served:
        def __init__(self) -> None:
            self.stack: list = []

        def start(self, hub: FakeHub) -> str:
            context = serve(hub)
            url = context.__enter__()
            self.stack.append(context)
            monkeypatch.setenv("HF_ENDPOINT", url)
            return url

    served = Served()
    yield served
    for context in served.stack:
        context.__exit__(None, None, None)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def quiet(lines: list[str]):
    return lines.append


def test_download_lands_in_layout_with_digests_and_a_record(endpoint, tmp_path):
    hub = toy_hub()
    endpoint.start(hub)
    report = fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    assert (tmp_path / "toy" / "bigvgan" / "bigvgan_generator.pt").read_bytes() == b"v" * 3000
    assert (tmp_path / "toy" / "vocab.json").is_file() and not (tmp_path / "toy" / "README.md").exists()
    record = read_record(tmp_path / "toy")
    toy = record["sources"]["org/toy"]
    assert record["complete"] and toy["licence"] == "mit" and toy["revision"] == hub.commit_of("org/toy")
    assert toy["files"]["model.safetensors"]["digest"] == "sha256:" + sha256(b"w" * 4096)
    assert record["sources"]["org/vocoder@bigvgan"]["files"]["bigvgan/bigvgan_generator.pt"]["size"] == 3000
    assert sorted(row["local"] for row in report.files) == ["bigvgan/bigvgan_generator.pt", "config.json",
                                                            "model.safetensors", "vocab.json"]
    assert verify_folder(tmp_path / "toy") == []
    # a second run asks only for the listing: nothing is fetched again
    seen = len(hub.requests)
    again = fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    assert {row["action"] for row in again.files} == {"present"}
    assert not [path for method, path, _ in hub.requests[seen:] if "/resolve/" in path]


def test_connection_cut_half_way_resumes_with_a_range_request(endpoint, tmp_path):
    weights = random.Random(0).randbytes(BIG)
    hub = toy_hub(weights)
    hub.cut_once.add(("org/toy", "model.safetensors"))
    endpoint.start(hub)
    fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    ranges = hub.ranges_of("org/toy", "model.safetensors")
    assert ranges[0] is None and len(ranges) == 2
    assert ranges[1].startswith("bytes=") and 0 < int(ranges[1][6:].rstrip("-")) < BIG
    assert sha256((tmp_path / "toy" / "model.safetensors").read_bytes()) == sha256(weights)


def test_interrupted_run_keeps_its_bytes_and_the_next_run_continues(endpoint, tmp_path):
    weights = random.Random(1).randbytes(BIG)
    hub = toy_hub(weights)
    hub.cut_once.add(("org/toy", "model.safetensors"))
    hub.fail_after_cut.add(("org/toy", "model.safetensors"))
    endpoint.start(hub)
    folder = tmp_path / "toy"
    with pytest.raises(DownloadInterrupted, match=r"HTTP 503 .*bytes of model\.safetensors kept .*: run the download again"):
        fetch_set(TOY, folder, progress=False, say=quiet([]))
    assert not (folder / "model.safetensors").exists()
    remote_digest = "sha256:" + sha256(weights)
    part = next(folder.glob(".model.safetensors.*.incomplete"))
    kept = part.stat().st_size
    assert 0 < kept < BIG and not read_record(folder)["complete"]
    fetch_set(TOY, folder, progress=False, say=quiet([]))
    assert hub.ranges_of("org/toy", "model.safetensors")[-1] == f"bytes={kept}-"
    assert read_record(folder)["sources"]["org/toy"]["files"]["model.safetensors"]["digest"] == remote_digest
    assert sha256((folder / "model.safetensors").read_bytes()) == sha256(weights) and not part.exists()


def test_a_corrupted_body_is_refused_by_name_and_fetched_again(endpoint, tmp_path):
    hub = toy_hub()
    hub.corrupt[("org/toy", "model.safetensors")] = 1
    hub.corrupt[("org/toy", "config.json")] = 1
    endpoint.start(hub)
    said: list[str] = []
    fetch_set(TOY, tmp_path / "toy", progress=False, say=said.append)
    refused = [line for line in said if line.startswith("refused:")]
    assert any("model.safetensors" in line and "sha256" in line for line in refused)
    assert any("config.json" in line and "git-sha1" in line for line in refused)
    assert len(hub.ranges_of("org/toy", "model.safetensors")) == 2
    assert (tmp_path / "toy" / "model.safetensors").read_bytes() == b"w" * 4096


def test_a_body_corrupted_every_time_ends_the_run_naming_the_file(endpoint, tmp_path):
    hub = toy_hub()
    hub.corrupt[("org/toy", "model.safetensors")] = 5
    endpoint.start(hub)
    with pytest.raises(DigestMismatch, match=r"model\.safetensors: the downloaded file's sha256:\w+ does not match"):
        fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    assert not (tmp_path / "toy" / "model.safetensors").exists()
    assert not list((tmp_path / "toy").glob(".*.incomplete"))


def test_a_damaged_local_file_is_refused_by_name_and_fetched_again(endpoint, tmp_path):
    hub = toy_hub()
    endpoint.start(hub)
    folder = tmp_path / "toy"
    fetch_set(TOY, folder, progress=False, say=quiet([]))
    damaged = folder / "bigvgan" / "bigvgan_generator.pt"
    damaged.write_bytes(b"x" + b"v" * 2999)
    assert verify_folder(folder) == [f"{damaged}: sha256:{sha256(b'x' + b'v' * 2999)} does not match the recorded "
                                     f"sha256:{sha256(b'v' * 3000)}"]
    said: list[str] = []
    fetch_set(TOY, folder, progress=False, say=said.append)
    assert any(line.startswith(f"refused: {damaged} has sha256:") for line in said)
    assert damaged.read_bytes() == b"v" * 3000


def test_a_file_missing_on_the_hub_is_named(endpoint, tmp_path):
    hub = toy_hub()
    hub.missing.add(("org/vocoder", "bigvgan_generator.pt"))
    endpoint.start(hub)
    with pytest.raises(HubProblem, match=r"^org/vocoder \(revision \w+\) has no bigvgan_generator.pt"):
        fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))


def test_a_weights_alternative_is_taken_when_the_first_is_absent(endpoint, tmp_path):
    hub = toy_hub()
    hub.repos["org/toy"]["pytorch_model.bin"] = hub.repos["org/toy"].pop("model.safetensors")
    endpoint.start(hub)
    fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    assert (tmp_path / "toy" / "pytorch_model.bin").is_file()


def test_a_disk_too_small_is_refused_before_the_first_byte(endpoint, tmp_path, monkeypatch):
    import shutil

    hub = toy_hub()
    endpoint.start(hub)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**6, 10**6 - 100, 100))
    with pytest.raises(HubProblem, match=r"GB still to download but only 0\.00 GB free"):
        fetch_set(TOY, tmp_path / "toy", progress=False, say=quiet([]))
    assert not [path for _, path, _ in hub.requests if "/resolve/" in path]


def test_partial_file_names_carry_the_digest(tmp_path):
    from trainer.models.hub import RemoteFile

    remote = RemoteFile("a/b", "gpt.pth", "gpt.pth", 3, "ab" * 32, None)
    assert partial_path(tmp_path / "gpt.pth", remote).name == ".gpt.pth." + "ab" * 8 + ".incomplete"


# ---- the command line: one-line refusals, offline mode, tokens ----------------------------------------------------

def run_models(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    full = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    full.update(OMP_NUM_THREADS="1", HF_HUB_DISABLE_TELEMETRY="1", **env)
    return subprocess.run([sys.executable, "-m", "trainer.models", *args], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def closed_port_endpoint() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_offline_with_a_missing_file_says_so_in_one_line(tmp_path):
    env = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": closed_port_endpoint(), "HF_HOME": str(tmp_path / "hf")}
    result = run_models(["download", "indextts-2", "--workspace", str(tmp_path / "ws")], env, timeout=60)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith("error: offline (HF_HUB_OFFLINE is set): ") and "IndexTTS-2/config.yaml is not downloaded" in line
    assert "and 13 more file(s)" in line


def test_an_unreachable_hub_is_one_line_not_a_hang(tmp_path):
    env = {"HF_ENDPOINT": closed_port_endpoint(), "HF_HOME": str(tmp_path / "hf")}
    result = run_models(["download", "facebook/mms-1b-all", "--dir", str(tmp_path / "m")], env, timeout=90)
    assert result.returncode == 2
    assert "cannot reach the Hub at http://127.0.0.1:" in one_error_line(result)


def test_cli_downloads_a_gated_set_with_a_token_then_checks_it_offline(tmp_path):
    hub = toy_hub()
    hub.repos = {"facebook/mms-1b-all": {"config.json": b'{"model_type": "wav2vec2"}', "model.safetensors": b"m" * 999,
                                         "adapter.amh.safetensors": b"a" * 10, "adapter.fra.safetensors": b"f" * 10,
                                         "vocab.json": b"{}"}}
    hub.gated.add("facebook/mms-1b-all")
    folder = tmp_path / "ws" / "models" / "speech" / "facebook--mms-1b-all"
    with serve(hub) as url:
        base = {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf")}
        refused = run_models(["download", "facebook/mms-1b-all", "--workspace", str(tmp_path / "ws")], base)
        assert refused.returncode == 2 and "is gated" in one_error_line(refused)
        done = run_models(["download", "facebook/mms-1b-all", "--workspace", str(tmp_path / "ws"), "--json",
                           str(tmp_path / "report.json")], {**base, "HF_TOKEN": TOKEN})
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["adapter.amh.safetensors", "config.json", "hub_download.json",
                                                       "model.safetensors", "vocab.json"]
    assert "100%" in done.stderr  # the progress bar the studio's job panel reads
    offline = run_models(["download", "facebook/mms-1b-all", "--workspace", str(tmp_path / "ws")],
                         {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": closed_port_endpoint()})
    assert offline.returncode == 0 and "offline check only" in offline.stdout
    listed = run_models(["list", "facebook/mms-1b-all", "--workspace", str(tmp_path / "ws")], {"HF_HUB_OFFLINE": "1"})
    assert "present 3/3" in listed.stdout and "CC-BY-NC-4.0" in listed.stdout


def test_every_set_names_its_files_and_licences():
    names = [entry.name for entry in all_sets()]
    assert len(names) == len(set(names))
    for entry in all_sets():
        for source in entry.sources:
            assert source.licence and (source.files or source.weights)
    from data_tools.asr import SUGGESTED_AMHARIC_MODELS

    assert {m.model for m in SUGGESTED_AMHARIC_MODELS} <= set(names)


def test_listing_with_the_hub_shows_real_sizes_and_licence_tags(endpoint, tmp_path):
    from trainer.models.__main__ import catalogue_rows

    hub = toy_hub()
    hub.missing.add(("org/vocoder", "bigvgan_generator.pt"))
    endpoint.start(hub)
    toy, vocoder = catalogue_rows(tmp_path, (TOY,), hub=True)
    assert (toy["size"], toy["size_from"], toy["licence"]) == (21 + 4096 + 2, "hub", "mit")
    assert toy["revision"] == hub.commit_of("org/toy") and toy["present"] == 0
    assert vocoder["size_from"] == "about" and "has no bigvgan_generator.pt" in vocoder["note"]
