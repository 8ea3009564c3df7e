"""DVAE: strict loading of the real key layout and exact codes against the reference fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from networks.dvae import DiscreteVAE, DVAEError, build_dvae, load_dvae

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def tiny_vqvae() -> dict:
    return yaml.safe_load((FIXTURES / "tiny_config.yaml").read_text(encoding="utf-8"))["vqvae"]


@pytest.fixture(scope="module")
def expected() -> dict[str, torch.Tensor]:
    return torch.load(FIXTURES / "tiny_dvae_expected.pt", weights_only=True)


def test_codes_match_reference_exactly(tiny_vqvae: dict, expected: dict[str, torch.Tensor]) -> None:
    dvae = load_dvae(FIXTURES / "tiny_dvae.pth", tiny_vqvae)
    codes = dvae.get_codebook_indices(expected["mel"])
    assert codes.dtype == torch.int64
    assert torch.equal(codes, expected["codes"])
    torch.testing.assert_close(dvae.encode(expected["mel"]), expected["encoder_out"], atol=1e-4, rtol=1e-4)


def test_decode_matches_reference(tiny_vqvae: dict, expected: dict[str, torch.Tensor]) -> None:
    dvae = load_dvae(FIXTURES / "tiny_dvae.pth", tiny_vqvae)
    torch.testing.assert_close(dvae.decode(expected["codes"]), expected["decoded_mel"], atol=1e-4, rtol=1e-4)


def test_code_count_for_odd_lengths(tiny_vqvae: dict) -> None:
    torch.manual_seed(0)
    dvae = build_dvae(tiny_vqvae).eval()
    for frames, codes in ((1, 1), (5, 2), (94, 24), (95, 24), (97, 25)):
        assert dvae.get_codebook_indices(torch.randn(1, 100, frames)).shape == (1, codes)


def test_full_size_layout_matches_indextts15() -> None:
    reference = json.loads((FIXTURES / "indextts15_dvae_state_dict_shapes.json").read_text(encoding="utf-8"))
    with torch.device("meta"):
        dvae = DiscreteVAE.from_config(reference["config"])
    shapes = {key: list(value.shape) for key, value in dvae.state_dict().items()}
    assert shapes == reference["keys"]
    assert list(shapes) == list(reference["keys"])  # same order as upstream's state_dict
    assert sum(p.numel() for p in dvae.parameters()) == reference["num_parameters"]


def test_strict_load_names_the_bad_keys(tmp_path: Path, tiny_vqvae: dict) -> None:
    state = torch.load(FIXTURES / "tiny_dvae.pth", weights_only=True)["model"]
    state.pop("decoder.4.bias")
    state["encoder.0.0.weight"] = torch.zeros(8, 100, 3)
    state["extra.weight"] = torch.zeros(1)
    path = tmp_path / "broken.pth"
    torch.save({"model": state}, path)
    with pytest.raises(DVAEError) as info:
        load_dvae(path, tiny_vqvae)
    message = str(info.value)
    assert "missing: decoder.4.bias" in message
    assert "unexpected: extra.weight" in message
    assert "encoder.0.0.weight (8, 100, 3) != (32, 100, 3)" in message


def test_unloadable_and_unsupported(tmp_path: Path, tiny_vqvae: dict) -> None:
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(DVAEError, match="not a loadable DVAE checkpoint"):
        load_dvae(garbage, tiny_vqvae)
    with pytest.raises(DVAEError, match="not found"):
        load_dvae(tmp_path / "missing.pth", tiny_vqvae)
    with pytest.raises(DVAEError, match="use_transposed_convs"):
        build_dvae({**tiny_vqvae, "use_transposed_convs": True})
