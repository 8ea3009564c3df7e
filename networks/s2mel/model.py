"""The S2Mel model of IndexTTS2 (upstream ``MyModel(cfg.s2mel, use_gpt_latent=True)``) and its checkpoint.

Synthesis path for one segment:
    S_infer = vq2emb(codes)^T + gpt_layer(latent)                        (B, M, W)
    cond = length_regulator(S_infer, int(M * 1.72) frames)              (B, F, C)
    mu = [prompt_condition, cond] over time                             (B, T_ref + F, C)
    mel = CFM(mu, prompt = ref_mel, style)[:, :, T_ref:]                (B, 80, F)
with prompt_condition = length_regulator(S_ref, T_ref frames) computed once per speaker prompt.

IndexTTS-2.5 (``with_gpt_layer=False``) builds no ``gpt_layer``: S_infer is the 2.5 codec's ``decode(codes)``
(B, 2M, W), the target is int(2M * 1.72 * duration_factor) frames and the prompt condition is regulated from
the continuous w2v features; :meth:`S2Mel.infer_features` is that path. The released 2.5 ``s2mel.pth`` still
carries a ``gpt_layer`` part, which the 2.5 model ignores exactly as upstream does.

``s2mel.pth`` is ``{"net": {"cfm": sd, "length_regulator": sd, "gpt_layer": sd}, ...}``; each part is loaded
strictly (a leading ``module.`` on keys, as left by DataParallel training, is dropped as upstream does).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from networks.loading import load_strict
from networks.s2mel.config import REAL_GPT_DIM, REAL_GPT_LAYER_HIDDEN, S2MelConfig
from networks.s2mel.dit import DiT
from networks.s2mel.flow_matching import CFM
from networks.s2mel.gpt_layer import build_gpt_layer
from networks.s2mel.length_regulator import InterpolateRegulator

MEL_FRAMES_PER_CODE = 1.72  # 50 Hz codes -> 22050 / 256 Hz mel frames (upstream's rounded factor)
DEFAULT_STEPS = 25  # infer_v2's hard-coded number of Euler steps
DEFAULT_CFG_RATE = 0.7  # infer_v2's classifier-free guidance rate
NET_PARTS = ("cfm", "length_regulator", "gpt_layer")
GPT_LAYER_PART = "gpt_layer"


class S2MelCheckpointError(ValueError):
    """An s2mel checkpoint file is unreadable or not in the ``{"net": {...}}`` layout."""


def target_mel_frames(num_frames: int, duration_factor: float = 1.0) -> int:
    """Mel frames generated for ``num_frames`` 50 Hz semantic frames: int(T * 1.72 * duration_factor).

    IndexTTS2: T = M codes, factor 1. IndexTTS-2.5: T = 2M (the decoded length of M 25 Hz codes) and its
    ``duration_factor``. Truncated, multiplied in this order as upstream does.
    """
    return int(num_frames * MEL_FRAMES_PER_CODE * duration_factor)


class S2Mel(nn.Module):
    """Holds ``cfm`` (with the DiT ``estimator``), ``length_regulator`` and (IndexTTS2 only) ``gpt_layer``."""

    def __init__(self, config: S2MelConfig | None = None) -> None:
        super().__init__()
        self.config = config or S2MelConfig()
        c = self.config
        self.cfm = CFM(DiT(c))
        self.length_regulator = InterpolateRegulator(
            c.semantic_dim, c.regulator_channels, c.regulator_blocks, c.regulator_codebook_size
        )
        self.gpt_layer: nn.Sequential | None = (
            build_gpt_layer(c.gpt_dim, c.semantic_dim, c.gpt_layer_hidden) if c.with_gpt_layer else None
        )

    @property
    def net_parts(self) -> tuple[str, ...]:
        """The parts of ``s2mel.pth``'s ``net`` this model holds (and requires when loading)."""
        if self.gpt_layer is not None:
            return NET_PARTS
        return tuple(part for part in NET_PARTS if part != GPT_LAYER_PART)

    @classmethod
    def from_config(
        cls,
        s2mel_section: Mapping[str, Any],
        *,
        gpt_dim: int = REAL_GPT_DIM,
        gpt_layer_hidden: tuple[int, int] = REAL_GPT_LAYER_HIDDEN,
        with_gpt_layer: bool = True,
    ) -> S2Mel:
        """Build (randomly initialised) from a config's ``s2mel`` section; ``gpt_dim`` = ``gpt.model_dim``.

        ``with_gpt_layer=False``: IndexTTS-2.5's S2Mel.
        """
        return cls(
            S2MelConfig.from_section(
                s2mel_section,
                gpt_dim=gpt_dim,
                gpt_layer_hidden=gpt_layer_hidden,
                with_gpt_layer=with_gpt_layer,
            )
        )

    def net_state_dict(self) -> dict[str, dict[str, Tensor]]:
        """The ``net`` entry of ``s2mel.pth``: one state dict per part."""
        return {part: getattr(self, part).state_dict() for part in self.net_parts}

    def load_net(
        self, net: Mapping[str, Any], source: str = "s2mel checkpoint", *, assign: bool = False
    ) -> None:
        """Load every part of a ``net`` dict strictly; the error names the part and its first bad key.

        Parts this model does not hold (a ``gpt_layer`` in a 2.5 model's file) are ignored, as upstream does.
        """
        for part in self.net_parts:
            if part not in net:
                raise S2MelCheckpointError(
                    f"{source}: 'net' has no '{part}' state dict (found: {sorted(net)})"
                )
            if not isinstance(net[part], Mapping):
                raise S2MelCheckpointError(
                    f"{source}: net.{part} is {type(net[part]).__name__}, not a state dict"
                )
        for part in self.net_parts:
            state = {_strip_module_prefix(key): value for key, value in net[part].items()}
            load_strict(getattr(self, part), state, f"{source} net.{part}", assign=assign)

    # -- the synthesis path -------------------------------------------------------------------------------

    @torch.no_grad()
    def prompt_condition(self, semantic_ref: Tensor, mel_frames: int) -> Tensor:
        """S_ref (B, T, W) of the speaker prompt -> (B, mel_frames, C), the prompt's part of the condition."""
        lengths = torch.full(
            (semantic_ref.shape[0],), mel_frames, dtype=torch.long, device=semantic_ref.device
        )
        return self.length_regulator(semantic_ref, lengths)

    def semantic_features(self, gpt_latent: Tensor, code_embedding: Tensor) -> Tensor:
        """S_infer (B, M, W) = code_embedding^T + gpt_layer(gpt_latent).

        gpt_latent (B, M, gpt_dim) is the GPT's latent forward; code_embedding (B, W, M) is the semantic
        codec's ``vq2emb`` of the same M codes.
        """
        c = self.config
        if self.gpt_layer is None:
            raise ValueError(
                "this S2Mel has no gpt_layer (IndexTTS-2.5 layout): "
                "use infer_features with codec-decoded features"
            )
        if gpt_latent.dim() != 3 or gpt_latent.shape[-1] != c.gpt_dim:
            raise ValueError(f"gpt_latent must be (batch, codes, {c.gpt_dim}), got {tuple(gpt_latent.shape)}")
        expected = (gpt_latent.shape[0], c.semantic_dim, gpt_latent.shape[1])
        if tuple(code_embedding.shape) != expected:
            raise ValueError(
                f"code_embedding must be (batch, {c.semantic_dim}, codes) = {expected} to match gpt_latent, "
                f"got {tuple(code_embedding.shape)}"
            )
        return code_embedding.transpose(1, 2) + self.gpt_layer(gpt_latent)

    @torch.no_grad()
    def infer(
        self,
        *,
        prompt_condition: Tensor,
        ref_mel: Tensor,
        style: Tensor,
        gpt_latent: Tensor,
        code_embedding: Tensor,
        steps: int = DEFAULT_STEPS,
        cfg_rate: float = DEFAULT_CFG_RATE,
        temperature: float = 1.0,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
        trace: dict[str, object] | None = None,
    ) -> Tensor:
        """IndexTTS2: mel (B, 80, int(M * 1.72)) for one segment.

        prompt_condition (B, T_ref, C) from :meth:`prompt_condition`; ref_mel (B, 80, T_ref) the prompt's
        S2Mel log-mel; style (B, S) the CAMPPlus embedding; gpt_latent (B, M, gpt_dim); code_embedding
        (B, W, M) the codec's ``vq2emb`` of the codes. ``steps`` Euler steps (upstream: 25; fewer is faster
        and rougher). ``noise`` (B, 80, T_ref + F) replaces the random start (else drawn from ``generator``,
        or torch's global generator as upstream). ``trace`` (a dict) receives every intermediate.
        """
        # Upstream runs S2Mel in float32 even when the GPT around it runs under fp16 autocast.
        with torch.autocast(device_type=gpt_latent.device.type, enabled=False):
            features = self.semantic_features(gpt_latent, code_embedding)
            if trace is not None:
                trace["gpt_layer_out"] = self.gpt_layer(gpt_latent)
        return self.infer_features(
            prompt_condition=prompt_condition,
            ref_mel=ref_mel,
            style=style,
            semantic=features,
            target_frames=target_mel_frames(gpt_latent.shape[1]),
            steps=steps,
            cfg_rate=cfg_rate,
            temperature=temperature,
            noise=noise,
            generator=generator,
            trace=trace,
        )

    @torch.no_grad()
    def infer_features(
        self,
        *,
        prompt_condition: Tensor,
        ref_mel: Tensor,
        style: Tensor,
        semantic: Tensor,
        target_frames: int,
        steps: int = DEFAULT_STEPS,
        cfg_rate: float = DEFAULT_CFG_RATE,
        temperature: float = 1.0,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
        trace: dict[str, object] | None = None,
    ) -> Tensor:
        """Mel (B, 80, target_frames) from semantic features S_infer (B, T, W) of one segment.

        IndexTTS-2.5: ``semantic`` = ``codec.decode(codes)`` (B, 2M, W) and ``target_frames`` =
        ``target_mel_frames(2M, duration_factor)``. Other arguments as :meth:`infer`.
        """
        c = self.config
        batch = semantic.shape[0]
        prompt_frames = ref_mel.shape[-1]
        if semantic.dim() != 3 or semantic.shape[-1] != c.semantic_dim:
            raise ValueError(
                f"semantic features must be (batch, frames, {c.semantic_dim}), got {tuple(semantic.shape)}"
            )
        if tuple(prompt_condition.shape) != (batch, prompt_frames, c.regulator_channels):
            raise ValueError(
                f"prompt_condition must be (batch, ref_mel frames, {c.regulator_channels}) = "
                f"{(batch, prompt_frames, c.regulator_channels)}, got {tuple(prompt_condition.shape)}"
            )
        if ref_mel.dim() != 3 or ref_mel.shape[:2] != (batch, c.n_mels):
            raise ValueError(f"ref_mel must be (batch, {c.n_mels}, frames), got {tuple(ref_mel.shape)}")
        if tuple(style.shape) != (batch, c.style_dim):
            raise ValueError(f"style must be (batch, {c.style_dim}), got {tuple(style.shape)}")
        if target_frames < 1:
            raise ValueError(f"{semantic.shape[1]} semantic frame(s) give no mel frame; need at least 1 code")
        # Upstream runs S2Mel in float32 even when the GPT around it runs under fp16 autocast.
        with torch.autocast(device_type=semantic.device.type, enabled=False):
            lengths = torch.full((batch,), target_frames, dtype=torch.long, device=semantic.device)
            cond = self.length_regulator(semantic, lengths)
            mu = torch.cat([prompt_condition, cond], dim=1)
            x_lens = torch.full((batch,), mu.shape[1], dtype=torch.long, device=mu.device)
            full = self.cfm.inference(
                mu,
                x_lens,
                ref_mel,
                style,
                steps,
                cfg_rate,
                temperature=temperature,
                noise=noise,
                generator=generator,
                trace=trace,
            )
            if trace is not None:
                trace.update(
                    S_infer=semantic,
                    target_lengths=lengths,
                    cond=cond,
                    cat_condition=mu,
                    cfm_out_full=full,
                )
            return full[:, :, prompt_frames:]


