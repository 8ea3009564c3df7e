"""IndexTTS2 data preparation: audio + transcripts -> per-utterance features and a paired manifest.

CLI::

    python -m data_tools.prepare_v2 --input X --out-dir D --config config.yaml --codec semantic_codec.safetensors
        [--gpt gpt.pth] [--w2v-bert facebook/w2v-bert-2.0 | FOLDER] [--w2v-stats wav2vec2bert_stats.pt]
        [--tokenizer bpe.model] [--language am] [--speaker NAME] [--pairs-per-target 2] [--seed 2025]
        [--device auto] [--batch-seconds 240] [--max-batch-items 64] [--loaders 2]
        [--min-duration 0.5] [--max-duration S] [--quiet]

``X`` is what ``data_tools.preprocess`` reads (a JSONL list, an LJSpeech ``metadata.csv`` or a folder of
audio + ``.txt``; see ``data_tools.preprocess_inputs``). Per utterance, the community recipe
(``tools/preprocess_data.py`` of the IndexTTS2 fine-tuning community, see the reference notes): audio -> mono ->
24 kHz -> 16 kHz (torchaudio's functional sinc resampler, twice) -> SeamlessM4T features -> w2v-BERT 2.0
``hidden_states[17]`` normalised by the stats file -> semantic codes (the codec loaded strictly); the base
GPT's conditioning latents ``get_conditioning`` and emotion vector ``get_emovec`` with the true frame counts
(the attention-mask sums); the transcript through our text front-end and tokenizer. Batches are padded as
the community does (padding value 1.0, so a padded item differs slightly from the item alone), but every
file keeps the item's TRUE length: codes are cut to its frame count, never the batch's. The lengths given to
the conditioning encoders are the real frame counts (the community recipe), not inference's feature-width
quirk. w2v-BERT runs only up to layer 17 (the rest never reaches the features). Float32 throughout.

Output in ``D`` (paths inside the manifests are relative to ``D``, POSIX separators):

- ``text_ids/<id>.npy`` int32 [L], ``codes/<id>.npy`` int32 [M] (50 Hz), ``condition/<id>.npy`` float32
  [32, model_dim], ``emo_vec/<id>.npy`` float32 [model_dim]: the community layout;
- ``utterances.jsonl``: the community's per-utterance manifest (``id, audio_path, text, speaker, language,
  duration, text_ids_path, text_len, codes_path, code_len, condition_path, condition_len, emo_vec_path``);
- ``pairs.jsonl``: the paired manifest both trainers read: each target with ``--pairs-per-target`` prompts
  drawn from the other utterances of its speaker (seeded per target); a speaker with one utterance has none;
- ``prepare_report.json``; ``.prepare_v2/done.jsonl`` (resume state).

Batching, resume and bad items: ``data_tools.batch_prep``; the run, the pairing and the manifests:
``data_tools.paired_prep`` (shared with IndexTTS-2.5); the networks and a batch's computation:
``generations.indextts2.data.prepare_models``. Exit codes: 0 manifests written, 1 nothing could be
prepared, 2 usage (one ``error: ...`` line), 130 interrupted (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools import paired_lines, paired_prep
from data_tools.batch_prep import ItemProblem
from data_tools.model_limits import longest_seconds
from data_tools.paired_prep import PrepareError, PrepareReport
from data_tools.prepare_cli import add_run_arguments, paired_parser, run_cli
from data_tools.preprocess_inputs import SourceItem
from generations.indextts2.data.prepare_models import (
    PreparationModels,
    load_community_audio,
    load_models,
    run_models,
)
from networks.generation_rule import ID_2

STATE_DIR = ".prepare_v2"
FOLDERS = ("text_ids", "codes", "condition", "emo_vec")


# ---------------------------------------------------------------------------------------------
# The preparer (what batch_prep runs)


@dataclass
class LoadedItem:
    features: np.ndarray  # [T, 160] SeamlessM4T features of the item alone
    frames: int  # valid frames (the attention-mask sum)
    text_ids: np.ndarray  # int32 [L]


@dataclass
class ItemResult:
    text_ids: np.ndarray  # int32 [L]
    codes: np.ndarray  # int32 [frames]
    condition: np.ndarray  # float32 [32, model_dim]
    emo_vec: np.ndarray  # float32 [model_dim]


@dataclass(kw_only=True)
class ItemPreparer(paired_prep.PairedPreparer):
    """IndexTTS2's part of batched preparation (``data_tools.batch_prep.Preparer``)."""

    FOLDERS = FOLDERS
    models: PreparationModels
    state_dir: str = STATE_DIR

    def screen(self, item: SourceItem, seconds: float) -> str | None:
        return self.screen_duration(seconds)

    def load(self, item: SourceItem) -> LoadedItem:
        ids = np.asarray(self.models.tokenizer.encode(item.text, item.language), dtype=np.int32)
        if ids.size == 0:
            raise ItemProblem("empty text: nothing left after the text front-end")
        if ids.size > self.models.max_text_tokens:
            raise ItemProblem(f"text too long: {ids.size} tokens > gpt.max_text_tokens {self.models.max_text_tokens}")
        wave_24k, wave_16k = load_community_audio(item.audio)
        reason = paired_prep.silence_reason(wave_24k)
        if reason:
            raise ItemProblem(reason)
        features, frames = paired_prep.features_of(self.models.extractor, wave_16k)
        if frames == 0:
            raise ItemProblem("too short: no feature frame")
        return LoadedItem(features=features, frames=frames, text_ids=ids)

    def compute(self, batch: Sequence[tuple[SourceItem, LoadedItem]]) -> list[ItemResult | ItemProblem]:
        """Each item through the models alone: in a padded batch its conditioning and emotion vector would
        depend on its companions (the conformer's convolutions read the padding), so no value does here."""
        results: list[ItemResult | ItemProblem] = []
        for _item, loaded in batch:
            frames = loaded.frames
            if frames > self.models.max_codes:
                results.append(ItemProblem(f"too long: {frames} codes > gpt.max_mel_tokens {self.models.max_codes}"))
                continue
            out = run_models(self.models, *paired_prep.pad_features(self.models.extractor, [(loaded.features, frames)]))
            results.append(ItemResult(text_ids=loaded.text_ids, codes=out.codes[0, :frames].numpy().astype(np.int32),
                                      condition=out.conditioning[0].numpy().astype(np.float32),
                                      emo_vec=out.emo_vec[0].numpy().astype(np.float32)))
        return results

    def write(self, out_dir: Path, item: SourceItem, result: ItemResult) -> dict[str, Any]:
        self.write_arrays(out_dir, item, (result.text_ids, result.codes, result.condition, result.emo_vec))
        return {"text_len": int(result.text_ids.size), "code_len": int(result.codes.size),
                "condition_len": int(result.condition.shape[0])}


