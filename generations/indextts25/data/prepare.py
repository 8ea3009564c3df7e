"""IndexTTS-2.5 data preparation: audio + transcripts -> per-utterance features and a 2.5 paired manifest.

CLI (flags as ``data_tools.prepare_v2``'s; the files default to a 2.5 download folder's, beside the config)::

    python -m data_tools.prepare_v25 --input X --out-dir D --config config.yaml
        [--codec codec.pth] [--gpt gpt.pth] [--campplus campplus_cn_common.bin]
        [--w2v-bert facebook/w2v-bert-2.0 | FOLDER] [--w2v-stats wav2vec2bert_stats.pt]
        [--tokenizer multilingual_zh_ja_yue_char_del.tiktoken] [--text-scheme merges|bytes|translit]
        [--text-merges ethiopic_merges_am.json] [--language am] [--speaker NAME] [--pairs-per-target 2]
        [--seed 2025] [--device auto] [--batch-seconds 240] [--max-batch-items 64] [--loaders 2]
        [--min-duration 0.5] [--max-duration S] [--quiet]

``X`` is what ``data_tools.preprocess`` reads (``data_tools.preprocess_inputs``). Per utterance, as 2.5
inference computes its speaker prompt (``networks.prep25``): audio -> mono -> 22050 Hz (soxr HQ, librosa's
load) -> 16 kHz (torchaudio's sinc ``Resample``) -> SeamlessM4T features -> w2v-BERT layer 17 + stats ->

- the codec's 25 Hz codes (``codes_of``) of the item's own feature rows, ``ceil(rows / 2)`` of them;
- the CAM++ speaker vector of the first 15 s (``speaker_style``; inference cuts its prompt to 15 s), and the
  emotion vector (``emotion_vector`` without an emotion prompt = the GPT's ``get_emovec`` of the features,
  with the item's own width as inference passes it): what this utterance gives when it is another one's
  PROMPT. Over 15 s the emotion vector reads the whole clip where inference reads its first 15 s;
- the transcript through ``TextTable`` (``--text-scheme``, ``"<|lang|> "`` prefix included).

Batches are padded (features past an item's rows zeroed before the codec, as an item alone is zero-padded
by the codec's convolutions); every file keeps the item's own length, never the batch's: a batch of one gives
exactly what the inference steps give for the clip (a test holds it). An item whose text ids or
codes exceed the GPT's ``max_text_tokens`` / ``max_mel_tokens`` is flagged by ``shape_rules.drop_reason``
(the rule the checker and the trainer apply) and skipped; audio longer than the codes allow is flagged from
its header before any model runs.

Output in ``D`` (manifest paths are relative to ``D``):

- ``text_ids/<id>.npy`` int32 [L], ``codes/<id>.npy`` int32 [M] (25 Hz), ``spk_vec/<id>.npy`` float32 [192],
  ``emo_vec/<id>.npy`` float32 [model_dim];
- ``utterances.jsonl``: one line per utterance (``id, audio_path, text, speaker, language, duration,
  text_ids_path, text_len, text_scheme, codes_path, code_len, spk_vec_path, emo_vec_path``);
- ``pairs.jsonl``: the 2.5 paired manifest the trainer reads (``generations.indextts25.data.manifest``): each target
  with ``--pairs-per-target`` prompts of its speaker (``paired_lines.draw_pairs``);
- ``prepare_report.json``; ``.prepare_v25/done.jsonl`` (resume state).

Batching, resume and bad items: ``data_tools.batch_prep``; the run, the pairing and the manifests:
``data_tools.paired_prep`` (shared with IndexTTS2); the networks and a batch's computation:
``generations.indextts25.data.prepare_models``. Exit codes: 0 manifests written, 1 nothing could be
prepared, 2 usage (one ``error: ...`` line), 130 interrupted (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
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
from data_tools.shape_rules import DROP_REASONS, drop_reason
from generations.indextts25.data.prepare_models import (
    PreparationModels,
    code_count,
    load_audio_16k,
    load_models,
    run_models,
)
from generations.indextts25.data.tiktoken_table import unknown_language
from networks.generation_rule import ID_25

CODES_PER_SECOND = 25  # the 2.5 codec: one code per two 50 Hz feature frames
STATE_DIR = ".prepare_v25"
FOLDERS = ("text_ids", "codes", "spk_vec", "emo_vec")
CODEC_FILE = "codec.pth"  # the name a 2.5 download folder gives it (upstream hard-codes it)
CAMPPLUS_FILE = "campplus_cn_common.bin"
HUB_CACHE = "hf_cache"
TABLE_FILE = "multilingual_zh_ja_yue_char_del.tiktoken"


# ---------------------------------------------------------------------------------------------
# The preparer (what batch_prep runs)


@dataclass
class LoadedItem:
    audio_16k: np.ndarray  # the 16 kHz copy of the 22.05 kHz load (float32)
    features: np.ndarray  # [T, 160] SeamlessM4T features of the item alone (T: its width, see run_models)
    frames: int  # valid frames (the attention-mask sum)
    text_ids: np.ndarray  # int32 [L], prefix included


@dataclass
class ItemResult:
    text_ids: np.ndarray  # int32 [L]
    codes: np.ndarray  # int32 [ceil(T / 2)]
    spk_vec: np.ndarray  # float32 [192]
    emo_vec: np.ndarray  # float32 [model_dim]


def limit_problem(text_len: int, code_len: int, models: PreparationModels) -> ItemProblem | None:
    """The shared shape rule (``drop_reason``) as a bad-item reason naming the limit, or None."""
    reason = drop_reason(text_len, code_len, 0, models.limits)
    if reason is None:
        return None
    limits = models.limits
    detail = {"too_many_text_tokens": f"text too long: {text_len} tokens > gpt.max_text_tokens "
                                      f"{limits.max_text_tokens} (the '{models.tokenizer.scheme}' text scheme, "
                                      "language prefix included)",
              "too_many_codes": f"too long: {code_len} codes > gpt.max_mel_tokens {limits.max_codes}",
              "empty_text": "empty text: nothing left after the text front-end"}
    return ItemProblem(detail.get(reason, f"{reason}: {DROP_REASONS.get(reason, reason)}"))


@dataclass(kw_only=True)
class ItemPreparer(paired_prep.PairedPreparer):
    """IndexTTS-2.5's part of batched preparation (``data_tools.batch_prep.Preparer``)."""

    FOLDERS = FOLDERS
    models: PreparationModels
    state_dir: str = STATE_DIR

    def screen(self, item: SourceItem, seconds: float) -> str | None:
        if not item.language:
            return "no language: IndexTTS-2.5 needs each item's language (give --language or a language per line)"
        unknown = unknown_language(item.language)
        if unknown is not None:
            return f"unknown language: {unknown}"
        return self.screen_duration(seconds, f" (gpt.max_mel_tokens {self.models.limits.max_codes} codes at "
                                              f"{CODES_PER_SECOND} Hz)")

    def load(self, item: SourceItem) -> LoadedItem:
        tokenizer = self.models.tokenizer
        try:
            tokenizer.language_index(item.language or "")
            ids = np.asarray(tokenizer.encode(item.text, item.language or ""), dtype=np.int32)
        except (KeyError, ValueError) as exc:
            raise ItemProblem(f"text: {' '.join(str(exc).split())}") from None
        # the text half of the shared rule now (codes 1 stands for "some"): no audio work for a text too long
        problem = limit_problem(int(ids.size), 1, self.models)
        if problem is not None:
            raise problem
        wave_16k = load_audio_16k(item.audio)
        reason = paired_prep.silence_reason(wave_16k)
        if reason:
            raise ItemProblem(reason)
        features, frames = paired_prep.features_of(self.models.extractor, wave_16k)
        if frames == 0:
            raise ItemProblem("too short: no feature frame")
        return LoadedItem(audio_16k=wave_16k, features=features, frames=frames, text_ids=ids)

    def compute(self, batch: Sequence[tuple[SourceItem, LoadedItem]]) -> list[ItemResult | ItemProblem]:
        features, mask = paired_prep.pad_features(self.models.extractor, [(x.features, x.frames) for _, x in batch])
        out = run_models(self.models, features, mask, [x.features.shape[0] for _, x in batch],
                         [x.audio_16k for _, x in batch])
        results: list[ItemResult | ItemProblem] = []
        for row, (_item, loaded) in enumerate(batch):
            count = code_count(loaded.features.shape[0])
            problem = limit_problem(int(loaded.text_ids.size), count, self.models)
            if problem is not None:
                results.append(problem)
                continue
            results.append(ItemResult(text_ids=loaded.text_ids, codes=out.codes[row, :count].numpy().astype(np.int32),
                                      spk_vec=out.spk_vec[row].numpy().astype(np.float32),
                                      emo_vec=out.emo_vec[row].numpy().astype(np.float32)))
        return results

    def write(self, out_dir: Path, item: SourceItem, result: ItemResult) -> dict[str, Any]:
        self.write_arrays(out_dir, item, (result.text_ids, result.codes, result.spk_vec, result.emo_vec))
        return {"text_len": int(result.text_ids.size), "code_len": int(result.codes.size)}


