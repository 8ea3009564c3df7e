"""``python -m data_tools.ingest``: raw recordings -> clips -> transcripts -> gates -> proofread manifest.

    python -m data_tools.ingest run --input recordings/ --out-dir ingest/ --language am [--asr-model DIR_OR_ID]
        [--model-dir checkpoints/]   # the base model: clips are cut to what it takes, texts too long are flagged
    python -m data_tools.ingest run --url https://... [--url ...] --out-dir ingest/ --language am --licence CC-BY-4.0
    python -m data_tools.ingest fetch --url https://... --into recordings/ [--subtitle-language am]
    python -m data_tools.ingest list --out-dir ingest/ [--page 0 --page-size 20 --status rejected]
    python -m data_tools.ingest text --out-dir ingest/ CLIP_ID "corrected transcript"
    python -m data_tools.ingest delete|restore --out-dir ingest/ CLIP_ID [CLIP_ID ...]
    python -m data_tools.ingest speaker --out-dir ingest/ LABEL CLIP_ID [CLIP_ID ...]
    python -m data_tools.ingest save --out-dir ingest/ [--speaker LABEL]   # prints the new manifest's path

Exit codes: 0 done, 2 refused (one ``error:`` line), 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from data_tools.cli import OneLineErrorParser, progress_bar, run_refusing
from data_tools.ingest.gates import GateSettings
from data_tools.ingest.pipeline import IngestError, IngestSettings, run_ingest
from data_tools.ingest.slicing import SliceSettings
from data_tools.ingest.store import STATUSES, IngestStore, StoreError
from data_tools.ranks import ranks_from_env

_SLICING_FLAGS = {"min_seconds": "accepted clip length, shortest (s)", "max_seconds": "accepted clip length, longest (s)",
                  "aim_min": "cutting aims for clips at least this long (s)", "aim_max": "... and at most this long (s)",
                  "pad": "silence kept around speech (s)", "min_pause": "a pause this long always ends a clip (s)",
                  "threshold": "silero speech probability threshold",
                  "snap": "how far a subtitle cue's edge may move to the nearest pause (s)"}
_GATE_FLAGS = {"max_clipping": "largest share of samples at full scale", "min_snr_db": "lowest SNR estimate (dB)",
               "max_silence": "largest share of silent frames", "min_cps": "fewest letters per second of speech",
               "max_cps": "most letters per second", "min_script_share": "least share of letters in the language's script"}


LONG_AIM_MIN = 10.0  # --long-clips aims at 10-15 s clips unless --aim-min says otherwise


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.ingest", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    run = commands.add_parser("run", help="slice, transcribe and gate recordings (resumable: a rerun continues)")
    run.add_argument("--input", type=Path,
                     help="a folder of recordings and videos (.srt/.vtt or .txt beside them are used), or a "
                          "metadata.csv")
    run.add_argument("--url", action="append", default=[],
                     help="a video page, direct media link or playlist to fetch first (yt-dlp; repeatable)")
    run.add_argument("--licence", help="the licence of what --url fetches (kept with its clips)")
    run.add_argument("--subtitle-language", help="subtitles to fetch with --url (default: --language)")
    _out_dir(run)
    run.add_argument("--language", help="language code of the speech, e.g. am (script gate, manifests)")
    run.add_argument("--speaker", help="one speaker name for everything")
    run.add_argument("--speaker-level", type=int, default=1, help="folder level under --input naming the speaker (1)")
    run.add_argument("--speaker-column", type=int, help="metadata.csv column (0-based) naming the speaker")
    run.add_argument("--subtitle-encoding", help="encoding of legacy (non-UTF-8) subtitle files, e.g. cp1252")
    run.add_argument("--asr-model", help="CTC model folder or id for transcripts (none: clips without text stay so)")
    run.add_argument("--asr-language", help="the model's target language (multilingual CTC models), e.g. amh")
    run.add_argument("--device", default="auto", help="device for the ASR model (auto, cpu, cuda)")
    run.add_argument("--batch-size", type=int, default=8, help="ASR batch size (8)")
    run.add_argument("--model-dir", type=Path,
                     help="the base model's folder (config.yaml inside; IndexTTS-1.5, 2 or 2.5): the slicer's longest "
                          "clip comes from its limits, and clips or texts that still do not fit are flagged")
    run.add_argument("--config", type=Path, help="the base model's config.yaml (instead of --model-dir)")
    run.add_argument("--tokenizer", type=Path,
                     help="tokenizer that counts text tokens against the model (default: the model folder's own)")
    run.add_argument("--loudness", type=float, default=-20.0, help="loudness target in LUFS (-20)")
    run.add_argument("--no-loudness", action="store_true", help="keep the recordings' levels")
    run.add_argument("--loudness-scope", choices=("clip", "dataset"), default="clip",
                     help="normalise each clip, or the whole dataset with one gain (keeps loud and soft apart)")
    run.add_argument("--long-clips", action="store_true",
                     help="prosody: join sentences into clips of --aim-min (10 with this)..--aim-max s, cut only at "
                          "sentence ends")
    run.add_argument("--max-inner-pause", type=float,
                     help="pauses inside a clip longer than this are shortened to it, e.g. 0.4 (s)")
    for name, text in _SLICING_FLAGS.items():
        run.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(SliceSettings(), name),
                         help=f"{text} ({getattr(SliceSettings(), name):g})")
    for name, text in _GATE_FLAGS.items():
        run.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(GateSettings(), name),
                         help=f"{text} ({getattr(GateSettings(), name):g})")
    run.add_argument("--separate", metavar="MODEL",
                     help="separate the voice from music and noise first (demucs: a .th file, a folder, or a "
                          "released name such as htdemucs); the voice stem is sliced, the recordings kept")
    run.add_argument("--speaker-model", help="CAM++ weights (campplus_cn_common.bin) or an x-vector model folder "
                                             "or id: clips get speaker labels by clustering")
    run.add_argument("--speaker-threshold", type=float, default=0.3,
                     help="cosine similarity (centred) at which two groups of clips are one speaker (0.3; higher: more speakers)")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress bars")

    fetch = commands.add_parser("fetch", help="only fetch links into a folder of recordings (resumable)")
    fetch.add_argument("--url", action="append", required=True, help="page, media link or playlist (repeatable)")
    fetch.add_argument("--into", required=True, type=Path, help="the folder the recordings go into")
    fetch.add_argument("--subtitle-language", help="subtitles to fetch beside each recording, e.g. am")
    fetch.add_argument("--licence", help="the licence of what is fetched (kept in <name>.source.json)")

    listing = commands.add_parser("list", help="clips worst first, a page at a time")
    _out_dir(listing)
    listing.add_argument("--page", type=int, default=0)
    listing.add_argument("--page-size", type=int, default=20)
    listing.add_argument("--status", choices=STATUSES)
    listing.add_argument("--speaker", help="one speaker's clips only")
    listing.add_argument("--json", action="store_true")
    text = commands.add_parser("text", help="set a clip's transcript")
    _out_dir(text)
    text.add_argument("clip")
    text.add_argument("text")
    text.add_argument("--json", action="store_true")
    for name, what in (("delete", "leave clips out of manifests"), ("restore", "bring clips back")):
        sub = commands.add_parser(name, help=what)
        _out_dir(sub)
        sub.add_argument("clips", nargs="+")
        sub.add_argument("--json", action="store_true")
    who = commands.add_parser("speaker", help="set clips' speaker label")
    _out_dir(who)
    who.add_argument("label")
    who.add_argument("clips", nargs="+")
    who.add_argument("--json", action="store_true")
    save = commands.add_parser("save", help="write a new manifest of the kept clips (never over an earlier one)")
    _out_dir(save)
    save.add_argument("--speaker", help="keep this speaker's clips only")
    save.add_argument("--json", action="store_true")
    return parser


def _out_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", required=True, type=Path, help="the ingest folder")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writing = getattr(args, "out_dir", None) or getattr(args, "into", None)
    return run_refusing(lambda: _main(args), (IngestError, StoreError), writing=writing)


def _main(args: argparse.Namespace) -> int:
    if args.command == "run":
        return _run(args)
    if args.command == "fetch":
        return _fetch(args)
    store = IngestStore(args.out_dir)
    if args.command == "list":
        page = store.list_clips(args.page, args.page_size, args.status, args.speaker)
        if args.json:
            return _print_json(asdict(page))
        print(f"page {page.page + 1} of {page.pages} ({page.total} clips); {store.counts()}")
        for clip in page.clips:
            confidence = "-" if clip["confidence"] is None else f"{clip['confidence']:.2f}"
            reasons = "; ".join(clip["reasons"]) or "-"
            print(f"{clip['status']:8} {confidence:>5} {clip['seconds']:6.2f}s {clip['speaker']:>8} {clip['id']}  "
                  f"{clip['text']!r}  [{reasons}]")
        return 0
    if args.command == "text":
        return _report(store.set_text(args.clip, args.text), args.json)
    if args.command in ("delete", "restore"):
        changed = [getattr(store, args.command)(clip) for clip in args.clips]
        return _print_json(changed) if args.json else _print_lines(f"{c['id']}: {c['status']}" for c in changed)
    if args.command == "speaker":
        changed = [store.set_speaker(clip, args.label) for clip in args.clips]
        return _print_json(changed) if args.json else _print_lines(f"{c['id']}: {c['speaker']}" for c in changed)
    path = store.save_manifest(args.speaker)
    rows = len(path.read_text(encoding="utf-8").splitlines())
    if args.json:
        return _print_json({"manifest": str(path), "clips": rows})
    print(f"wrote {path} ({rows} clips)")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from data_tools.ingest.links import fetch_links

    result = fetch_links(args.url, args.into, args.subtitle_language, args.licence)
    for problem in result.problems:
        print(f"problem: {problem.line()}", file=sys.stderr)
    print(f"fetched {len(result.files)} recording(s) into {args.into} ({result.skipped} fetched before, "
          f"{len(result.problems)} problem(s))")
    return 0


def _run(args: argparse.Namespace) -> int:
    chosen = {name: getattr(args, name) for name in _SLICING_FLAGS}
    if args.long_clips and chosen["aim_min"] == SliceSettings.aim_min:
        chosen["aim_min"] = LONG_AIM_MIN
    slicing = SliceSettings(**chosen, long_clips=args.long_clips, max_inner_pause=args.max_inner_pause)
    gates = GateSettings(**{name: getattr(args, name) for name in _GATE_FLAGS})
    if args.model_dir is not None and args.config is not None:
        raise IngestError("give the base model once: --model-dir (its folder) or --config (its config.yaml)")
    if args.tokenizer is not None and args.model_dir is None and args.config is None:
        raise IngestError("--tokenizer counts text tokens against a model: give --model-dir (or --config) too")
    settings = IngestSettings(
        input=args.input, out_dir=args.out_dir, language=args.language, speaker=args.speaker,
        speaker_level=args.speaker_level, speaker_column=args.speaker_column, slicing=slicing, gates=gates,
        target_lufs=None if args.no_loudness else args.loudness, subtitle_encoding=args.subtitle_encoding,
        asr_model=args.asr_model, asr_language=args.asr_language, device=args.device, batch_size=args.batch_size,
        tokenizer=args.tokenizer, config=args.model_dir or args.config, urls=tuple(args.url), licence=args.licence,
        subtitle_language=args.subtitle_language, speaker_model=args.speaker_model,
        speaker_threshold=args.speaker_threshold, loudness_scope=args.loudness_scope, separate=args.separate)
    if args.input is None and not args.url:
        raise IngestError("give --input (a folder or metadata.csv) or --url (links to fetch), or both")
    main_process = ranks_from_env().is_main  # under torchrun the first process alone reports
    with progress_bar(args.quiet or not main_process, "slicing", unit="file") as progress, \
            progress_bar(args.quiet or not args.asr_model or not main_process, "transcribing",
                         unit="clip") as asr_progress:
        summary = run_ingest(settings, progress=progress, asr_progress=asr_progress)
    if not main_process:
        return 0
    for problem in summary.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if args.json:
        return _print_json(asdict(summary))
    if summary.model:
        print(f"clips cut for the {summary.model}; {summary.too_long} clip(s) still too long for it are flagged "
              "(gate too_long_for_model: proofread them)")
    print(f"{summary.clips} clips from {summary.sources} sources ({summary.hours:.2f} h of audio; "
          f"{summary.sources_done_before} done before), {summary.rejected} rejected by the gates, "
          f"{summary.left_out_fragments} fragments shorter than {slicing.min_seconds:g} s left out, "
          f"{len(summary.problems)} problem(s); proofread with: python -m data_tools.ingest list --out-dir {args.out_dir}")
    return 0


def _report(clip: dict, as_json: bool) -> int:
    return _print_json(clip) if as_json else _print_lines([f"{clip['id']}: {clip['status']} {clip['text']!r}"])


def _print_json(value: object) -> int:
    print(json.dumps(value, ensure_ascii=False, indent=1))
    return 0


def _print_lines(lines) -> int:
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
