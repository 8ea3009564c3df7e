"""Serve a fine-tuned voice with OpenAI's audio API: ``python -m trainer.serve EXPORT_FOLDER --voices DIR``.

    python -m trainer.serve exports/run1_latest --voices voices/ --port 8000 [--api-key KEY] [--concurrency 1]

Any client of OpenAI's speech endpoint then speaks with it, e.g. the official Python client::

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="KEY")
    client.audio.speech.create(model="run1_latest", voice="amina", input="ሰላም ለዓለም።", response_format="wav")

The folder is an export (``python -m trainer.checkpoints export``) or a base model folder of any generation
(config.yaml and gpt.pth inside). Voices are reference clips: every audio file of ``--voices DIR`` under its name
without the suffix, and ``--voice NAME=CLIP``. The API key comes from ``--api-key`` or STUDIO_SERVE_API_KEY; without
one the server answers anyone who reaches it, so it listens on 127.0.0.1 unless ``--host`` says otherwise.
``--concurrency`` requests are answered at once (they speak in turns, sentence by sentence), ``--queue`` more
wait up to ``--wait`` seconds; beyond that a request gets 503 "busy".

Exit codes: 0 stopped (Ctrl-C), 2 refused (one ``error:`` line: no such folder, no voice, a port in use).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from data_tools.cli import OneLineErrorParser
from trainer.errors import EXIT_OK, UsageError, run_cli

API_KEY_ENV = "STUDIO_SERVE_API_KEY"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m trainer.serve", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="an export folder (or a base model folder: config.yaml + gpt.pth)")
    parser.add_argument("--voices", type=Path, default=None, help="a folder of reference clips, one voice each")
    parser.add_argument("--voices-from", type=Path, default=None, metavar="MANIFEST",
                        help="one voice per speaker of a manifest (e.g. a project's val manifest), named after it")
    parser.add_argument("--voice", action="append", default=[], metavar="NAME=CLIP", help="one more voice")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every one)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=None, help=f"require this key (default: ${API_KEY_ENV}; none: open)")
    parser.add_argument("--concurrency", type=int, default=1, help="requests answered at once")
    parser.add_argument("--queue", type=int, default=8, help="requests that may wait for a slot")
    parser.add_argument("--wait", type=float, default=300.0, help="seconds a request waits for a slot at most")
    parser.add_argument("--max-characters", type=int, default=4096, help="the longest input one request may give")
    parser.add_argument("--max-codes", type=int, default=None,
                        help="the most speech codes one sentence may take (default: the model's limit)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--language", default=None, help="the text front-end's language (default: by script)")
    return parser


def _device(text: str) -> str:
    if text != "auto":
        return text
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _decode(args: argparse.Namespace) -> object:
    from trainer.synthesis.generation import DecodeSettings

    if args.max_codes is not None and args.max_codes < 1:
        raise UsageError("--max-codes must be at least 1")
    return DecodeSettings(max_codes=args.max_codes)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from trainer.serving.app import ServerSettings, create_app
    from trainer.serving.model import ModelError, ServedModel
    from trainer.serving.voices import VoiceError, registered_voices

    if args.concurrency < 1 or args.queue < 0 or args.wait <= 0 or args.max_characters < 1:
        raise UsageError("--concurrency and --max-characters must be at least 1, --queue at least 0, --wait above 0")
    try:
        voices = registered_voices(args.voices, list(args.voice), args.voices_from)
        model = ServedModel(args.model, _device(args.device), args.language, decode=_decode(args))
    except (VoiceError, ModelError) as exc:
        raise UsageError(str(exc)) from None
    settings = ServerSettings(voices=voices, api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
                              max_characters=args.max_characters, concurrency=args.concurrency, queue=args.queue,
                              wait_s=args.wait)
    app = create_app(model, settings)
    print(f"serving {model.name} ({model.generation}, {model.sample_rate} Hz) with voices "
          f"{', '.join(sorted(voices))} at http://{args.host}:{args.port}/v1"
          + ("" if settings.api_key else " (no API key: anyone who reaches it may use it)"), flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=30,
                            timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    try:
        server.run()
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    if not server.started:
        raise UsageError(f"cannot listen on {args.host}:{args.port} (the port is in use?)")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: serve(build_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