# ---------------------------------------------------------------------------------------------
# Manifests


def utterance_entry(item: SourceItem, record: Mapping[str, Any], text_scheme: str) -> dict[str, Any]:
    """One line of the per-utterance manifest."""
    stem = item.stem
    return paired_lines.utterance_line(item, record, {
        "text_scheme": text_scheme, "codes_path": f"codes/{stem}.npy", "code_len": int(record["code_len"]),
        "spk_vec_path": f"spk_vec/{stem}.npy", "emo_vec_path": f"emo_vec/{stem}.npy"})


def build_pairs(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """2.5 paired lines (``generations.indextts25.data.manifest``): the prompt's CAM++ vector, the target's text
    scheme."""
    return paired_lines.pair_lines(utterances, pairs_per_target, seed, prompt_fields=("spk_vec_path",),
                      target_fields={"text_scheme": "text_scheme"})


# ---------------------------------------------------------------------------------------------
# The run


def settings_fingerprint(config: Mapping[str, Any], files: Mapping[str, Path], w2v_bert: str, tokenizer: Any) -> str:
    """What shapes the files: the model sections, the weight files (path, size, mtime), the text scheme."""
    data = {"recipe": "2.5 speaker-prompt route, true lengths", "gpt_section": config.get("gpt"),
            "codec_section": config.get("semantic_codec"), "campplus_section": config.get("campplus"),
            **{name: paired_prep.file_signature(path) for name, path in sorted(files.items())},
            "w2v_bert": paired_prep.w2v_signature(w2v_bert), "text": tokenizer.describe()}
    return paired_prep.short_hash(data)


def _hub_file(folder: Path, name: str) -> Path:
    """``folder/name``, else ``folder/hf_cache/name`` (where a 2.5 download keeps what it fetched)."""
    cached = folder / HUB_CACHE / name
    return cached if not (folder / name).exists() and cached.exists() else folder / name


def prepare(input_path: str | Path, out_dir: str | Path, config: str | Path, *, codec: str | Path | None = None,
            gpt: str | Path | None = None, campplus: str | Path | None = None, tokenizer: str | Path | None = None,
            text_scheme: str = "merges", text_merges: str | Path | None = None, **options: Any) -> PrepareReport:
    """Prepare ``input_path`` into ``out_dir`` (see the module docstring); raises PrepareError on bad inputs.
    ``options``: the shared ones (``paired_prep.RunOptions``: w2v_bert, language, device, progress...)."""
    from generations.indextts25.data.text_table import DEFAULT_TABLE

    started = time.perf_counter()
    opts = paired_prep.RunOptions(**options)
    config_path = Path(config)
    cfg = paired_prep.load_prepare_config(config_path, opts)
    folder = config_path.parent
    table = folder / TABLE_FILE
    gpt_path, stats_path = paired_prep.base_files(config_path, cfg, gpt, opts.w2v_stats)
    files = {
        "gpt": gpt_path,
        "codec": Path(codec) if codec else folder / CODEC_FILE,
        "campplus": Path(campplus) if campplus else _hub_file(folder, CAMPPLUS_FILE),
        "w2v_stats": stats_path,
        "tokenizer": Path(tokenizer) if tokenizer else table if table.is_file() else DEFAULT_TABLE,
    }
    if text_merges:
        files["text_merges"] = Path(text_merges)
    labels = {"gpt": "base GPT", "codec": "IndexTTS-2.5 codec", "campplus": "CAM++ weights",
              "w2v_stats": "w2v-BERT stats", "tokenizer": "2.5 text table", "text_merges": "merges file"}
    for name, path in files.items():
        if not path.is_file():
            raise PrepareError(f"{labels[name]} not found: {path}")
    items, skipped = paired_prep.read_items(input_path, opts)
    torch_device = paired_prep.resolve_device(opts.device)
    models = load_models(cfg, gpt=files["gpt"], codec=files["codec"], campplus=files["campplus"],
                         w2v_bert=opts.w2v_bert, w2v_stats=files["w2v_stats"], table=files["tokenizer"],
                         text_scheme=text_scheme, text_merges=files.get("text_merges"), device=torch_device)
    preparer = ItemPreparer(models=models, **opts.durations(longest_seconds(int(models.limits.max_codes or 0), ID_25)),
                            fingerprint=settings_fingerprint(cfg, files, opts.w2v_bert, models.tokenizer))
    scheme = models.tokenizer.scheme

    def add_s2mel(out: Path, audio_of_stem: Mapping[str, Path]) -> None:
        if isinstance(cfg.get("s2mel"), dict):  # what S2Mel training reads (a rerun adds only the missing files)
            from data_tools.s2mel_clip import add_s2mel_files_of

            add_s2mel_files_of(out, audio_of_stem, models.campplus, cfg)

    manifests = paired_prep.Manifests(utterance_entry=lambda item, record: utterance_entry(item, record, scheme),
                                      build_pairs=build_pairs, add_s2mel_files=add_s2mel)
    return paired_prep.run_paired(items, skipped, preparer, Path(out_dir).absolute(), manifests, opts,
                                  device=torch_device, started=started)


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = paired_parser("data_tools.prepare_v25", "IndexTTS-2.5: audio + transcripts -> 25 Hz codes, CAM++ and "
                                                     "emotion vectors, text ids and a 2.5 paired manifest.",
                           input_help="JSONL list ({audio, text, speaker?, id?, language?}), metadata.csv, or a "
                                      "folder of audio + .txt",
                           config_help="IndexTTS-2.5 config.yaml (gpt, semantic_codec); the other files default to "
                                       "its folder's")
    parser.add_argument("--codec", type=Path, help=f"the 2.5 codec (default: {CODEC_FILE} beside the config)")
    parser.add_argument("--campplus", type=Path,
                        help=f"CAM++ weights (default: {CAMPPLUS_FILE} beside the config, or in its {HUB_CACHE}/)")
    parser.add_argument("--tokenizer", type=Path,
                        help=f"the 2.5 text table (default: {TABLE_FILE} beside the config, else the studio's)")
    parser.add_argument("--text-scheme", choices=("merges", "bytes", "translit"), default="merges",
                        help="how text becomes ids (as the trainer's --text-scheme; merges)")
    parser.add_argument("--text-merges", type=Path, help="merges scheme: the Ethiopic merges JSON (default: the "
                                                         "studio's)")
    parser.add_argument("--language", help="language of the transcripts, e.g. am (the text prefix; required per "
                                           "item, here or in the list)")
    add_run_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), prepare, argv, own=("campplus", "text_scheme", "text_merges"))


if __name__ == "__main__":
    raise SystemExit(main())
