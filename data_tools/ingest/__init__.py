"""Raw recordings -> a proofread dataset: import, slice (silero VAD or subtitles), transcribe, gate, proofread.

The pieces, each small: ``sources`` (what an input holds, streamed audio), ``vad`` (speech probabilities),
``slicing`` (speech -> clip spans), ``subtitles`` (SRT / WebVTT cues), ``gates`` (named quality reasons),
``loudness``, ``clips`` (writing one clip), ``pipeline`` (the resumable run), ``store`` (the proofreading
state and manifests), ``__main__`` (the CLI: ``python -m data_tools.ingest --help``).

An ingest folder:

    ingest.json                the slicing settings it was made with (a rerun with others is refused)
    sources/<source>.json      one per finished recording or clip: its clips, measurements and texts
    clips/<speaker>/<name>.wav mono 16-bit clips at the source rate (>= 22.05 kHz), loudness-normalised
    clips.jsonl                the index of every clip with its gate reasons (rebuilt at the end of a run)
    problems.jsonl             inputs that could not be used, one line each (rebuilt every run)
    gates.json                 what the gates applied (thresholds, the base model's limits): re-run on an edit
    edits.json                 proofreading: edited texts, deleted and restored clips (written at each edit)
    manifests/manifest_<time>.jsonl   saved manifests (a new name each time, never over an earlier one)
"""
