"""w2v-BERT 2.0 semantic features as IndexTTS2 uses them: layer 17 of ``Wav2Vec2BertModel``, normalised.

``SemanticFeatureModel(input_features, attention_mask)`` runs transformers' ``Wav2Vec2BertModel`` (eval) with
every hidden state, takes ``hidden_states[17]`` (the output of the 17th conformer layer; index 0 is the
feature-projection output, and later layers are computed but unused) and returns
``(h17 - mean) / sqrt(var)`` with the stats file (``{"mean": f32[W], "var": f32[W]}``).

Three ways to get the model, all loaded strictly (a key missing, extra or mis-shaped is refused in one line):
``load_w2v_bert_pretrained`` (a local folder or a model id the user names: ``from_pretrained``),
``load_w2v_bert_state`` (a config mapping + a state dict or a ``{"model": ...}`` file, the fixtures' form), and
``build_w2v_bert`` (config only; ``device="meta"`` builds the real 580 M-parameter layout without memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import Wav2Vec2BertConfig, Wav2Vec2BertModel

from networks.loading import StateDictMismatchError, load_strict

SEMANTIC_LAYER = 17
REAL_MODEL_ID = "facebook/w2v-bert-2.0"


def w2v_bert_config(settings: Mapping[str, Any] | Wav2Vec2BertConfig | None = None) -> Wav2Vec2BertConfig:
    """A Wav2Vec2BertConfig from settings (None: transformers' defaults, which are w2v-bert-2.0's sizes)."""
    if isinstance(settings, Wav2Vec2BertConfig):
        return settings
    return Wav2Vec2BertConfig(**dict(settings or {}))


def build_w2v_bert(
    settings: Mapping[str, Any] | Wav2Vec2BertConfig | None = None,
    *,
    device: str | torch.device | None = None,
) -> Wav2Vec2BertModel:
    """An (untrained) Wav2Vec2BertModel in eval mode; ``device="meta"`` builds shapes only."""
    config = w2v_bert_config(settings)
    _check_layer_count(config)
    context = torch.device(device) if device is not None else nullcontext()
    with context:
        model = Wav2Vec2BertModel(config)
    if device is not None:
        model = model.to(device)  # transformers makes ``masked_spec_embed`` on the CPU whatever the context
    return model.eval()


def load_w2v_bert_state(
    settings: Mapping[str, Any] | Wav2Vec2BertConfig, state: Mapping[str, Any] | str | Path
) -> Wav2Vec2BertModel:
    """Build from settings and load a state dict (or a file holding one, optionally as ``{"model": ...}``)."""
    source = "w2v-BERT state dict"
    if isinstance(state, (str, Path)):
        source = str(state)
        path = Path(state)
        if not path.is_file():
            raise FileNotFoundError(f"w2v-BERT weights not found: {path}")
        state = torch.load(path, map_location="cpu", weights_only=True)
    if "model" in state and isinstance(state["model"], Mapping):
        state = state["model"]
    model = build_w2v_bert(settings)
    load_strict(model, state, source)
    return model.eval()


def load_w2v_bert_pretrained(
    name_or_path: str | Path = REAL_MODEL_ID, *, local_files_only: bool = False
) -> Wav2Vec2BertModel:
    """``Wav2Vec2BertModel.from_pretrained`` (float32, eval), refused unless every key loaded exactly.

    A path (absolute, relative with ``./``, or with more than one ``/``) must be an existing folder; a plain
    ``owner/name`` that is not a local folder is a model id (transformers may download it unless
    ``local_files_only``).
    """
    if _looks_like_path(name_or_path) and not Path(name_or_path).is_dir():
        raise FileNotFoundError(f"w2v-BERT folder not found: {name_or_path}")
    try:
        # Mismatched shapes are collected (not raised) so that the refusal below names them in one line.
        model, info = Wav2Vec2BertModel.from_pretrained(
            str(name_or_path),
            dtype=torch.float32,
            local_files_only=local_files_only,
            ignore_mismatched_sizes=True,
            output_loading_info=True,
        )
    except OSError as exc:
        raise FileNotFoundError(f"cannot load w2v-BERT from {name_or_path}: {exc}".splitlines()[0]) from None
    problems = _loading_problems(info)
    if problems:
        raise StateDictMismatchError(
            f"{name_or_path} does not fit {type(model).__name__}: " + "; ".join(problems)
        )
    _check_layer_count(model.config)
    return model.eval()


def _looks_like_path(name_or_path: str | Path) -> bool:
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or text.startswith((".", "/", "~")) or text.count("/") > 1


def _loading_problems(info: Mapping[str, Any]) -> list[str]:
    """transformers' loading report as load_strict words it: missing, unexpected, then shapes by key name."""
    problems = []
    for label in ("missing_keys", "unexpected_keys"):
        names = sorted(str(name) for name in info.get(label) or [])
        if names:
            shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
            problems.append(f"{label.split('_')[0]} {len(names)} key(s): {shown}")
    for item in sorted(info.get("mismatched_keys") or [], key=lambda entry: str(entry[0])):
        name, checkpoint_shape, model_shape = item
        problems.append(f"{name}: checkpoint {list(checkpoint_shape)} vs model {list(model_shape)}")
    return problems


