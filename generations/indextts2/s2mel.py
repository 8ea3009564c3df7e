"""IndexTTS2's S2Mel training sources: the download folder's synthesizer with the GPT of ``--base-checkpoint``;
the semantic input is ``vq2emb(codes)`` of the semantic codec, and the GPT's latent for the same codes,
teacher-forced on the clip's text (``text_ids/<stem>.npy``) with its conditioning (``condition/<stem>.npy`` +
``emo_vec/<stem>.npy``): the inputs of inference's latent pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from data_tools.npy import read_npy
from trainer.s2mel.dataset import LatentFn, SemanticFn, gpt_latent_teacher_forced
from trainer.s2mel.sources import S2MelSources, w2v_bert_of


def semantic_fn(codec: nn.Module) -> SemanticFn:
    @torch.no_grad()
    def semantic(codes: Tensor) -> Tensor:
        return codec.vq2emb(codes[None])[0].T  # type: ignore[operator]

    return semantic


def latent_fn(gpt: nn.Module, folder: Path) -> LatentFn:
    def latent(stem: str, codes: Tensor) -> Tensor:
        def array(name: str) -> Tensor:
            return torch.from_numpy(read_npy(folder / name / f"{stem}.npy"))

        with torch.no_grad():
            conds = gpt.conds_of(  # type: ignore[operator]
                None, None, condition=array("condition").float()[None], emo_vec=array("emo_vec").float()[None]
            )
        return gpt_latent_teacher_forced(gpt, conds, array("text_ids").long(), codes)

    return latent


def sources(opts: dict[str, Any], folder: Path, device: torch.device) -> S2MelSources:
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer

    w2v, local = w2v_bert_of(opts)
    synth = S2MelSynthesizer.load(folder, w2v_bert=w2v, checkpoint=opts.get("base_checkpoint") or None,
                                  tokenizer=opts.get("tokenizer") or None, device=device, local_files_only=local)
    gpt = synth.nets.gpt.eval()
    return S2MelSources(synth, semantic_fn(synth.nets.codec), lambda data: latent_fn(gpt, data),
                        {"gpt_dim": synth.nets.config["gpt"]["model_dim"]}, text_rows=int(gpt.text_vocab_size))