# ---------------------------------------------------------------------------------------------
# Manifests


def utterance_entry(item: SourceItem, record: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the community's per-utterance manifest."""
    stem = item.stem
    return paired_lines.utterance_line(item, record, {
        "codes_path": f"codes/{stem}.npy", "code_len": int(record["code_len"]),
        "condition_path": f"condition/{stem}.npy", "condition_len": int(record["condition_len"]),
        "emo_vec_path": f"emo_vec/{stem}.npy"})


def build_pairs(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """IndexTTS2 paired lines (``generations.indextts2.data.manifest``): the prompt's conditioning latents with the target."""
    return paired_lines.pair_lines(utterances, pairs_per_target, seed,
                                   prompt_fields=("condition_path", "condition_len"))


# ---------------------------------------------------------------------------------------------
# The run


def settings_fingerprint(config: Mapping[str, Any], gpt: Path, codec: Path, w2v_bert: str, w2v_stats: Path,
                         tokenizer: Path) -> str:
    """What shapes the files: the model sections, the weight files (path, size, mtime), the tokenizer's bytes."""
    data = {"recipe": "community preprocess_data, true lengths", "gpt_section": config.get("gpt"),
            "codec_section": config.get("semantic_codec"), "gpt": paired_prep.file_signature(gpt),
            "codec": paired_prep.file_signature(codec), "w2v_bert": paired_prep.w2v_signature(w2v_bert),
            "stats": paired_prep.file_signature(w2v_stats),
            "tokenizer": hashlib.sha256(tokenizer.read_bytes()).hexdigest()}
    return paired_prep.short_hash(data)


def add_s2mel_files(out: Path, cfg: Mapping[str, Any], config_path: Path, audio_of_stem: Mapping[str, Path]) -> None:
    """What S2Mel training reads, for a config with an s2mel section whose folder holds campplus_cn_common.bin
    (a rerun adds only the missing files)."""
    campplus_path = config_path.parent / "campplus_cn_common.bin"
    if not isinstance(cfg.get("s2mel"), dict) or not campplus_path.is_file():
        return
    from data_tools.s2mel_clip import add_s2mel_files_of
    from networks.campplus import load_campplus
    from networks.indextts2 import campplus_sizes

    add_s2mel_files_of(out, audio_of_stem, load_campplus(campplus_path, **campplus_sizes(cfg)), cfg)


def prepare(input_path: str | Path, out_dir: str | Path, config: str | Path, *, codec: str | Path,
            gpt: str | Path | None = None, tokenizer: str | Path | None = None, **options: Any) -> PrepareReport:
    """Prepare ``input_path`` into ``out_dir`` (see the module docstring); raises PrepareError on bad inputs.
    ``options``: the shared ones (``paired_prep.RunOptions``: w2v_bert, language, device, progress...)."""
    started = time.perf_counter()
    opts = paired_prep.RunOptions(**options)
    config_path = Path(config)
    cfg = paired_prep.load_prepare_config(config_path, opts)
    gpt_path, stats_path = paired_prep.base_files(config_path, cfg, gpt, opts.w2v_stats)
    bpe = (cfg.get("dataset") or {}).get("bpe_model") if isinstance(cfg.get("dataset"), dict) else None
    tokenizer_path = (Path(tokenizer) if tokenizer else
                      paired_prep.beside_config(config_path, bpe, "dataset.bpe_model", "--tokenizer"))
    codec_path = Path(codec)
    for path, what in ((gpt_path, "base GPT"), (codec_path, "semantic codec"), (stats_path, "w2v-BERT stats"),
                       (tokenizer_path, "tokenizer")):
        if not path.is_file():
            raise PrepareError(f"{what} not found: {path}")
    items, skipped = paired_prep.read_items(input_path, opts)
    torch_device = paired_prep.resolve_device(opts.device)
    models = load_models(cfg, gpt=gpt_path, codec=codec_path, w2v_bert=opts.w2v_bert, w2v_stats=stats_path,
                         tokenizer=tokenizer_path, device=torch_device)
    preparer = ItemPreparer(models=models, **opts.durations(longest_seconds(models.max_codes, ID_2)),
                            fingerprint=settings_fingerprint(cfg, gpt_path, codec_path, opts.w2v_bert, stats_path,
                                                             tokenizer_path))
    manifests = paired_prep.Manifests(utterance_entry=utterance_entry, build_pairs=build_pairs,
                                      add_s2mel_files=lambda out, audio: add_s2mel_files(out, cfg, config_path, audio))
    return paired_prep.run_paired(items, skipped, preparer, Path(out_dir).absolute(), manifests, opts,
                                  device=torch_device, started=started)


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = paired_parser("data_tools.prepare_v2", "IndexTTS2: audio + transcripts -> per-utterance features and "
                                                    "a paired manifest (the community layout).",
                           input_help="JSONL list ({audio, text, speaker?, id?}), metadata.csv, or a folder of "
                                      "audio + .txt",
                           config_help="IndexTTS2 config.yaml (gpt, semantic_codec)")
    parser.add_argument("--codec", required=True, type=Path,
                        help="semantic codec weights (MaskGCT semantic_codec/model.safetensors or a .pth)")
    parser.add_argument("--tokenizer", type=Path,
                        help="SentencePiece model for the text ids (default: the config's dataset.bpe_model)")
    parser.add_argument("--language", help="language of the transcripts, e.g. am (text front-end, manifests)")
    add_run_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), prepare, argv)


if __name__ == "__main__":
    raise SystemExit(main())
