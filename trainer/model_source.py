"""Where a run's weights come from: random init, a base checkpoint (grown to the tokenizer), --init-from,
or a resumed checkpoint. Every path ends in a ``ModelStart``: the gpt config to build and the state to load.

Vocabulary growth (issue 4): when ``--tokenizer`` has more pieces than the base model's
``number_text_tokens``, ``trainer.vocab.grow_text_vocab`` builds the larger text embedding/head, copying
base rows by meaning; ``base_vocab_size`` (the base model's ``number_text_tokens``) is recorded so the
base rows can be frozen (``trainer.vocab.BaseRowFreezer``) in this run and every resumed one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from networks.gpt_config import effective_gpt_config, text_rows
from networks.gpt_v25 import V25_ONLY_KEYS
from trainer.checkpoints import checkpoint_kind, load_checkpoint, model_state_of
from trainer.errors import UsageError
from trainer.lora_setup import merge_checkpoint_adapter


@dataclass
class ModelStart:
    gpt_config: dict[str, Any]  # effective gpt section the model is built from
    state_dict: dict[str, torch.Tensor] | None  # None: keep the random initialisation
    base_vocab_size: int | None  # base model's number_text_tokens (None: no base model)
    source: str  # one line for the log
    lines: list[str] = field(default_factory=list)  # growth report etc.

    @property
    def grown(self) -> bool:
        return self.base_vocab_size is not None and self.base_vocab_size < int(self.gpt_config["number_text_tokens"])


def target_gpt_config(config_gpt: dict[str, Any], tokenizer: TextTokenizer) -> dict[str, Any]:
    """The gpt config of the model this run trains: the config's, grown to the tokenizer if larger."""
    gpt = effective_gpt_config(copy.deepcopy(config_gpt))
    if tokenizer.vocab_size > int(gpt["number_text_tokens"]):
        gpt["number_text_tokens"] = tokenizer.vocab_size
    return gpt


def base_tokenizer_for(config: dict[str, Any], config_path: Path) -> TextTokenizer | None:
    """The base model's own tokenizer: ``dataset.bpe_model`` of the config, next to the config file."""
    name = (config.get("dataset") or {}).get("bpe_model")
    if not name:
        return None
    path = Path(name) if Path(name).is_absolute() else Path(config_path).parent / name
    try:
        return TextTokenizer(path)
    except TokenizerError:
        return None


def later_weights_refusal(state_keys: Any, where: str) -> str | None:
    """Refuses weights of an IndexTTS-2.5 GPT for a v1.5/v2 config (the 2.5 release ships a ``version: 2.0``
    config.yaml beside its gpt.pth, so only the weights tell)."""
    keys = set(state_keys)
    found = [key for key in V25_ONLY_KEYS if key in keys]
    if not found:
        return None
    return (f"{where} holds an IndexTTS-2.5 GPT ({', '.join(found)}: CAM++ speaker embedding and language table) "
            "but the config describes an IndexTTS-1.5/IndexTTS2 GPT; the 2.5 release ships a 'version: 2.0' "
            "config.yaml: set 'version: 2.5' at its top level")