def _strip_module_prefix(key: str) -> str:
    return key[len("module.") :] if key.startswith("module.") else key


def read_s2mel_net(path: str | Path) -> dict[str, Mapping[str, Any]]:
    """The ``net`` dict of an ``s2mel.pth`` (weights only; other top-level entries are ignored)."""
    path = Path(path)
    if not path.is_file():
        raise S2MelCheckpointError(f"s2mel checkpoint not found: {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a corrupt or foreign file
        raise S2MelCheckpointError(
            f"cannot read s2mel checkpoint {path}: {str(exc).splitlines()[0]}"
        ) from exc
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("net"), Mapping):
        raise S2MelCheckpointError(f"{path} is not an s2mel checkpoint: expected a dict with a 'net' dict")
    return dict(checkpoint["net"])


def load_s2mel(
    path: str | Path,
    s2mel_section: Mapping[str, Any],
    *,
    gpt_dim: int = REAL_GPT_DIM,
    gpt_layer_hidden: tuple[int, int] = REAL_GPT_LAYER_HIDDEN,
    with_gpt_layer: bool = True,
    device: str | torch.device = "cpu",
) -> S2Mel:
    """Build an S2Mel from the config section on the meta device and load ``path`` strictly into it (eval).

    ``with_gpt_layer=False`` loads IndexTTS-2.5's S2Mel: ``cfm`` and ``length_regulator`` strictly, and a
    ``gpt_layer`` part of the file, if any, is not read (2.5 never builds it).
    """
    config = S2MelConfig.from_section(
        s2mel_section, gpt_dim=gpt_dim, gpt_layer_hidden=gpt_layer_hidden, with_gpt_layer=with_gpt_layer
    )
    net = read_s2mel_net(path)
    with torch.device("meta"):
        model = S2Mel(config)
    model.load_net(net, str(path), assign=True)
    return model.to(device).eval()
