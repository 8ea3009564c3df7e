"""Taking over a community IndexTTS2 run: its model_step*.pth and latest.pth, repaired into this trainer's format.

The community files are built the way its trainer writes them (shared/reference/README_indextts2.md,
"Checkpoints"; fixtures_indextts2/FIXTURES.md, tiny_community_checkpoint.pth): the state dict in the
upstream model's key order (tests/fixtures/indextts2_gpt_state_dict_shapes.json, filtered to the tiny
model), channels_last conv weights, one AdamW group over every parameter in that order with state only
for the 37 parameters that get a gradient, a transformers-style LambdaLR (``lr_lambdas == [{}]``), and a
latest.pth with a real ``np.random.get_state()`` tuple and a ``TorchVersion``.
"""

from __future__ import annotations

import functools
import json
import math
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from data_tools.config import load_config
from data_tools.text_tokenizer import TextTokenizer
from data_tools.tokenizer import extend_tokenizer, train_tokenizer
from tests.checkpoint_factory import MarkerPayload
from trainer.checkpoints import (
    CheckpointError,
    check_file_digest,
    export_checkpoint,
    load_checkpoint,
    restore_rng_state,
    select_resume,
    validate_checkpoint,
    verify_checkpoint,
)
from trainer.checkpoints.community_load import _community_latest_globals, load_for_repair
from trainer.checkpoints.repair import repair_checkpoint
from trainer.checkpoints.verify import PARTIAL

FIXTURES = Path(__file__).resolve().parent / "fixtures"
V2_CONFIG = FIXTURES / "tiny_config_v2.yaml"
UPSTREAM_SHAPES = FIXTURES / "indextts2_gpt_state_dict_shapes.json"
CORPUS = FIXTURES / "corpus"
REPO = Path(__file__).resolve().parents[1]
# Modules the community v2 loss never runs (it feeds precomputed conditioning): no gradient, no AdamW state.
NO_GRADIENT = ("conditioning_encoder.", "perceiver_encoder.", "emo_conditioning_encoder.", "emo_perceiver_encoder.",
               "emovec_layer.", "emo_layer.")