def _check_layer_count(config: Wav2Vec2BertConfig) -> None:
    if config.num_hidden_layers < SEMANTIC_LAYER:
        raise ValueError(
            f"w2v-BERT needs at least {SEMANTIC_LAYER} layers for IndexTTS2's features "
            f"(hidden_states[{SEMANTIC_LAYER}]), this config has {config.num_hidden_layers}"
        )


class SemanticStats(nn.Module):
    """The ``wav2vec2bert_stats.pt`` normalisation: (h - mean) / sqrt(var) per channel."""

    def __init__(self, mean: Tensor, var: Tensor) -> None:
        super().__init__()
        if mean.dim() != 1 or mean.shape != var.shape:
            raise ValueError(
                f"stats need 1-D mean and var of one size, got {tuple(mean.shape)}, {tuple(var.shape)}"
            )
        self.register_buffer("mean", mean.float().clone())
        self.register_buffer("var", var.float().clone())

    @classmethod
    def from_file(cls, path: str | Path) -> SemanticStats:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"w2v-BERT stats file not found: {path}")
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(payload, Mapping) or not {"mean", "var"} <= set(payload):
            raise ValueError(f"{path}: expected a dict with 'mean' and 'var' tensors")
        return cls(payload["mean"], payload["var"])

    def forward(self, hidden: Tensor) -> Tensor:
        return (hidden - self.mean) / torch.sqrt(self.var)


class SemanticFeatureModel(nn.Module):
    """w2v-BERT + stats: SeamlessM4T features (B, T, 160) and mask -> normalised layer-17 output (B, T, W)."""

    def __init__(self, model: Wav2Vec2BertModel, stats: SemanticStats) -> None:
        super().__init__()
        _check_layer_count(model.config)
        if stats.mean.shape[0] != model.config.hidden_size:
            raise ValueError(
                f"stats width {stats.mean.shape[0]} does not match w2v-BERT hidden size {model.config.hidden_size}"
            )
        self.model = model.eval()
        self.stats = stats

    def hidden_states(self, input_features: Tensor, attention_mask: Tensor | None) -> tuple[Tensor, ...]:
        """Every hidden state: [0] feature projection output, [i] output of layer i."""
        output = self.model(
            input_features=input_features, attention_mask=attention_mask, output_hidden_states=True
        )
        return output.hidden_states

    def layer_output(self, input_features: Tensor, attention_mask: Tensor | None) -> Tensor:
        """hidden_states[17], un-normalised."""
        return self.hidden_states(input_features, attention_mask)[SEMANTIC_LAYER]

    def forward(self, input_features: Tensor, attention_mask: Tensor | None) -> Tensor:
        return self.stats(self.layer_output(input_features, attention_mask))
