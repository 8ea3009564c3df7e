"""The speech server's cost: requests per second and time to first audio against concurrency, beside a direct call.

    python bench/serve.py [--workspace DIR] [--requests 4] [--codes 24] [--concurrency 1 2 4]

The model is the demo's IndexTTS-1.5 base folder (built in a temporary folder unless ``--workspace`` has it),
decoding greedily to ``--codes`` codes per sentence, in the demo's stand-in voice; every request speaks the same
three sentences as pcm, streamed. Side by side in one run:

1. direct: ``ServedModel.speak`` on each sentence, in this process (the synthesizer alone);
2. served: ``python -m trainer.serve``'s app under uvicorn on 127.0.0.1, ``--requests`` requests per concurrency
   level sent at once from as many client threads, each reading its stream; time to first audio is when the first
   audio bytes reach the client.

Headlines: the server's overhead (a request's time at concurrency 1 minus the direct call's; the ratio is noted,
and is large only because a demo sentence takes milliseconds), time to first audio as a
share of the whole request (streaming sends the first sentence before the rest is spoken), and requests per second
at each level (one model: requests take turns sentence by sentence, so throughput stays near the direct rate).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402

TEXT = "ሰላም ለዓለም። ዛሬ አየሩ ጥሩ ነው። እንዴት ነህ?"


def _served(model, voice: Path, concurrency: int, requests: int) -> tuple[float, list[float], list[float]]:
    """(wall seconds, each request's seconds, each request's time to first audio)."""
    import httpx
    import uvicorn

    from tests.studio_process import free_port
    from trainer.serving.app import ServerSettings, create_app
    from webui.jobs.process_tools import wait_until

    port = free_port()
    app = create_app(model, ServerSettings(voices={"demo": voice}, concurrency=concurrency, queue=requests))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    if not wait_until(lambda: server.started, 60.0, interval_s=0.05):
        raise SystemExit("the server did not start")
    totals, firsts = [], []
    body = {"model": model.name, "voice": "demo", "input": TEXT, "response_format": "pcm"}

    def ask() -> None:
        start = time.perf_counter()
        first = None
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/audio/speech", json=body, timeout=600) as reply:
            for chunk in reply.iter_bytes():
                if chunk and first is None:
                    first = time.perf_counter() - start
        totals.append(time.perf_counter() - start)
        firsts.append(first if first is not None else float("nan"))

    begun = time.perf_counter()
    clients = [threading.Thread(target=ask) for _ in range(requests)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=600)
    wall = time.perf_counter() - begun
    server.should_exit = True
    thread.join(timeout=60)
    return wall, totals, firsts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=None, help="a demo workspace (default: built in /tmp)")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--codes", type=int, default=24)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()

    import torch

    from demo.workspace import build_demo
    from generations.indextts15.demo.build import DemoPaths
    from trainer.serving.model import ServedModel
    from trainer.synthesis.generation import DecodeSettings
    from trainer.synthesis.segments import sentences
    from webui.testing.reference_voices import default_reference

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        paths = DemoPaths.under(args.workspace) if args.workspace else build_demo(Path(scratch) / "ws")
        model = ServedModel(paths.config.parent, "cpu", "am", decode=DecodeSettings(mode="greedy",
                                                                                  max_codes=args.codes))
        voice = default_reference(paths.root)[1]
        model.speak("ሰላም።", voice)  # warm: the voice is prepared once, as the server keeps it
        start = time.perf_counter()
        first = None
        for part in sentences(TEXT):
            model.speak(part, voice)
            first = first if first is not None else time.perf_counter() - start
        direct = time.perf_counter() - start
        print(f"direct: {direct:.2f} s for {len(sentences(TEXT))} sentences (first after {first:.2f} s)")
        for level in args.concurrency:
            wall, totals, firsts = _served(model, voice, level, args.requests)
            rate = len(totals) / wall
            print(f"concurrency {level}: {rate:.2f} requests/s, request {min(totals):.2f}-{max(totals):.2f} s, "
                  f"first audio {min(firsts):.2f}-{max(firsts):.2f} s")
            headline("serve", f"requests per second at concurrency {level}", rate, "req/s",
                     note=f"direct: {1 / direct:.2f} req/s")
            if level == 1:
                extra = min(totals) - direct  # HTTP, pcm resampling and encoding: fixed per request, not per code
                headline("serve", "server overhead per request (concurrency 1, served - direct)", extra, "s",
                         goal="< 0.15 s", met=extra < 0.15, note=f"ratio {min(totals) / direct:.2f}x at demo size")
                headline("serve", "time to first audio / whole request (concurrency 1)", min(firsts) / min(totals),
                         "share", goal="< 0.6 (streamed)", met=min(firsts) / min(totals) < 0.6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
