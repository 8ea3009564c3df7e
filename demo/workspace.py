"""Build the demo workspace: a tiny IndexTTS-shaped model and Amharic data a newcomer can train on at once.

``python -m demo --out DIR`` writes, in seconds on a CPU:

- ``DIR/checkpoints/config.yaml``: a tiny IndexTTS-1.5 config (same layout as the real one);
- ``DIR/checkpoints/gpt.pth``: a random-init base GPT in the real state-dict layout (``{"model": ...}``);
- ``DIR/checkpoints/bpe.model``: a base BPE tokenizer trained on English (the stand-in for IndexTTS's own);
- ``DIR/checkpoints/dvae.pth``: a random-init tiny DVAE, so audio preprocessing can be tried too;
- ``DIR/tokenizers/amharic_extended.model``: the base tokenizer extended with Amharic pieces;
- ``DIR/data/{train,val}.jsonl`` with ``codes/`` and ``cond_mels/``: real Amharic sentences whose codes are
  made deterministically from the text, so the loss visibly falls within a minute of CPU training;
- ``DIR/recordings/``: two long-ish demo recordings (one with subtitles) for ingest (``demo.recordings``);
- ``DIR/v2/``: the same for IndexTTS2 (``demo.v2``): a tiny v2 GPT and community-format paired data;
- ``DIR/projects/``: a voice project per generation over the demo's folders (``demo.projects``);
- ``DIR/v25/``: the same for IndexTTS-2.5 (``demo.v25``): a whole tiny 2.5 download folder (every network
  random and tiny, so 2.5 speaks on a CPU), 2.5 paired data.

Nothing here reads ``../shared``: the text comes from ``demo/assets/``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from data_tools.cli import OneLineErrorParser
from data_tools.config import save_config
from data_tools.fileio import atomic_write_text, atomic_write_with
from data_tools.shape_rules import V1_SAMPLES_PER_CODE
from demo.data import (
    SPEAKERS,
    codes_for_text,
    cond_mel_for,
    demo_folder_of,
    demo_train_argv,
    stable_int,
    write_npy,
)
from demo.paired_paths import PairedDemoPaths
from demo.projects import ensure_demo_projects
from demo.recordings import demo_recordings_exist, write_demo_recordings
from demo.v2 import FOLDER as V2_FOLDER
from demo.v2 import DemoV2Paths, build_demo_v2
from demo.v25 import FOLDER as V25_FOLDER
from demo.v25 import DemoV25Paths, ensure_demo_v25
from generations.indextts15 import INDEXTTS15
from generations.registry import by_id, generation_ids
from generations.spec import Capability, Generation
from trainer.synthesis.demo_vocoder import DEMO_VOCODER_FILE, demo_bigvgan_config, write_demo_vocoder

ASSETS = Path(__file__).resolve().parent / "assets"
BASE_VOCAB = 1000
AMHARIC_PIECES = 800


def demo_config(number_text_tokens: int) -> dict:
    """The demo's config.yaml: IndexTTS-1.5 layout at a size that trains on a laptop CPU."""
    return {
        "dataset": {
            "bpe_model": "bpe.model",
            "sample_rate": 24000,
            "squeeze": False,
            "mel": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256, "win_length": 1024,
                    "n_mels": 100, "mel_fmin": 0, "normalize": False},
        },
        "gpt": {
            "model_dim": 64,
            "max_mel_tokens": 128,
            "max_text_tokens": 64,
            "heads": 4,
            "use_mel_codes_as_input": True,
            "mel_length_compression": V1_SAMPLES_PER_CODE,
            "layers": 2,
            "number_text_tokens": number_text_tokens,
            "number_mel_codes": 8194,
            "start_mel_token": 8192,
            "stop_mel_token": 8193,
            "start_text_token": 0,
            "stop_text_token": 1,
            "train_solo_embeddings": False,
            "condition_num_latent": 8,
            "condition_type": "conformer_perceiver",
            "condition_module": {"output_size": 32, "linear_units": 64, "attention_heads": 4,
                                 "num_blocks": 1, "input_layer": "conv2d2", "perceiver_mult": 2},
        },
        "vqvae": {"channels": 100, "num_tokens": 256, "hidden_dim": 32, "num_resnet_blocks": 1,
                  "codebook_dim": 16, "num_layers": 2, "positional_dims": 1, "kernel_size": 3,
                  "smooth_l1_loss": True, "use_transposed_convs": False},
        "bigvgan": demo_bigvgan_config(64),
        "dvae_checkpoint": "dvae.pth",
        "gpt_checkpoint": "gpt.pth",
        "bigvgan_checkpoint": DEMO_VOCODER_FILE,
        "version": 1.5,
    }


@dataclass(frozen=True)
class DemoPaths:
    root: Path
    config: Path
    base_checkpoint: Path
    base_tokenizer: Path
    extended_tokenizer: Path
    dvae: Path
    vocoder: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    @classmethod
    def under(cls, root: Path) -> DemoPaths:
        root = Path(root)
        ckpt = root / "checkpoints"
        return cls(
            root=root,
            config=ckpt / "config.yaml",
            base_checkpoint=ckpt / "gpt.pth",
            base_tokenizer=ckpt / "bpe.model",
            extended_tokenizer=root / "tokenizers" / "amharic_extended.model",
            dvae=ckpt / "dvae.pth",
            vocoder=ckpt / DEMO_VOCODER_FILE,
            train_manifest=root / "data" / "train.jsonl",
            val_manifest=root / "data" / "val.jsonl",
            output_dir=root / "runs" / "demo",
        )

    def exists(self) -> bool:
        return all(p.is_file() for p in (self.config, self.base_checkpoint, self.base_tokenizer, self.vocoder,
                                         self.extended_tokenizer, self.train_manifest, self.val_manifest))

    def train_argv(self, max_steps: int = 200) -> list[str]:
        """Trainer flags for a short demo run (the quick start and the UI's demo preset use these)."""
        return demo_train_argv(self.train_manifest, self.val_manifest, self.extended_tokenizer, self.config,
                               self.base_checkpoint, self.output_dir, max_steps, ("--vocoder", str(self.vocoder)))


