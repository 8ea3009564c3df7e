"""What an IndexTTS-2.5 run needs beyond the IndexTTS-1.5/IndexTTS2 path: its tokenizer, its model source.

- The text: ``--tokenizer`` is the 2.5 ``.tiktoken`` table, ``--text-scheme`` the scheme (``merges`` by
  default, with ``--text-merges`` or the studio's Ethiopic merges), one ``TextTable`` for the run.
  Its ``describe()`` goes into the checkpoint's tokenizer record, so a resume with another scheme is refused
  (``trainer.checkpoints.validate``).
- The weights: a 2.5 ``gpt.pth`` (refused by name when it lacks a 2.5-only key), its text table grown for
  the merges scheme: the added tokens' rows (ids from 60510 up, after the base table's spare row) start as
  the mean of the base rows of their bytes' base tokenisation (``added_token_base_ids``), in
  ``text_embedding``, ``text_head.weight`` and ``text_head.bias``. Base rows 0..60509 keep their ids, so
  ``BaseRowFreezer`` keeps them bitwise frozen (``trainer.vocab.frozen_text_rows``).
- A scheme whose table does not fit the weights' text rows is refused.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from generations.indextts25.data.ethiopic_merges import added_token_base_ids
from generations.indextts25.data.text_table import DEFAULT_MERGES, TextTable
from generations.indextts25.data.tiktoken_table import BASE_TEXT_ROWS, BASE_VOCAB_SIZE, TableError
from networks.gpt_config import effective_gpt_config, text_rows
from networks.gpt_v25 import SPK_COND_MODE, V25_ONLY_KEYS
from trainer.checkpoints import checkpoint_kind, tokenizer_record
from trainer.errors import UsageError
from trainer.model_source import ModelStart, load_weights

TABLE_SUFFIX = ".tiktoken"
V25_TEXT_TENSORS = ("text_embedding.weight", "text_head.weight", "text_head.bias")


def is_v25_table(path: str | Path) -> bool:
    """A ``--tokenizer`` that is a 2.5 ``.tiktoken`` table (rather than a SentencePiece model)."""
    return str(path).endswith(TABLE_SUFFIX)


def open_tokenizer(opts: dict[str, Any]) -> TextTable:
    """The run's 2.5 tokenizer from ``--tokenizer``, ``--text-scheme`` and ``--text-merges``; UsageError."""
    merges = str(opts.get("text_merges") or "").strip() or DEFAULT_MERGES
    try:
        return TextTable(opts["tokenizer"], scheme=str(opts.get("text_scheme") or "merges"), merges=merges)
    except (TableError, OSError) as exc:
        raise UsageError(f"--tokenizer {opts['tokenizer']}: {' '.join(str(exc).split())}") from None


def describe_tokenizer(path: str, tokenizer: TextTable) -> str:
    merges = f" ({tokenizer.added_tokens:,} Ethiopic merges)" if tokenizer.scheme == "merges" else ""
    return (f"{path}: IndexTTS-2.5 table, '{tokenizer.scheme}' text scheme{merges}, "
            f"{tokenizer.number_text_tokens + 1:,} text rows, sha256 {tokenizer.sha256[:12]}…")


def run_tokenizer_record(opts: dict[str, Any], tokenizer: TextTable) -> dict[str, Any]:
    """The checkpoint's tokenizer record: the table's, plus the scheme (``describe()``)."""
    record = tokenizer_record(opts["tokenizer"], tokenizer.sha256, tokenizer.vocab_size)
    record["text_scheme"] = tokenizer.describe()
    if tokenizer.merges is not None:
        record["merges_path"] = str(Path(tokenizer.merges).resolve())
    return record


def target_gpt_config(config_gpt: dict[str, Any], tokenizer: TextTable) -> dict[str, Any]:
    """The 2.5 model this run trains: the config's gpt section marked campplus, text rows of the scheme."""
    gpt = effective_gpt_config(copy.deepcopy(config_gpt))
    gpt["spk_cond_mode"] = SPK_COND_MODE
    gpt["number_text_tokens"] = max(int(gpt["number_text_tokens"]), tokenizer.number_text_tokens)
    return gpt


def rows_refusal(rows: int, tokenizer: TextTable, where: str) -> str:
    return (f"{where} has {rows:,} text rows but the '{tokenizer.scheme}' text scheme's table needs "
            f"{tokenizer.number_text_tokens + 1:,}"
            + (f" (or the base table's {BASE_TEXT_ROWS:,}, which the merges scheme grows)"
               if tokenizer.scheme == "merges" else "")
            + ": use the --text-scheme the weights were trained with")


def grow_text_rows(state: dict[str, torch.Tensor], tokenizer: TextTable) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The base 2.5 text tensors (60510 rows) grown by the scheme's added tokens; other tensors shared."""
    added = added_token_base_ids(tokenizer.tokenizer)
    total = tokenizer.number_text_tokens + 1
    out = dict(state)
    for key in V25_TEXT_TENSORS:
        source = state[key].detach()
        grown = torch.empty((total, *source.shape[1:]), dtype=source.dtype)
        grown[:BASE_TEXT_ROWS] = source[:BASE_TEXT_ROWS]
        base = source.to(torch.float64)
        for token_id, base_ids in added.items():
            grown[token_id] = base[torch.tensor(base_ids, dtype=torch.long)].mean(dim=0).to(source.dtype)
        out[key] = grown
    lines = [f"text table grown {BASE_TEXT_ROWS:,} -> {total:,} rows for the merges scheme: rows 0..{BASE_TEXT_ROWS - 1} "
             f"(the base table and its spare row) copied unchanged; {len(added):,} Ethiopic rows from {BASE_TEXT_ROWS} "
             "up, each the mean of the base rows of its bytes' base tokens"]
    return out, lines