def load_weights(path: Path, what: str, mmap: bool = False,
                 refusal_of: Callable[[Any, str], str | None] = later_weights_refusal
                 ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(checkpoint, its model weights with a LoRA run's adapters merged); UsageError (one line) when it holds
    none, or ``refusal_of`` (state keys, where) says they are another generation's."""
    ckpt = load_checkpoint(path, mmap=mmap)
    state = model_state_of(ckpt)
    if state is None:
        raise UsageError(f"{what} {path} holds no model weights (top-level keys: {', '.join(sorted(ckpt)[:6])})")
    refusal = refusal_of(state, f"{what} {path}")
    if refusal:
        raise UsageError(refusal)
    return ckpt, merge_checkpoint_adapter(ckpt, state)  # a LoRA run's weights count with its adapters merged


def _text_rows(state: dict[str, torch.Tensor], path: Path) -> int:
    weight = state.get("text_embedding.weight")
    if weight is None:
        raise UsageError(f"{path} has no text_embedding.weight: not an IndexTTS GPT checkpoint")
    return int(weight.shape[0])


def _grow(state: dict[str, torch.Tensor], gpt: dict[str, Any], tokenizer: TextTokenizer,
          base_tokenizer: TextTokenizer | None) -> tuple[dict[str, torch.Tensor], dict[str, Any], int, list[str]]:
    from trainer.vocab import grow_text_vocab

    result = grow_text_vocab(state, gpt, tokenizer, base_tokenizer)
    grown_cfg = effective_gpt_config(dict(result.gpt_cfg))
    return dict(result.state_dict), grown_cfg, int(result.base_vocab_size), list(result.report_lines)


def from_base_checkpoint(path: Path, config_gpt: dict[str, Any], config_path: Path, config: dict[str, Any],
                         tokenizer: TextTokenizer, mmap: bool = False) -> ModelStart:
    """A fresh run on a base checkpoint (bare IndexTTS gpt.pth or one of ours); grows the vocabulary if needed."""
    _, state = load_weights(path, "--base-checkpoint", mmap)
    gpt = effective_gpt_config(copy.deepcopy(config_gpt))
    rows = _text_rows(state, path)
    expected_rows = text_rows(gpt)
    if rows != expected_rows:
        raise UsageError(
            f"--config {config_path} does not match --base-checkpoint {path}: the config's gpt.number_text_tokens "
            f"{gpt['number_text_tokens']} means {expected_rows} text rows, the checkpoint has {rows}; use the "
            "config.yaml that came with the checkpoint")
    if tokenizer.vocab_size <= int(gpt["number_text_tokens"]):
        return ModelStart(gpt, state, int(gpt["number_text_tokens"]), f"base checkpoint {path}")
    grown_state, grown_cfg, base_vocab, lines = _grow(state, gpt, tokenizer, base_tokenizer_for(config, config_path))
    return ModelStart(grown_cfg, grown_state, base_vocab,
                      f"base checkpoint {path}, text vocabulary grown {gpt['number_text_tokens']} -> "
                      f"{grown_cfg['number_text_tokens']}", lines)


def from_init_checkpoint(path: Path, config_gpt: dict[str, Any], config_path: Path, config: dict[str, Any],
                         tokenizer: TextTokenizer, mmap: bool = False) -> ModelStart:
    """``--init-from``: a checkpoint's weights (ours or bare), re-grown to ``--tokenizer`` when it is larger."""
    ckpt, state = load_weights(path, "--init-from", mmap)
    kind = checkpoint_kind(ckpt)
    if kind != "studio":
        start = from_base_checkpoint(path, config_gpt, config_path, config, tokenizer, mmap)
        start.source = f"--init-from {path} ({kind} weights)" + start.source.removeprefix(f"base checkpoint {path}")
        return start
    gpt = effective_gpt_config(dict(ckpt.get("model_config") or config_gpt))
    base_vocab = ckpt.get("base_vocab_size")
    saved_tok = ckpt.get("tokenizer") or {}
    if tokenizer.vocab_size <= int(gpt["number_text_tokens"]):
        if saved_tok.get("sha256") not in (None, tokenizer.sha256):
            lines = [f"note: --tokenizer differs from the one {path} was trained with "
                     f"({saved_tok.get('path')}); rows keep their ids (same or smaller vocabulary)"]
        else:
            lines = []
        return ModelStart(gpt, state, base_vocab, f"--init-from {path} (step {ckpt.get('step')})", lines)
    previous = None
    if saved_tok.get("path") and Path(saved_tok["path"]).is_file():
        previous = TextTokenizer(saved_tok["path"])
    grown_state, grown_cfg, grown_base, lines = _grow(
        state, gpt, tokenizer, previous or base_tokenizer_for(config, config_path))
    return ModelStart(grown_cfg, grown_state, base_vocab if base_vocab is not None else grown_base,
                      f"--init-from {path} (step {ckpt.get('step')}), text vocabulary grown "
                      f"{gpt['number_text_tokens']} -> {grown_cfg['number_text_tokens']}", lines)


def from_resumed(ckpt: dict[str, Any], path: Path) -> ModelStart:
    gpt = effective_gpt_config(dict(ckpt["model_config"]))
    return ModelStart(gpt, ckpt["model"], ckpt.get("base_vocab_size"), f"resumed checkpoint {path}")


def random_init(config_gpt: dict[str, Any], tokenizer: TextTokenizer) -> ModelStart:
    return ModelStart(target_gpt_config(config_gpt, tokenizer), None, None, "random initialisation (no --base-checkpoint)")