def cosine_with_warmup(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    """The shape of transformers' get_cosine_schedule_with_warmup (a partial, so lr_lambdas saves as {})."""
    if step < num_warmup_steps:
        return step / max(1, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


@dataclass
class CommunityRun:
    gpt: dict[str, Any]
    model: torch.nn.Module
    optimizer: torch.optim.AdamW
    scheduler: torch.optim.lr_scheduler.LambdaLR
    order: list[str]  # parameter names in the community optimizer's index order
    state: dict[str, torch.Tensor]  # the state dict in upstream key order


def community_v2_run(steps: int = 2, seed: int = 0) -> CommunityRun:
    from networks.unified_voice import build_model

    gpt = load_config(V2_CONFIG)["gpt"]
    torch.manual_seed(seed)
    model = build_model(gpt).to(memory_format=torch.channels_last)  # the community trainer converts it
    ours = model.state_dict()
    upstream = [k for k in json.loads(UPSTREAM_SHAPES.read_text())["keys"] if k in ours]
    assert sorted(upstream) == sorted(ours)
    buffers = {name for name, _ in model.named_buffers()}
    order = [k for k in upstream if k not in buffers]
    params = dict(model.named_parameters())
    optimizer = torch.optim.AdamW([params[k] for k in order], lr=2e-5, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, functools.partial(cosine_with_warmup, num_warmup_steps=4, num_training_steps=100))
    generator = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        for name, param in params.items():
            param.grad = None if name.startswith(NO_GRADIENT) else torch.randn(param.shape, generator=generator)
        optimizer.step()
        scheduler.step()
    return CommunityRun(gpt, model, optimizer, scheduler, order, {k: ours[k] for k in upstream})


def model_step_file(run: CommunityRun, path: Path, tokenizer: Path | None, step: int = 2) -> Path:
    torch.save({
        "model": run.state,
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "scaler": None,
        "epoch": 1,
        "step": step,
        "batch_idx": 0,
        "recent_checkpoints": [str(path.resolve())],
        "accumulation_counter": 0,
        "extra": {"type": "step",
                  "manifests": {"train": [{"path": "tiny_dataset/gpt_pairs_train.jsonl", "count": 3, "languages": []}],
                                "val": [{"path": "tiny_dataset/gpt_pairs_train.jsonl", "count": 3, "languages": []}]},
                  "tokenizer": str(tokenizer) if tokenizer else "tokenizers/tiny_bpe.model", "amp_dtype": "float32"},
        "last_losses": {"text_loss": 4.728425979614258, "mel_loss": 8.722846031188965,
                        "mel_top1": 0.14814814925193787},
    }, path)
    return path


def latest_file(run: CommunityRun, path: Path, extra: dict[str, Any] | None = None) -> Path:
    manifests = {"train": [{"path": "tiny_dataset/gpt_pairs_train.jsonl", "count": 3, "languages": []}],
                 "val": [{"path": "tiny_dataset/gpt_pairs_train.jsonl", "count": 3, "languages": []}]}
    torch.save({
        "model": run.state, "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
        "scaler": None, "epoch": 1, "step": 2, "batch_idx": 0, "recent_checkpoints": [str(path.resolve())],
        "manifests": manifests,
        "rng_state": {"torch_cpu": torch.get_rng_state(), "torch_cuda": None, "numpy": np.random.get_state(),
                      "python": random.getstate()},
        "batch_size": 3, "grad_accumulation": 1, "pytorch_version": torch.__version__, "cuda_version": None,
        "cuda_peak_memory": 0, **(extra or {}),
    }, path)
    return path


@pytest.fixture(scope="module")
def run() -> CommunityRun:
    return community_v2_run()


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> tuple[Path, Path]:
    """A 100-piece base tokenizer (the tiny v2 model's vocabulary) and an Amharic extension of it."""
    work = tmp_path_factory.mktemp("tok")
    base = train_tokenizer([CORPUS / "english_train.txt"], work / "en", 100, "bpe", "en")
    new = train_tokenizer([CORPUS / "amharic_train.txt"], work / "am", 300, "bpe", "am")
    extended = work / "ext.model"
    extend_tokenizer(base, new, extended, complete_scripts=False)
    return base, extended


# ----- the community files are what its trainer writes ----------------------------------------------------


def test_built_files_have_the_documented_shape(tmp_path, run, tokenizers):
    step_file = model_step_file(run, tmp_path / "model_step2.pth", tokenizers[0])
    ckpt = torch.load(step_file, weights_only=True)  # model_step files load weights-only as they are
    assert len(ckpt["model"]) == 153 and all(t.dtype == torch.float32 for t in ckpt["model"].values())
    assert len(ckpt["optimizer"]["param_groups"]) == 1 and len(ckpt["optimizer"]["param_groups"][0]["params"]) == 151
    assert len(ckpt["optimizer"]["state"]) == 37
    assert ckpt["scheduler"]["lr_lambdas"] == [{}]
    convs = [t for t in ckpt["model"].values() if t.dim() == 4]
    assert len(convs) == 2 and all(t.stride() == (9, 1, 3, 1) for t in convs)  # channels_last (C is 1)
    assert list(ckpt["model"]) != list(run.model.state_dict())  # upstream key order is not ours
    latest = latest_file(run, tmp_path / "latest.pth")
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(latest, weights_only=True)


# ----- repair ------------------------------------------------------------------------------------------------


def test_repair_v2_model_step_carries_weights_moments_and_schedule_by_name(tmp_path, run, tokenizers):
    from networks.unified_voice import build_model
    from trainer.schedule import build_scheduler
    from trainer.steps import build_optimizer

    source = model_step_file(run, tmp_path / "model_step2.pth", tokenizers[0])
    out = tmp_path / "repaired.pth"
    report = repair_checkpoint(source, out, config=V2_CONFIG, tokenizer=tokenizers[0])
    text = "\n".join(report.lines())
    assert "IndexTTS2 layout" in text and "AdamW moments of 37 of 151 parameters" in text
    assert "data position" in text and "RNG state missing: resume will not be bit-exact" in text
    assert report.verify.verdict == PARTIAL
    assert {c.name for c in report.verify.components if c.status != "ok"} == {"RNG", "sampler position"}
    assert check_file_digest(out).trusted

    ckpt = load_checkpoint(out)
    assert validate_checkpoint(ckpt).ok
    assert "emo_condition_module" in ckpt["model_config"] and ckpt["model_config"]["number_text_tokens"] == 100
    assert all(torch.equal(ckpt["model"][k], v) for k, v in run.state.items())
    assert (ckpt["step"], ckpt["epoch"], ckpt["position"]) == (2, 1, 0)
    assert ckpt["scheduler"]["last_epoch"] == 2 and ckpt["tokenizer"]["vocab_size"] == 100

    # A freshly built v2 model's optimizer (this trainer's) takes the state, and the moments are the community's.
    model = build_model(ckpt["model_config"])
    model.load_state_dict(ckpt["model"])
    optimizer = build_optimizer(model, 1e-4, 0.01, torch.device("cpu"))
    optimizer.load_state_dict(ckpt["optimizer"])
    assert optimizer.param_groups[0]["fused"] is True and optimizer.param_groups[1]["weight_decay"] == 0.0
    assert [g["lr"] for g in optimizer.param_groups] == [run.optimizer.param_groups[0]["lr"]] * 2
    scheduler = build_scheduler(optimizer, 4, 100)
    scheduler.load_state_dict(ckpt["scheduler"])
    assert scheduler.last_epoch == 2
    community_state = run.optimizer.state_dict()["state"]
    by_name = {name: community_state[i] for i, name in enumerate(run.order) if i in community_state}
    assert len(by_name) == 37
    ours_order = [name for name, _ in model.named_parameters()]
    assert any(ours_order.index(name) != run.order.index(name) for name in by_name)  # reordering was needed
    params = dict(model.named_parameters())
    for name, param in params.items():
        if name in by_name:
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(optimizer.state[param][key], by_name[name][key]), (name, key)
        else:
            assert param not in optimizer.state, name
    assert torch.equal(optimizer.state[params["text_head.weight"]]["exp_avg"],
                       run.optimizer.state[dict(run.model.named_parameters())["text_head.weight"]]["exp_avg"])
    for param in model.parameters():  # and it trains on from there
        param.grad = torch.ones_like(param)
    optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_repair_v2_latest_carries_the_rng_streams(tmp_path, run):
    expected_numpy = np.random.get_state()
    expected_python = random.getstate()
    torch_cpu = torch.get_rng_state()
    source = latest_file(run, tmp_path / "latest.pth")  # saves the RNG states captured above
    out = tmp_path / "repaired.pth"
    report = repair_checkpoint(source, out, config=V2_CONFIG)
    assert report.source_kind == "community-latest"
    assert any("RNG state (python, numpy, torch CPU)" in line for line in report.kept)
    ckpt = load_checkpoint(out)  # weights-only, no allow-list: numpy/TorchVersion became tensors/str
    assert ckpt["hparams"] == {"batch_size": 3, "grad_accumulation": 1}
    np.random.seed(1)
    random.seed(1)
    restore_rng_state(ckpt["rng"])
    assert np.array_equal(np.random.get_state()[1], expected_numpy[1]) and random.getstate() == expected_python
    assert torch.equal(torch.get_rng_state(), torch_cpu)
    assert len(ckpt["optimizer"]["state"]) == 37


def test_latest_allow_list_is_exactly_the_five_names_and_nothing_more(tmp_path, run):
    names = {f"{obj.__module__}.{obj.__qualname__}" for obj in _community_latest_globals()}
    assert names == {"numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
                     "numpy.dtypes.UInt32DType", "torch.torch_version.TorchVersion"}
    # One more numpy type (a float64 scalar) is not in the list: refused.
    scalar = latest_file(run, tmp_path / "scalar_latest.pth", {"loss_scale": np.float64(1.5)})
    with pytest.raises(CheckpointError, match="could run code"):
        load_for_repair(scalar)
    # Code in the pickle never runs, under the allow-list too.
    marker = tmp_path / "marker"
    evil = latest_file(run, tmp_path / "evil_latest.pth", {"payload": MarkerPayload(marker)})
    with pytest.raises(CheckpointError, match="could run code"):
        load_for_repair(evil)
    with pytest.raises(CheckpointError):
        repair_checkpoint(evil, tmp_path / "out.pth", config=V2_CONFIG)
    with pytest.raises(CheckpointError):
        select_resume(tmp_path, str(evil))
    assert verify_checkpoint(evil).verdict == "INVALID"
    assert not marker.exists() and not (tmp_path / "out.pth").exists()


def test_community_files_given_to_resume_name_the_repair_command(tmp_path, run, tokenizers):
    step_file = model_step_file(run, tmp_path / "model_step2.pth", tokenizers[0])
    latest = latest_file(run, tmp_path / "latest.pth")
    for path in (step_file, latest):
        with pytest.raises(CheckpointError) as info:
            select_resume(tmp_path, str(path))
        message = str(info.value)
        assert "\n" not in message and "community IndexTTS trainer" in message
        assert f"python -m trainer.checkpoints repair {path} --out NEW.pth --config CONFIG" in message
    with pytest.raises(CheckpointError, match=r"python -m trainer\.checkpoints repair"):
        select_resume(tmp_path, "auto")


def test_verify_cli_on_a_community_latest_names_repair(tmp_path, run):
    latest = latest_file(run, tmp_path / "latest.pth")
    result = subprocess.run([sys.executable, "-m", "trainer.checkpoints", "verify", str(latest)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "repair" in result.stdout


def test_larger_tokenizer_grows_by_meaning_and_resets_the_optimizer_set(tmp_path, run, tokenizers):
    base, extended = tokenizers
    pieces = TextTokenizer(extended).vocab_size
    source = model_step_file(run, tmp_path / "model_step2.pth", base)  # the run recorded the base tokenizer
    out = tmp_path / "grown.pth"
    report = repair_checkpoint(source, out, config=V2_CONFIG, tokenizer=extended)
    ckpt = load_checkpoint(out)
    assert ckpt["optimizer"] is None and ckpt["scheduler"] is None and ckpt["scaler"] is None
    assert any(f"text vocabulary grew 100 -> {pieces:,}" in c and "start fresh" in c for c in report.costs)
    assert any("grown by meaning" in line for line in report.filled)
    embedding = ckpt["model"]["text_embedding.weight"]
    original = run.state["text_embedding.weight"]
    assert embedding.shape[0] == pieces + 1 and ckpt["model_config"]["number_text_tokens"] == pieces
    assert torch.equal(embedding[:100], original[:100]) and torch.equal(embedding[pieces], original[100])
    assert ckpt["base_vocab_size"] == 100 and ckpt["tokenizer"]["vocab_size"] == pieces
    assert validate_checkpoint(ckpt).ok
    smaller = train_tokenizer([CORPUS / "english_train.txt"], tmp_path / "s", 90, "bpe", "en")
    with pytest.raises(CheckpointError, match="shrinking the vocabulary"):
        repair_checkpoint(source, tmp_path / "x.pth", config=V2_CONFIG, tokenizer=smaller)


# ----- export --------------------------------------------------------------------------------------------------


def test_export_v2_bundle_loads_as_stock_gpt_pth(tmp_path, run, tokenizers):
    from networks.unified_voice import build_model, load_gpt_state_dict

    base, extended = tokenizers
    source = model_step_file(run, tmp_path / "model_step2.pth", base)
    grown = tmp_path / "grown.pth"
    repair_checkpoint(source, grown, config=V2_CONFIG, tokenizer=extended)
    out = tmp_path / "bundle"
    report = export_checkpoint(grown, out, config=V2_CONFIG)
    assert {p.name for p in report.files} == {"gpt.pth", "bpe.model", "config.yaml", "LICENSE-NOTICE",
                                             "MODEL_CARD.md"}
    raw = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    pieces = TextTokenizer(extended).vocab_size
    assert raw["version"] == 2.0 and raw["gpt"]["number_text_tokens"] == pieces
    assert raw["gpt"]["emo_condition_module"] == load_config(V2_CONFIG)["gpt"]["emo_condition_module"]
    assert "semantic_codec" in raw and raw["dataset"]["bpe_model"] == "bpe.model"
    exported = torch.load(out / "gpt.pth", weights_only=True)
    assert list(exported) == ["model"]
    fresh = build_model(raw["gpt"])
    assert load_gpt_state_dict(fresh, exported["model"]) == []  # strict
    assert (out / "bpe.model").read_bytes() == extended.read_bytes()
    notice = (out / "LICENSE-NOTICE").read_text(encoding="utf-8")
    assert "derived from IndexTTS (IndexTTS2)" in notice and "must comply with those terms" in notice
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "# IndexTTS2 GPT fine-tune" in card and "- Model version: 2 (config.yaml `version: 2.0`)" in card
    assert f"{pieces:,} pieces" in card and "a community IndexTTS trainer's run" in card
    assert "train: 3 items, hours not recorded" in card and "text 4.7284, mel 8.7228" in card
