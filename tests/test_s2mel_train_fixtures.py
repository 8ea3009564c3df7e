"""The S2Mel training forward against upstream's (s2mel_train_expected.pt of the IndexTTS2 and 2.5 sets).

Each case: the regulated condition, the estimator output, L1/L2 losses, per-item losses, every parameter's
gradient norm, the named gradients and the set of parameters without a gradient, with the fixture's stored
t and z fed in; tolerances from the FIXTURES files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from networks.s2mel import S2Mel, load_s2mel
from tests.conftest import shared_file
from trainer.s2mel.forward import (
    FlowDraws,
    S2MelTrainingConfigError,
    draw_flow_noise,
    flow_matching_loss,
    loss_type_from_config,
    regulate,
)

FIXTURE_NAME = "s2mel_train_expected.pt"


@dataclass(frozen=True)
class FixtureSet:
    name: str
    folder: tuple[str, ...]
    config_name: str
    with_gpt_layer: bool


SETS = {
    "v2": FixtureSet("v2", ("reference", "fixtures_indextts2_audio"), "tiny_audio_config.yaml", True),
    "v25": FixtureSet(
        "v25", ("reference", "indextts25", "fixtures_audio"), "tiny_audio_config_v25.yaml", False
    ),
}


@dataclass
class Loaded:
    config: dict
    expected: dict
    semantic: torch.Tensor  # (2, S_max, W) zero-padded
    semantic_lens: torch.Tensor


def load_set(spec: FixtureSet) -> Loaded:
    folder = shared_file(*spec.folder)
    config = yaml.safe_load((folder / spec.config_name).read_text(encoding="utf-8"))
    expected = torch.load(folder / FIXTURE_NAME, weights_only=True)
    inputs = expected["inputs"]
    if spec.with_gpt_layer:
        semantic = inputs["S"]
    else:  # 2.5 stores item 0's S; item 1's is the synthesis S_infer of audio_expected_v25.pt
        item1 = torch.load(folder / "audio_expected_v25.pt", weights_only=True)["synthesis"]["S_infer"][0]
        item0 = inputs["S_item0"]
        semantic = torch.stack([item0, F.pad(item1, (0, 0, 0, item0.shape[0] - item1.shape[0]))])
    return Loaded(config, expected, semantic, inputs["S_lens"])


def build_model(spec: FixtureSet, loaded: Loaded) -> S2Mel:
    folder = shared_file(*spec.folder)
    config = loaded.config
    kwargs: dict = {"with_gpt_layer": spec.with_gpt_layer}
    if spec.with_gpt_layer:
        kwargs.update(
            gpt_dim=config["gpt"]["model_dim"],
            gpt_layer_hidden=tuple(config["fixture_widths"]["gpt_layer_hidden"]),
        )
    model = load_s2mel(folder / "tiny_s2mel.pth", config["s2mel"], **kwargs)
    model.train()
    for module in model.modules():  # the fixture turns its one Dropout (the WaveNet's) off
        if isinstance(module, torch.nn.Dropout):
            module.eval()
    return model


@pytest.fixture(scope="module", params=sorted(SETS))
def fixture_set(request: pytest.FixtureRequest) -> tuple[FixtureSet, Loaded]:
    spec = SETS[request.param]
    return spec, load_set(spec)


def run_case(spec: FixtureSet, loaded: Loaded, case: str) -> tuple[S2Mel, dict, torch.Tensor]:
    expected = loaded.expected
    inputs, draws, stored = expected["inputs"], expected["draws"], expected["cases"][case]
    model = build_model(spec, loaded)
    semantic = loaded.semantic.clone().requires_grad_(True)
    mu = regulate(
        model.length_regulator,
        semantic,
        loaded.semantic_lens,
        inputs["x_lens"],
        per_item=stored["mu_mode"] == "per_item",
    )
    mu.retain_grad()
    result = flow_matching_loss(
        model,
        inputs["x1"],
        inputs["x_lens"],
        inputs["prompt_lens"],
        mu,
        inputs["style"],
        FlowDraws(t=draws["t"], z=draws["z"], class_draw=float(stored["class_draw"])),
        loss_type=stored["reg_loss_type"],
    )
    result.loss.backward()
    out = {
        "mu": mu.detach(),
        "estimator_out": result.estimator_out.detach(),
        "loss": result.loss.detach(),
        "loss_items": result.loss_items.detach(),
        "grad_mu": mu.grad,
        "grad_S": semantic.grad,
    }
    return model, out, semantic


def grad_close(name: str, actual: torch.Tensor | None, expected: torch.Tensor) -> None:
    assert actual is not None, f"{name}: no gradient"
    bound = 1e-4 * float(expected.abs().max())
    diff = float((actual - expected).abs().max())
    assert diff <= bound, f"{name}: max |diff| {diff:.3g} > 1e-4 x max|g| = {bound:.3g}"


@pytest.mark.parametrize("case", ["l1", "l2", "l1_mu_per_item", "l1_class_dropout"])
def test_training_forward_and_backward_match_upstream(
    fixture_set: tuple[FixtureSet, Loaded], case: str
) -> None:
    spec, loaded = fixture_set
    stored = loaded.expected["cases"][case]
    reference = loaded.expected["cases"]["l1"]
    model, out, _ = run_case(spec, loaded, case)
    tight = {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(out["mu"], stored.get("mu", reference["mu"]), **tight)
    if stored.get("estimator_out") is not None:
        torch.testing.assert_close(out["estimator_out"], stored["estimator_out"], **tight)
    elif "estimator_out_first16" in stored:  # 2.5's per-item case keeps a summary
        torch.testing.assert_close(out["estimator_out"][..., :16], stored["estimator_out_first16"], **tight)
        total = float(out["estimator_out"].sum())
        assert total == pytest.approx(float(stored["estimator_out_sum"]), rel=1e-5, abs=1e-3)
        total_abs = float(out["estimator_out"].abs().sum())
        assert total_abs == pytest.approx(float(stored["estimator_out_abs_sum"]), rel=1e-5)
    else:  # l2: the forward is identical to l1
        torch.testing.assert_close(out["estimator_out"], reference["estimator_out"], **tight)
    torch.testing.assert_close(out["loss"], stored["loss"], rtol=1e-6, atol=0)
    torch.testing.assert_close(out["loss_items"], stored["loss_items"], rtol=1e-6, atol=0)

    params = dict(model.named_parameters())
    no_grad = {
        f"models.{name}" for name, p in params.items() if p.grad is None and not name.startswith("gpt_layer")
    }
    assert no_grad == set(stored["params_without_grad"])
    for name, norm in stored["grad_param_norms"].items():
        grad = params[name.removeprefix("models.")].grad
        assert grad is not None, name
        assert float(grad.norm()) == pytest.approx(float(norm), rel=1e-4, abs=1e-12), name
    for name, grad in stored["grads"].items():
        grad_close(name, params[name.removeprefix("models.")].grad, grad)
    for group, norm in stored["grad_group_norms"].items():
        grads = [p.grad.flatten() for n, p in params.items() if n.startswith(group) and p.grad is not None]
        assert float(torch.cat(grads).norm()) == pytest.approx(float(norm), rel=1e-4, abs=1e-12), group
    if case == "l1_class_dropout":
        for name, p in params.items():
            if name.startswith("length_regulator") and p.grad is not None:
                assert bool((p.grad == 0).all()), f"{name} must get exact zeros under class dropout"
    if "grad_mu" in stored:
        grad_close("grad_mu", out["grad_mu"], stored["grad_mu"])
    if "grad_S" in stored:
        grad_close("grad_S", out["grad_S"], stored["grad_S"])
    elif "grad_S_first8ch" in stored:
        grad_close("grad_S first 8 channels", out["grad_S"][..., :8], stored["grad_S_first8ch"])
        norms = torch.as_tensor(stored["grad_S_item_norms"]).float()
        torch.testing.assert_close(out["grad_S"].flatten(1).norm(dim=1), norms, rtol=1e-4, atol=0)


def test_seeded_draws_reproduce_upstreams(fixture_set: tuple[FixtureSet, Loaded]) -> None:
    _, loaded = fixture_set
    draws = loaded.expected["draws"]
    generator = torch.Generator().manual_seed(int(draws["seed"]))
    drawn = draw_flow_noise(loaded.expected["inputs"]["x1"], generator)
    assert torch.equal(drawn.t, draws["t"])
    assert torch.equal(drawn.z, draws["z"])
    assert drawn.class_draw == pytest.approx(float(draws["class_draw"]), abs=0)


def test_padding_changes_only_the_documented_tail(fixture_set: tuple[FixtureSet, Loaded]) -> None:
    """The fixture's padding-leak probe: the pad value of x1 reaches only the last 2 x layers valid frames."""
    spec, loaded = fixture_set
    inputs, draws = loaded.expected["inputs"], loaded.expected["draws"]
    probe = loaded.expected["padding_leak"]
    model = build_model(spec, loaded)
    mu = regulate(
        model.length_regulator, loaded.semantic, loaded.semantic_lens, inputs["x_lens"], per_item=False
    )
    outs = []
    short = int(probe["short_item"])
    for pad in (None, 0.0):
        x1 = inputs["x1"].clone()
        if pad is not None:
            x1[short, :, int(inputs["x_lens"][short]) :] = pad
        with torch.no_grad():
            outs.append(
                flow_matching_loss(
                    model,
                    x1,
                    inputs["x_lens"],
                    inputs["prompt_lens"],
                    mu,
                    inputs["style"],
                    FlowDraws(draws["t"], draws["z"], 1.0),
                ).estimator_out
            )
    valid = int(inputs["x_lens"][short])
    changed = (outs[0][short, :, :valid] - outs[1][short, :, :valid]).abs().amax(0)
    assert changed.nonzero().flatten().tolist() == list(probe["valid_frames_changed"])


def test_loss_type_is_l1_or_l2_and_refuses_what_upstream_would_silently_read_as_l1() -> None:
    assert loss_type_from_config({"reg_loss_type": "l1"}) == "l1"
    assert loss_type_from_config({"reg_loss_type": "l2"}) == "l2"
    for bad in ("mse", "L2"):
        with pytest.raises(S2MelTrainingConfigError, match="silently"):
            loss_type_from_config({"reg_loss_type": bad})


def test_fixture_folder_is_named(fixture_set: tuple[FixtureSet, Loaded]) -> None:
    spec, loaded = fixture_set
    assert Path(shared_file(*spec.folder), FIXTURE_NAME).is_file()
    assert loaded.expected["version"] == ("2.0" if spec.with_gpt_layer else "2.5")
