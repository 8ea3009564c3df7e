"""The speech server (``python -m trainer.serve``) through OpenAI's own Python client: an export of every
generation speaks in wav and mp3, the audio streams sentence by sentence, a bad key, an unknown voice and an
over-long text each get one clear HTTP error, and with one slot two requests take turns (or one is told "busy").

The server runs in this process (uvicorn in a thread) on 127.0.0.1; the exports are built from the tiny download
folders and the demo (no download, no training), and decode a few codes only."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from tests.studio_process import free_port
from trainer.serving.app import ServerSettings, create_app
from webui.jobs.process_tools import wait_until

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 60.0


@contextlib.contextmanager
def serving(speaker, voices: dict[str, Path], **settings) -> Iterator[str]:
    """``create_app(speaker, ...)`` served on a free port: yields the API's base URL (…/v1)."""
    import uvicorn

    port = free_port()
    app = create_app(speaker, ServerSettings(voices=voices, **settings))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert wait_until(lambda: server.started, WAIT_S, interval_s=0.05), "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)


def client(base_url: str, key: str = "none"):
    from openai import OpenAI

    return OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=WAIT_S)


def _voice(path: Path, rate: int = 22050) -> Path:
    t = np.arange(int(rate * 1.2)) / rate
    sf.write(path, (0.3 * np.sin(2 * np.pi * 170 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32),
             rate)
    return path


# -- a real export of every generation ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def english_tokenizer(tmp_path_factory) -> Path:
    from data_tools.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("serve-tok")
    return train_tokenizer([REPO / "tests" / "fixtures" / "corpus" / "english_train.txt"], root / "en",
                           vocab_size=90, language="en")


def _export_v2(tmp_path: Path, tokenizer: Path) -> tuple[Path, Path, str, str | None]:
    from tests.test_export_speaks import _v2_run
    from trainer.checkpoints import export_checkpoint

    base, checkpoint = _v2_run(tmp_path, tokenizer)
    export_checkpoint(checkpoint, tmp_path / "exports" / "v2_voice", config=base / "config.yaml")
    return tmp_path / "exports" / "v2_voice", _voice(tmp_path / "amina.wav"), "Hello there. How are you?", None


def _export_v25(tmp_path: Path) -> tuple[Path, Path, str, str | None]:
    from tests.indextts25_folder import expected
    from tests.test_export_speaks import v25_run
    from trainer.checkpoints import export_checkpoint

    base, checkpoint = v25_run(tmp_path)
    export_checkpoint(checkpoint, tmp_path / "exports" / "v25_voice", config=base / "config.yaml")
    item = expected()["items"][0]
    voice = tmp_path / "amina.wav"
    sf.write(voice, item["wav_int16"].reshape(-1).numpy(), int(item["wav_sr"]), subtype="PCM_16")
    return tmp_path / "exports" / "v25_voice", voice, "ሰላም። እንዴት ነህ?", "am"


def _export_v15(tmp_path: Path, demo_workspace) -> tuple[Path, Path, str, str | None]:
    from data_tools.config import load_config
    from data_tools.text_tokenizer import TextTokenizer
    from tests.checkpoint_factory import make_checkpoint, trained_state
    from trainer.checkpoints import export_checkpoint, tokenizer_record

    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    gpt = dict(load_config(demo_workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    checkpoint = tmp_path / "run" / "latest.pth"
    checkpoint.parent.mkdir()
    torch.save(make_checkpoint(3, gpt=gpt, state=trained_state(gpt, steps=1, seed=3),
                               tokenizer=tokenizer_record(demo_workspace.extended_tokenizer)), checkpoint)
    export_checkpoint(checkpoint, tmp_path / "exports" / "v15_voice", config=demo_workspace.config)
    return tmp_path / "exports" / "v15_voice", _voice(tmp_path / "amina.wav", 24000), "ሰላም። እንዴት ነህ?", "am"


@pytest.mark.slow
@pytest.mark.parametrize("generation", ["1.5", "2", "2.5"])
def test_an_export_of_every_generation_speaks_wav_and_mp3_to_the_openai_client(generation, demo_workspace,
                                                                                english_tokenizer, tmp_path):
    from tests.indextts25_folder import tiled_features
    from trainer.serving.model import ServedModel
    from trainer.synthesis.generation import DecodeSettings

    build = {"1.5": lambda: _export_v15(tmp_path, demo_workspace), "2": lambda: _export_v2(tmp_path, english_tokenizer),
             "2.5": lambda: _export_v25(tmp_path)}[generation]
    folder, voice, text, language = build()
    with tiled_features():  # the 2.5 folder's tiny w2v-BERT features (the others ignore it)
        model = ServedModel(folder, "cpu", language, decode=DecodeSettings(mode="greedy", max_codes=4))
        with serving(model, {"amina": voice}) as url:
            api = client(url)
            assert [m.id for m in api.models.list().data] == [folder.name]
            for fmt in ("wav", "mp3"):
                spoken = api.audio.speech.create(model=folder.name, voice="amina", input=text, response_format=fmt)
                audio, rate = sf.read(io.BytesIO(spoken.content))
                assert rate == model.sample_rate and audio.size > 0, (generation, fmt)


# -- the protocol, on a stand-in speaker ----------------------------------------------------------------------
class ToneSpeaker:
    """Speaks ``seconds`` of tone per sentence; ``before(n)`` runs before the n-th sentence (1-based)."""

    name, sample_rate = "demo-voice", 22050

    def __init__(self, before=None, seconds: float = 0.2) -> None:
        self.before, self.spoken, self.seconds = before, [], seconds

    def speak(self, sentence: str, voice: Path) -> np.ndarray:
        if self.before is not None:
            self.before(len(self.spoken) + 1)
        self.spoken.append(sentence)
        return (0.2 * np.sin(np.arange(int(self.sample_rate * self.seconds)) / 7)).astype(np.float32)


def test_the_audio_streams_sentence_by_sentence(tmp_path):
    """The client holds the first sentence's audio before the server speaks the second one."""
    first_audio, early = threading.Event(), []

    def before(n: int) -> None:
        if n == 2:
            early.append(first_audio.wait(WAIT_S))

    speaker = ToneSpeaker(before)
    received = b""
    with serving(speaker, {"amina": _voice(tmp_path / "a.wav")}) as url, \
            client(url).audio.speech.with_streaming_response.create(
                model="demo-voice", voice="amina", input="One. Two. Three.", response_format="pcm") as response:
        for chunk in response.iter_bytes():
            received += chunk
            if received:
                first_audio.set()
    assert early == [True] and speaker.spoken == ["One.", "Two.", "Three."]
    assert len(received) == 3 * (24000 // 5) * 2  # pcm: 16-bit at 24 kHz, every sentence


def test_a_bad_key_an_unknown_voice_and_an_overlong_text_each_get_one_clear_error(tmp_path):
    import openai

    voices = {"amina": _voice(tmp_path / "a.wav")}
    with serving(ToneSpeaker(), voices, api_key="s3cret", max_characters=40) as url:
        with pytest.raises(openai.AuthenticationError) as denied:
            client(url, "wrong").audio.speech.create(model="demo-voice", voice="amina", input="Hi.")
        good = client(url, "s3cret")
        with pytest.raises(openai.BadRequestError) as unknown:
            good.audio.speech.create(model="demo-voice", voice="alloy", input="Hi.")
        with pytest.raises(openai.BadRequestError) as long:
            good.audio.speech.create(model="demo-voice", voice="amina", input="x" * 41)
        with pytest.raises(openai.NotFoundError) as other_model:
            good.audio.speech.create(model="someone-else", voice="amina", input="Hi.")
        assert good.audio.speech.create(model="tts-1", voice="amina", input="Hi.", response_format="wav").content
    messages = [e.value.body["message"] for e in (denied, unknown, long, other_model)]
    assert "valid API key" in messages[0]
    assert messages[1] == "unknown voice 'alloy': this server has amina"
    assert messages[2] == "input is 41 characters; this server speaks at most 40 per request"
    assert "not found" in messages[3] and all("\n" not in m for m in messages)


@pytest.mark.parametrize("queue", [1, 0])
def test_with_one_slot_a_second_request_waits_its_turn_or_is_told_busy(tmp_path, queue: int):
    import openai

    speaking, release = threading.Event(), threading.Event()

    def before(n: int) -> None:
        if n == 1:
            speaking.set()
            assert release.wait(WAIT_S)

    outcome: dict[str, object] = {}
    voices = {"amina": _voice(tmp_path / "a.wav")}
    with serving(ToneSpeaker(before), voices, concurrency=1, queue=queue) as url:
        def ask(name: str) -> None:
            try:
                outcome[name] = client(url).audio.speech.create(model="demo-voice", voice="amina", input="Hi.",
                                                                response_format="wav").content
            except openai.APIStatusError as exc:
                outcome[name] = exc
        first = threading.Thread(target=ask, args=("first",))
        first.start()
        assert speaking.wait(WAIT_S)
        second = threading.Thread(target=ask, args=("second",))
        second.start()
        if queue:
            health = url.removesuffix("/v1") + "/health"
            import json
            import urllib.request

            def waiting() -> int:
                with urllib.request.urlopen(health, timeout=5) as reply:
                    return json.load(reply)["waiting"]
            assert wait_until(lambda: waiting() == 1, WAIT_S, interval_s=0.05)
        else:
            second.join(WAIT_S)
        release.set()
        first.join(WAIT_S)
        second.join(WAIT_S)
    assert isinstance(outcome["first"], bytes) and outcome["first"]
    if queue:
        assert isinstance(outcome["second"], bytes) and outcome["second"]  # waited, then spoke
    else:
        busy = outcome["second"]
        assert isinstance(busy, openai.APIStatusError) and busy.status_code == 503
        assert busy.body["message"].startswith("busy: 1 request(s) speaking")


def test_the_cli_refuses_a_folder_without_a_model_and_a_missing_voice_in_one_line(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainer.serve", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    voice = _voice(tmp_path / "a.wav")
    no_model = run(str(tmp_path / "nothing"), "--voice", f"amina={voice}")
    assert no_model.returncode == 2 and no_model.stderr.count("\n") == 1
    assert "config.yaml is missing" in no_model.stderr
    no_voice = run(str(tmp_path), "--voice", f"amina={tmp_path / 'gone.wav'}")
    assert no_voice.returncode == 2 and "audio not found" in no_voice.stderr


def test_a_projects_speakers_become_voices_by_name(demo_workspace):
    """``--voices-from`` a validation manifest of any generation's format: one voice per speaker with audio
    prompts (its first), named after the speaker; a manifest whose prompts are no audio gives none, not an error."""
    from generations.registry import demo_paths
    from trainer.serving.voices import VoiceError, speaker_voices

    manifests = sorted(m for folder in demo_paths(demo_workspace.root, "data") for m in folder.glob("val*.jsonl"))
    found = {manifest.parent.parent.name: speaker_voices(manifest) for manifest in manifests}
    assert len(found) == len(manifests) >= 3 and sum(bool(voices) for voices in found.values()) >= 2, found
    for voices in found.values():
        assert all(path.is_file() and path.suffix in (".wav", ".flac") for path in voices.values())
    with pytest.raises(VoiceError, match="--voices-from"):
        speaker_voices(demo_workspace.root / "no-such.jsonl")


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_changes_the_length_not_the_pitch_and_a_speed_out_of_range_is_refused(tmp_path, speed: float):
    import openai

    voices = {"amina": _voice(tmp_path / "a.wav")}
    with serving(ToneSpeaker(seconds=2.0), voices) as url:
        api = client(url)
        normal = api.audio.speech.create(model="demo-voice", voice="amina", input="One.", response_format="wav")
        changed = api.audio.speech.create(model="demo-voice", voice="amina", input="One.", response_format="wav",
                                          speed=speed)
        with pytest.raises(openai.BadRequestError, match=r"outside 0\.25 to 4\.0"):
            api.audio.speech.create(model="demo-voice", voice="amina", input="One.", speed=5.0)
    base, rate = sf.read(io.BytesIO(normal.content))
    stretched, _ = sf.read(io.BytesIO(changed.content))
    assert len(stretched) == pytest.approx(len(base) / speed, rel=0.05)

    def pitch(wave: np.ndarray) -> float:
        spectrum = np.abs(np.fft.rfft(wave * np.hanning(len(wave))))
        return float(np.argmax(spectrum) * rate / len(wave))
    assert pitch(stretched) == pytest.approx(pitch(base), rel=0.05)