def weights_refusal(state_keys: Any, where: str) -> str | None:
    """Refuses weights that lack a 2.5-only key (the first one missing is named), else None."""
    keys = set(state_keys)
    lacking = [key for key in V25_ONLY_KEYS if key not in keys]
    if not lacking:
        return None
    return (f"{where} lacks {lacking[0]}: not an IndexTTS-2.5 GPT checkpoint, but the config describes "
            "IndexTTS-2.5 (refusing to train a random speaker projection or language table); give the 2.5 "
            "gpt.pth, or the config.yaml of the checkpoint's own version")


def from_base_checkpoint(path: Path, config_gpt: dict[str, Any], config_path: Path, tokenizer: TextTable,
                         mmap: bool = False, what: str = "--base-checkpoint") -> ModelStart:
    """A fresh 2.5 run on a 2.5 ``gpt.pth`` (bare or ours), its text table grown for the merges scheme."""
    _, state = load_weights(path, what, mmap, weights_refusal)
    gpt = effective_gpt_config(copy.deepcopy(config_gpt))
    gpt["spk_cond_mode"] = SPK_COND_MODE
    rows = int(state["text_embedding.weight"].shape[0])
    if rows != text_rows(gpt):
        raise UsageError(
            f"--config {config_path} does not match {what} {path}: the config's gpt.number_text_tokens "
            f"{gpt['number_text_tokens']} means {text_rows(gpt)} text rows, the checkpoint has {rows}; use the "
            "config.yaml that came with the checkpoint")
    wanted = tokenizer.number_text_tokens + 1
    if rows == wanted:
        return ModelStart(gpt, state, int(gpt["number_text_tokens"]), f"{what} {path}")
    if rows != BASE_TEXT_ROWS or tokenizer.scheme != "merges":
        raise UsageError(rows_refusal(rows, tokenizer, f"{what} {path}"))
    grown, lines = grow_text_rows(state, tokenizer)
    gpt["number_text_tokens"] = tokenizer.number_text_tokens
    return ModelStart(gpt, grown, BASE_VOCAB_SIZE, f"{what} {path}, text table grown {rows:,} -> {wanted:,} rows "
                                                   "(merges scheme)", lines)


def from_init_checkpoint(path: Path, config_gpt: dict[str, Any], config_path: Path, tokenizer: TextTable,
                         mmap: bool = False) -> ModelStart:
    """``--init-from``: a studio 2.5 checkpoint's weights with its model config, or a bare 2.5 gpt.pth."""
    ckpt, state = load_weights(path, "--init-from", mmap, weights_refusal)
    if checkpoint_kind(ckpt) != "studio":
        return from_base_checkpoint(path, config_gpt, config_path, tokenizer, mmap, what="--init-from")
    gpt = effective_gpt_config(dict(ckpt.get("model_config") or config_gpt))
    gpt["spk_cond_mode"] = SPK_COND_MODE
    rows = int(state["text_embedding.weight"].shape[0])
    if rows != tokenizer.number_text_tokens + 1:
        raise UsageError(rows_refusal(rows, tokenizer, f"--init-from {path}"))
    return ModelStart(gpt, state, ckpt.get("base_vocab_size"), f"--init-from {path} (step {ckpt.get('step')})")


def random_init(config_gpt: dict[str, Any], tokenizer: TextTable) -> ModelStart:
    return ModelStart(target_gpt_config(config_gpt, tokenizer), None, None,
                      "random initialisation (no --base-checkpoint)")


def start(opts: dict[str, Any], config: dict[str, Any], config_path: Path, tokenizer: TextTable,
          mmap: bool) -> ModelStart:
    """Where a 2.5 run's weights come from: --init-from, the base checkpoint, or a random initialisation."""
    if opts.get("init_from"):
        return from_init_checkpoint(Path(opts["init_from"]), config["gpt"], config_path, tokenizer, mmap=mmap)
    if opts.get("base_checkpoint"):
        return from_base_checkpoint(Path(opts["base_checkpoint"]), config["gpt"], config_path, tokenizer, mmap=mmap)
    return random_init(config["gpt"], tokenizer)


def run_rows_refusal(tokens: int, tokenizer: TextTable, where: str) -> str | None:
    """Why a model of ``tokens`` text tokens cannot take the run's text scheme (None: it can)."""
    return None if tokenizer.number_text_tokens == tokens else rows_refusal(tokens + 1, tokenizer, where)


def tokens_per_char_line(items: list[Any], tokenizer: TextTable, limit: int = 2000) -> str:
    """Tokens per character of the items' raw texts under the run's scheme (per language; prefix excluded)."""
    by_language: dict[str, list[str]] = {}
    for item in items:
        if item.text:
            by_language.setdefault(item.language, []).append(item.text)
    if not by_language:
        return "tokens per character: not measured (precomputed text ids)"
    parts = [f"{language} {tokenizer.tokens_per_char(texts[:limit], language):.2f}"
             for language, texts in sorted(by_language.items())]
    return f"tokens per character ('{tokenizer.scheme}' scheme): " + ", ".join(parts)


def saved_model_config(model: torch.nn.Module) -> dict[str, Any]:
    """The gpt config a checkpoint records for a 2.5 GPT (its entry's ``model.saved_config``): it keeps
    ``spk_cond_mode`` out of its own ``gpt_config`` (upstream passes it beside), so it is added back here;
    recognition, resume and export read it."""
    return {**model.gpt_config, "spk_cond_mode": SPK_COND_MODE}  # type: ignore[dict-item]
