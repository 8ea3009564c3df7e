"""What S2Mel training should condition on: how far each candidate input is from what inference feeds the decoder.

    python bench/s2mel_conditioning.py

On the reference fixtures (tiny, randomly initialised networks: the numbers show the mechanism and its order of
magnitude, not the size of the gap with the released weights):
- IndexTTS2, generated part: inference feeds S = vq2emb(codes) + gpt_layer(latent). Training on codes alone drops
  the GPT term; printed: the term's size relative to vq2emb, and the relative change it makes to the regulated
  condition mu and to one estimator output.
- IndexTTS2, prompt part: inference regulates the prompt's own quantize output; training takes vq2emb of the
  ground-truth codes (printed: the largest difference; it is rounding).
- IndexTTS-2.5, prompt part: inference regulates the prompt's continuous w2v features; a trainer that stores only
  codes regulates decode(codes) (printed: the relative difference of the inputs and of mu).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from networks.s2mel import load_s2mel  # noqa: E402

SHARED = REPO.parent / "shared" / "reference"
BENCH = "s2mel_conditioning"


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@torch.no_grad()
def v2() -> None:
    folder = SHARED / "fixtures_indextts2_audio"
    config = yaml.safe_load((folder / "tiny_audio_config.yaml").read_text(encoding="utf-8"))
    s2mel = load_s2mel(
        folder / "tiny_s2mel.pth",
        config["s2mel"],
        gpt_dim=config["gpt"]["model_dim"],
        gpt_layer_hidden=tuple(config["fixture_widths"]["gpt_layer_hidden"]),
    )
    syn = torch.load(folder / "synthesis_expected.pt", weights_only=True)["synthesis"]
    codes_only = syn["vq2emb"].transpose(1, 2)
    with_latent = codes_only + s2mel.gpt_layer(syn["gpt_latent"])  # type: ignore[misc]
    headline(
        BENCH,
        "v2 |gpt_layer(latent)| / |vq2emb(codes)|",
        float((with_latent - codes_only).norm() / codes_only.norm()),
        "ratio",
        note="the GPT term a codes-only trainer never sees",
    )
    frames = torch.tensor([int(syn["target_lengths"][0])])
    mu_codes = s2mel.length_regulator(codes_only, frames)
    mu_full = s2mel.length_regulator(with_latent, frames)
    headline(
        BENCH, "v2 mu change, codes only vs codes + GPT latent", relative(mu_codes, mu_full), "relative L2"
    )
    t = torch.full((1,), 0.5)
    x = torch.randn(1, 80, mu_full.shape[1], generator=torch.Generator().manual_seed(0))
    est = s2mel.cfm.estimator
    style = syn["style"]
    out_codes = est(x, torch.zeros_like(x), torch.tensor([x.shape[-1]]), t, style, mu_codes)
    out_full = est(x, torch.zeros_like(x), torch.tensor([x.shape[-1]]), t, style, mu_full)
    headline(
        BENCH,
        "v2 estimator output change, codes only vs codes + GPT latent",
        relative(out_codes, out_full),
        "relative L2",
    )
    checks = torch.load(folder / "s2mel_train_expected.pt", weights_only=True)["inputs"]["source_checks"][0]
    headline(
        BENCH,
        "v2 prompt: vq2emb(codes) vs quantize output",
        float(checks["S_vs_dataprep_S_maxabs"]),
        "max abs",
        note="rounding of the straight-through sum: training's prompt input equals inference's",
    )


@torch.no_grad()
def v25() -> None:
    folder = SHARED / "indextts25" / "fixtures_audio"
    config = yaml.safe_load((folder / "tiny_audio_config_v25.yaml").read_text(encoding="utf-8"))
    s2mel = load_s2mel(folder / "tiny_s2mel.pth", config["s2mel"], with_gpt_layer=False)
    item = torch.load(folder / "audio_expected_v25.pt", weights_only=True)["items"][0]
    train = torch.load(folder / "s2mel_train_expected.pt", weights_only=True)["inputs"]
    decoded = train["S_item0"][None]
    continuous = item["spk_cond_emb"]
    frames = torch.tensor([int(train["x_lens"][0])])
    headline(
        BENCH,
        "2.5 prompt input: decode(codes) vs continuous features",
        relative(decoded, continuous),
        "relative L2",
    )
    headline(
        BENCH,
        "2.5 prompt mu: decode(codes) vs continuous features",
        relative(s2mel.length_regulator(decoded, frames), s2mel.length_regulator(continuous, frames)),
        "relative L2",
        note="only the prompt region differs; the generated part is decode(codes) in both",
    )


if __name__ == "__main__":
    v2()
    v25()
