"""Build the demo workspace: tiny IndexTTS-shaped models and Amharic data a newcomer can train on at once.

``python -m demo --out DIR`` writes, in seconds on a CPU, every generation's demo (its registry entry's demo facet,
``generations.demo_facts``; the code in ``generations/<name>/demo/``), oldest generation first, in the
folder its entry names:

- ``DIR/checkpoints/``, ``DIR/tokenizers/``, ``DIR/data/``: the IndexTTS-1.5 demo (a tiny config, random GPT,
  DVAE and BigVGAN, an English base tokenizer extended with Amharic pieces, codes manifests of real Amharic
  sentences whose codes are made from the text, so the loss visibly falls within a minute of CPU training);
- ``DIR/v2/``: the same for IndexTTS2: a tiny v2 GPT and community-format paired data, a whole tiny download folder;
- ``DIR/v25/``: the same for IndexTTS-2.5: a whole tiny 2.5 download folder (every network random and tiny, so 2.5
  speaks on a CPU), 2.5 paired data;
- ``DIR/recordings/``: two long-ish demo recordings (one with subtitles) for ingest (``demo.recordings``);
- ``DIR/projects/``: a voice project per generation over the demo's folders (``demo.projects``).

Nothing here reads ``../shared``: the text comes from ``demo/assets/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from data_tools.cli import OneLineErrorParser
from data_tools.fileio import atomic_write_text
from demo.data import ASSETS
from demo.projects import ensure_demo_projects
from demo.recordings import demo_recordings_exist, write_demo_recordings
from generations.registry import GENERATIONS, by_id, demo_facets, generation_ids
from generations.spec import Capability, Generation

README_FILE = "README.txt"


class DemoFiles(Protocol):
    """What every generation's demo files have (its package's ``DemoPaths``; each adds its own)."""

    root: Path
    config: Path
    base_checkpoint: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    def train_argv(self, max_steps: int = 200) -> list[str]: ...


def build_demo(out: Path, *, n_val: int = 24, seed: int = 0, force: bool = False) -> DemoFiles:
    """Create the demo workspace under ``out``: every demo that is missing (all of them with ``force``), the
    recordings, the voice projects. Idempotent: an existing complete workspace is kept. Returns the files of the
    demo at the workspace's root (``workspace_demo``)."""
    root = Path(out)
    sentences = [s for s in (ASSETS / "amharic_sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    for facet in demo_facets():
        facet.ensure(root, sentences, n_val, seed, force=force)
    if force or not demo_recordings_exist(root):
        write_demo_recordings(root, sentences)
    ensure_demo_projects(root)
    if force or not (root / README_FILE).is_file():
        atomic_write_text(root / README_FILE, _WORKSPACE_README)
    return workspace_demo(root)


_WORKSPACE_README = """\
IndexTTS Fine-tuning Studio demo workspace
===========================================
checkpoints/   a tiny IndexTTS-1.5-shaped base model (config.yaml, gpt.pth, dvae.pth, bigvgan_generator.pth) and its English
               base tokenizer (bpe.model). The weights are random: this is for learning the tool, not a voice.
tokenizers/    amharic_extended.model: bpe.model plus Amharic pieces (base ids unchanged).
data/          train.jsonl / val.jsonl codes manifests of real Amharic sentences; codes/ and cond_mels/ hold
               their .npy files (codes are derived from the text so the model has something to learn).
runs/          training output directories.
recordings/    two demo recordings for the Data tab's "Recordings -> clips" (ingest): story.wav with its subtitles
               story.srt, and interview.wav without (sliced by voice activity). A speech-like sound, not speech.
v2/            the same for IndexTTS2: checkpoints/ (a whole tiny IndexTTS2 download folder, all random: the v2 GPT,
               w2v-bert-2.0/, its stats, the semantic codec, CAMPPlus, S2Mel, the emotion matrices and a BigVGAN v2;
               it speaks noise through the real path), data/ (community-format paired manifests
               train_pairs.jsonl / val_pairs.jsonl with text_ids/, codes/, condition/, emo_vec/), audio/
               (synthetic speech + .txt transcripts the Data tab prepares into pairs), runs/.
projects/      one voice project per generation (demo-indextts-1.5, demo-indextts2, demo-indextts-2.5): project.json
               names the model folder and records each step; the demo projects use the folders above.
v25/           the same for IndexTTS-2.5: checkpoints/ (a whole tiny 2.5 download folder: config.yaml with
               version 2.5, gpt.pth, the 2.5 .tiktoken table, codec.pth, s2mel.pth, campplus_cn_common.bin,
               bigvgan/, w2v-bert-2.0/, wav2vec2bert_stats.pt), data/ (2.5 paired manifests with the Amharic
               text, codes/, spk_vec/, emo_vec/, wavs/ of the validation prompts), runs/.
"""


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder to create the workspace in")
    parser.add_argument("--force", action="store_true", help="rebuild even if a complete workspace exists")
    parser.add_argument("--version", choices=generation_ids(), default=generation_ids()[0],
                        help="which model's training command to print (every demo is always built)")
    args = parser.parse_args(argv)
    paths = build_demo(args.out, force=args.force)
    print(f"demo workspace ready: {paths.root}")
    generation = by_id(args.version)
    refusal = generation.refusal(Capability.DEMO)
    demo = None if refusal is not None else demo_of(generation, paths.root)
    if demo is None:
        print(f"error: {refusal or generation.name + ' has no demo'}", file=sys.stderr)
        return 2
    argv_v = demo.train_argv()
    print(f"train the {generation.name} demo with:\n  " + " ".join([sys.executable, "-m", "trainer.train", *argv_v]))
    return 0


def demo_of(generation: Generation, workspace: Path) -> DemoFiles | None:
    """The files of ``generation``'s demo in demo workspace ``workspace`` (its entry's demo facet: ``root``,
    ``config``, ``train_argv()``, ...); None where this studio builds it none."""
    if generation.demo is None or generation.demo_folder is None:
        return None
    return generation.demo.paths(Path(workspace))


def workspace_demo(workspace: Path) -> DemoFiles:
    """The files of the demo that is the workspace itself (its entry's ``demo_folder`` is ""): the one whose
    checkpoints/, tokenizers/ and data/ the studio's workspace layout names."""
    facet = next(entry.demo for entry in GENERATIONS if entry.demo is not None and entry.demo_folder == "")
    return facet.paths(Path(workspace))


if __name__ == "__main__":
    raise SystemExit(main())
