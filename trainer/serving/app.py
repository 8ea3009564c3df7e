"""The web app: OpenAI's audio API over one model (FastAPI; uvicorn serves it).

    POST /v1/audio/speech  {"model", "input", "voice", "response_format", "speed"}  -> audio, sent sentence by
                           sentence as it is spoken (wav, pcm, mp3; flac and opus once the text is spoken);
                           speed stretches it at the same pitch (trainer.serving.tempo)
    GET  /v1/models        the model this server speaks with
    GET  /health           {"status": "ok", ...} without a key

Errors are OpenAI's JSON (``{"error": {"message", "type", "code"}}``) with one line: 401 a missing or wrong key,
400 an unknown voice, a text too long or empty, a format it cannot write, a speed outside 0.25-4, 404 another model,
503 busy (every slot speaking and the queue full).
"""

from __future__ import annotations

import hmac
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from trainer.serving.audio_formats import FORMATS, StreamWriter
from trainer.serving.slots import Busy, SpeakingSlots
from trainer.serving.tempo import SPEED_RANGE, change_speed
from trainer.serving.voices import VoiceError, voice_path

# The names OpenAI's clients send for their own speech models: this server answers them with its one model.
OPENAI_SPEECH_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


class Speaker(Protocol):
    name: str
    sample_rate: int

    def speak(self, sentence: str, voice: Path) -> np.ndarray: ...


@dataclass(frozen=True)
class ServerSettings:
    voices: dict[str, Path]
    api_key: str | None = None
    max_characters: int = 4096  # OpenAI's own limit for one request
    concurrency: int = 1
    queue: int = 8
    wait_s: float = 300.0


class SpeechRequest(BaseModel):
    model: str
    input: str
    voice: Any
    response_format: str = "mp3"  # OpenAI's default
    speed: float = Field(default=1.0)
    instructions: str | None = None
    stream_format: str | None = None


class RequestProblem(Exception):
    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def error_response(status: int, message: str, code: str) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=status)


def _checked(request: SpeechRequest, speaker: Speaker, settings: ServerSettings) -> tuple[Path, str, list[str]]:
    from trainer.synthesis.segments import sentences

    if request.model not in (speaker.name, *OPENAI_SPEECH_MODELS):
        raise RequestProblem(404, f"model {request.model!r} not found: this server speaks {speaker.name!r}",
                             "model_not_found")
    try:
        clip = voice_path(settings.voices, request.voice)
    except VoiceError as exc:
        raise RequestProblem(400, str(exc), "unknown_voice") from None
    fmt = request.response_format
    if fmt not in FORMATS:
        raise RequestProblem(400, f"response_format {fmt!r} is not one this server writes: {', '.join(FORMATS)}",
                             "unsupported_format")
    if request.stream_format not in (None, "audio"):
        raise RequestProblem(400, "stream_format 'sse' is not served: the audio itself streams", "unsupported_format")
    low, high = SPEED_RANGE
    if not low <= request.speed <= high:
        raise RequestProblem(400, f"speed {request.speed} is outside {low} to {high}", "invalid_speed")
    text = request.input.strip()
    if not text:
        raise RequestProblem(400, "input is empty: give the text to speak", "empty_input")
    if len(text) > settings.max_characters:
        raise RequestProblem(400, f"input is {len(text)} characters; this server speaks at most "
                                  f"{settings.max_characters} per request", "input_too_long")
    return clip, fmt, sentences(text) or [text]


def _authorised(request: Request, settings: ServerSettings) -> bool:
    if not settings.api_key:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), settings.api_key.encode())


def create_app(speaker: Speaker, settings: ServerSettings) -> FastAPI:
    app = FastAPI(title="IndexTTS Fine-tuning Studio speech server", docs_url=None, redoc_url=None)
    slots = SpeakingSlots(settings.concurrency, settings.queue, settings.wait_s)
    created = int(time.time())

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": speaker.name, "voices": sorted(settings.voices), "waiting": slots.waiting}

    @app.get("/v1/models")
    def models(request: Request) -> Any:
        if not _authorised(request, settings):
            return error_response(401, "a valid API key is required (Authorization: Bearer ...)", "invalid_api_key")
        return {"object": "list", "data": [{"id": speaker.name, "object": "model", "created": created,
                                            "owned_by": "indextts-finetune-studio"}]}

    @app.post("/v1/audio/speech")
    def speech(body: SpeechRequest, request: Request) -> Any:
        if not _authorised(request, settings):
            return error_response(401, "a valid API key is required (Authorization: Bearer ...)", "invalid_api_key")
        try:
            clip, fmt, parts = _checked(body, speaker, settings)
            slots.acquire()
        except RequestProblem as exc:
            return error_response(exc.status, str(exc), exc.code)
        except Busy as exc:
            return error_response(503, str(exc), "busy")
        body_parts = _spoken(speaker, clip, fmt, parts, slots, body.speed)
        head = next(body_parts)  # started: its finally (the slot's release) runs even if the client leaves first
        return StreamingResponse(itertools.chain([head], body_parts), media_type=FORMATS[fmt].media_type)

    return app


def _spoken(speaker: Speaker, clip: Path, fmt: str, parts: list[str], slots: SpeakingSlots,
            speed: float = 1.0) -> Iterator[bytes]:
    """The response body, one sentence at a time; the slot is given back when it ends (or the client leaves)."""
    try:
        writer = StreamWriter(FORMATS[fmt], speaker.sample_rate)
        yield writer.start()
        for part in parts:
            chunk = writer.add(change_speed(speaker.speak(part, clip), speaker.sample_rate, speed))
            if chunk:
                yield chunk
        tail = writer.finish()
        if tail:
            yield tail
    finally:
        slots.release()