def _write_data(paths: DemoPaths, sentences: list[str], n_val: int) -> None:
    data = paths.train_manifest.parent
    lines: list[str] = []
    for index, sentence in enumerate(sentences):
        speaker = SPEAKERS[index % len(SPEAKERS)]
        utt_id = f"{speaker}_{index:04d}"
        codes = codes_for_text(sentence)
        # The prompt is another utterance of the same speaker, as preprocessing does, to avoid prompt bleed.
        prompt_id = f"{speaker}_{(index + len(SPEAKERS)) % len(sentences):04d}"
        frames = 48 + stable_int(prompt_id) % 40
        write_npy(data / "codes" / f"{utt_id}.npy", codes)
        write_npy(data / "cond_mels" / f"{utt_id}.npy", cond_mel_for(speaker, prompt_id, frames))
        duration = round(len(codes) * V1_SAMPLES_PER_CODE / 24000, 3)
        lines.append(json.dumps({
            "id": utt_id, "text": sentence, "codes": f"codes/{utt_id}.npy",
            "cond_mel": f"cond_mels/{utt_id}.npy", "speaker": speaker, "language": "am", "duration": duration,
        }, ensure_ascii=False))
    atomic_write_text(paths.val_manifest, "\n".join(lines[:n_val]) + "\n")
    atomic_write_text(paths.train_manifest, "\n".join(lines[n_val:]) + "\n")


def _write_tokenizers(paths: DemoPaths, scratch: Path) -> None:
    from data_tools.tokenizer import extend_tokenizer, train_tokenizer

    base = train_tokenizer([ASSETS / "english_corpus.txt"], scratch / "base", vocab_size=BASE_VOCAB,
                           model_type="bpe", language="en")
    paths.base_tokenizer.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(paths.base_tokenizer, lambda handle: handle.write(Path(base).read_bytes()))
    amharic = train_tokenizer([ASSETS / "amharic_corpus.txt", ASSETS / "amharic_sentences.txt"],
                              scratch / "amharic", vocab_size=AMHARIC_PIECES, model_type="bpe", language="am")
    extend_tokenizer(paths.base_tokenizer, Path(amharic), paths.extended_tokenizer, target_size=None)


def _write_models(paths: DemoPaths, config: dict, seed: int) -> None:
    from networks import indextts15

    torch.manual_seed(seed)
    model = indextts15.build_gpt(config["gpt"])
    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    atomic_write_with(paths.base_checkpoint, lambda handle: torch.save({"model": state}, handle))
    write_demo_vocoder(paths.vocoder, config["bigvgan"], seed)
    torch.manual_seed(seed)
    dvae = indextts15.build_dvae(config)
    dvae_state = {key: value.detach().clone() for key, value in dvae.state_dict().items()}
    atomic_write_with(paths.dvae, lambda handle: torch.save({"model": dvae_state}, handle))


def build_demo(out: Path, *, n_val: int = 24, seed: int = 0, force: bool = False) -> DemoPaths:
    """Create the demo workspace under ``out`` (idempotent: an existing complete workspace is kept)."""
    import tempfile

    paths = DemoPaths.under(Path(out))
    sentences = [s for s in (ASSETS / "amharic_sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    if paths.exists() and not force:
        if not DemoV2Paths.under(paths.root).exists():  # a workspace made before the IndexTTS2 demo existed
            build_demo_v2(paths.root, sentences, n_val, seed)
        ensure_demo_v25(paths.root, sentences, n_val, seed)  # likewise for the IndexTTS-2.5 demo
        if not demo_recordings_exist(paths.root):  # ... or before the demo recordings for ingest
            write_demo_recordings(paths.root, sentences)
        ensure_demo_projects(paths.root, paths)  # ... or before voice projects
        return paths
    with tempfile.TemporaryDirectory(prefix="demo-tok-") as scratch:
        _write_tokenizers(paths, Path(scratch))
    from data_tools.text_tokenizer import TextTokenizer

    config = demo_config(TextTokenizer(paths.base_tokenizer).vocab_size)
    save_config(config, paths.config)
    _write_models(paths, config, seed)
    _write_data(paths, sentences, n_val)
    build_demo_v2(paths.root, sentences, n_val, seed)
    ensure_demo_v25(paths.root, sentences, n_val, seed, force=force)
    write_demo_recordings(paths.root, sentences)
    ensure_demo_projects(paths.root, paths)
    atomic_write_text(paths.root / "README.txt", _WORKSPACE_README)
    return paths


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


# Each generation's demo, keyed by the folder its registry entry names (the IndexTTS-1.5 demo is the workspace's
# own checkpoints/ and data/): the registry names no demo code, demo/ looks its entries up here.
DEMOS: dict[str, Callable[[Path], DemoPaths | PairedDemoPaths]] = {
    demo_folder_of(INDEXTTS15): DemoPaths.under, V2_FOLDER: DemoV2Paths.under, V25_FOLDER: DemoV25Paths.under}


def demo_of(generation: Generation, workspace: Path) -> DemoPaths | PairedDemoPaths | None:
    """The paths of ``generation``'s demo in demo workspace ``workspace`` (None: this studio builds it none)."""
    under = DEMOS.get(generation.demo_folder) if generation.demo_folder is not None else None
    return None if under is None else under(Path(workspace))


if __name__ == "__main__":
    raise SystemExit(main())
