"""What the memory of one GPT depends on, counted on the meta device (no memory, no weights): ``model_facts``.

Every parameter, the ones a training step reaches (they get gradients and AdamW moments under a full fine-tune:
IndexTTS2 and 2.5 train from precomputed conditioning, so their prompt encoders never run), and the ones LoRA
trains. The training step itself runs on the meta device to find which parameters get gradients, so the count
follows the network, not a list kept beside it. Each generation's registry entry names the prompt its training
step feeds (``mel_prompt``, ``latent_prompt``, ``speaker_vector_prompt``); memory_estimate.py does the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from generations.registry import generation_of_config
from networks.gpt_config import effective_gpt_config, text_rows
from networks.lora import LoRAError


@dataclass(frozen=True)
class ModelFacts:
    """What the memory of one GPT depends on, counted once on the meta device."""

    version: str  # "1.5", "2" or "2.5"
    parameters: int  # every parameter (all are in memory, fp32)
    reached: int  # parameters a training step reaches: they get gradients under a full fine-tune
    lora_trained: int  # parameters trained under the run's (or the default) LoRA settings
    lora_extra: int  # parameters LoRA adds (its adapters)
    dim: int
    layers: int
    heads: int
    text_vocab: int  # rows of the text head
    mel_vocab: int
    cond_positions: int  # conditioning vectors in front of the text in the GPT's sequence
    dropout: float
    conformer: tuple[int, int, int, int] | None  # (blocks, width, heads, subsampling) when the prompt runs


def mel_prompt(model: torch.nn.Module, dim: int) -> tuple[dict[str, Any], int, bool]:
    """A prompt of log-mels that the model's conformer encodes in every step (IndexTTS-1.5)."""
    cond = int(getattr(model, "num_cond_latents", 32))
    return ({"cond_mels": torch.zeros(1, int(model.cond_input_size), 16), "cond_mel_lengths": torch.tensor([16])},
            cond, True)


def latent_prompt(model: torch.nn.Module, dim: int) -> tuple[dict[str, Any], int, bool]:
    """Precomputed speaker latents + an emotion vector (IndexTTS2): no prompt encoder runs in training."""
    cond = int(model.num_cond_latents)
    return {"condition": torch.zeros(1, cond, dim), "emo_vec": torch.zeros(1, dim)}, cond + 2, False


def speaker_vector_prompt(model: torch.nn.Module, dim: int) -> tuple[dict[str, Any], int, bool]:
    """A CAM++ speaker vector, an emotion vector and a language row (IndexTTS-2.5): a 3-vector block."""
    return ({"spk_vec": torch.zeros(1, 192), "emo_vec": torch.zeros(1, dim), "langs": torch.zeros(1, dtype=torch.long)},
            3, False)


def _meta_batch(model: torch.nn.Module, dim: int, prompt: dict[str, Any]) -> dict[str, Any]:
    """One tiny item of the inputs this generation's training step feeds (trainer.steps.model_inputs)."""
    batch: dict[str, Any] = {"text_ids": torch.full((1, 4), 2), "text_lengths": torch.tensor([4]),
                             "codes": torch.zeros(1, 4, dtype=torch.long), "code_lengths": torch.tensor([4]),
                             "text_lengths_host": [4], "code_lengths_host": [4]}
    return batch | prompt


def _reached_parameters(model: torch.nn.Module, dim: int, prompt: dict[str, Any]) -> set[str]:
    """Names of the parameters that get a gradient from one training step (run on the meta device)."""
    batch = {key: value.to("meta") if isinstance(value, torch.Tensor) else value
             for key, value in _meta_batch(model, dim, prompt).items()}
    out = model(**batch)
    (out.loss_text + out.loss_mel).backward()
    reached = {name for name, param in model.named_parameters() if param.grad is not None}
    model.zero_grad(set_to_none=True)
    return reached


def _conformer_shape(gpt: Mapping[str, Any], encoder_runs: bool) -> tuple[int, int, int, int] | None:
    if not encoder_runs:  # trained from precomputed conditioning: no prompt encoder runs
        return None
    module = gpt["condition_module"]
    layer = str(module.get("input_layer", "conv2d2"))
    subsampling = {"conv2d2": 2, "conv2d": 4, "conv2d6": 6, "conv2d8": 8}.get(layer, 1)
    return int(module["num_blocks"]), int(module["output_size"]), int(module["attention_heads"]), subsampling


def model_facts(gpt_config: Mapping[str, Any], opts: Mapping[str, Any] | None = None) -> ModelFacts:
    """Count the GPT of ``gpt_config`` on the meta device; LoRA as ``opts`` set it (default rank when absent)."""
    from trainer.lora_setup import adapt_model  # the trainer's own freezing rules

    gpt = effective_gpt_config(dict(gpt_config))  # keeps the keys that mark a generation (2.5's spk_cond_mode)
    generation = generation_of_config(gpt)
    with torch.device("meta"):
        model = generation.model.build(gpt)
    if generation.model.training_prompt is None:
        raise ValueError(f"{generation.name} does not say what its training step feeds: no memory estimate")
    version = generation.id
    dim = int(gpt["model_dim"])
    prompt, cond_positions, encoder_runs = generation.model.training_prompt(model, dim)
    parameters = sum(p.numel() for p in model.parameters())
    reached_names = _reached_parameters(model, dim, prompt)
    reached = sum(p.numel() for n, p in model.named_parameters() if n in reached_names)
    lora_opts = {"lora": True, **{k: v for k, v in (opts or {}).items() if k.startswith("lora_")}}
    with torch.device("meta"):
        try:
            adapt_model(model, lora_opts)
        except LoRAError:
            adapt_model(model, {"lora": True})
    adapted = sum(p.numel() for p in model.parameters())
    lora_names = _reached_parameters(model, dim, prompt)  # frozen parameters get no gradient
    lora_trained = sum(p.numel() for n, p in model.named_parameters() if n in lora_names)
    return ModelFacts(
        version=version, parameters=parameters, reached=reached, lora_trained=lora_trained,
        lora_extra=adapted - parameters, dim=dim, layers=int(gpt["layers"]), heads=int(gpt["heads"]),
        text_vocab=text_rows(gpt), mel_vocab=int(gpt["number_mel_codes"]), cond_positions=cond_positions,
        dropout=float(gpt.get("gpt_dropout", 0.1)), conformer=_conformer_shape(gpt, encoder_runs))
