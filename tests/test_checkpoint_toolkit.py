"""``python -m trainer.checkpoints``: verify, inspect, list, repair, export (issue 6 acceptance)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.config import load_config
from data_tools.text_tokenizer import TextTokenizer
from tests.checkpoint_factory import (
    community_checkpoint,
    make_checkpoint,
    random_file,
    tiny_gpt_config,
    trained_state,
    truncated_copy,
    write_code_pickle,
)
from trainer.checkpoints import (
    CheckpointError,
    CheckpointManager,
    load_checkpoint,
    tokenizer_record,
    validate_checkpoint,
)
from trainer.checkpoints.__main__ import main as cli_main
from trainer.checkpoints.export import export_checkpoint
from trainer.checkpoints.inspect import inspect_checkpoint
from trainer.checkpoints.listing import list_checkpoints
from trainer.checkpoints.repair import repair_checkpoint
from trainer.checkpoints.verify import COMPLETE, INVALID, PARTIAL, verify_checkpoint

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The real command line, in a child process (used where the process boundary matters)."""
    return subprocess.run([sys.executable, "-m", "trainer.checkpoints", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def cli(capsys):
    """The CLI's main() in this process (fast): returns (exit code, stdout, stderr)."""

    def invoke(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = cli_main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code)
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)

    return invoke


@pytest.fixture(scope="module")
def state():
    return trained_state(steps=2)


@pytest.fixture(scope="module")
def complete(tmp_path_factory, state) -> Path:
    path = tmp_path_factory.mktemp("complete") / "model_step2.pth"
    torch.save(make_checkpoint(2, state=state), path)
    return path


# ----- verify -------------------------------------------------------------------------------------------


def test_verify_complete_checkpoint_cli_exit_0(complete):
    result = run_cli("verify", complete, "-v")
    assert result.returncode == 0, result.stderr
    for name in ("model weights", "model config", "tokenizer record", "training counters", "optimizer",
                 "scheduler", "grad scaler", "RNG", "sampler position"):
        assert f"ok      {name}" in result.stdout
    assert result.stdout.strip().endswith("verdict: COMPLETE")


def test_verify_partial_names_what_is_lost(tmp_path, state, cli):
    path = tmp_path / "partial.pth"
    torch.save(make_checkpoint(2, state=state, optimizer_state=None, scheduler_state=None, rng_state=None), path)
    report = verify_checkpoint(path)
    assert report.verdict == PARTIAL and report.exit_code == 1
    assert report.component("optimizer").status == "missing" and report.component("RNG").status == "missing"
    assert report.component("model weights").status == "ok"
    lost = " | ".join(report.lost)
    assert "optimizer state missing" in lost and "RNG state missing: resume will not be bit-exact" in lost
    result = cli("verify", path, "--json")
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "PARTIAL" and any("RNG" in line for line in payload["lost"])


def test_verify_bare_model_is_usable_as_base_not_resumable(tmp_path, state, cli):
    model, *_ = state
    path = tmp_path / "gpt.pth"
    torch.save({"model": model.state_dict()}, path)
    report = verify_checkpoint(path)
    assert report.kind == "bare" and report.verdict == PARTIAL
    assert "usable as --base-checkpoint or --init-from, not resumable" in report.reason
    assert report.usable_as == ["--base-checkpoint", "--init-from"]
    result = cli("verify", path)
    assert result.returncode == 1 and "not resumable" in result.stdout


@pytest.mark.parametrize("case", ["truncated", "random", "code", "zero"])
def test_verify_invalid_files_exit_2_and_code_never_runs(tmp_path, complete, case, cli):
    path = tmp_path / "bad.pth"
    marker = tmp_path / "marker"
    if case == "truncated":
        truncated_copy(complete, path, keep=0.7)
    elif case == "random":
        random_file(path)
    elif case == "zero":
        path.write_bytes(b"")
    else:
        write_code_pickle(path, marker)
    report = verify_checkpoint(path)
    assert report.verdict == INVALID and report.exit_code == 2 and report.reason
    result = cli("verify", path)
    assert result.returncode == 2
    assert "verdict: INVALID" in result.stdout
    expected = {"truncated": "truncated", "random": "not a PyTorch checkpoint", "code": "could run code",
                "zero": "empty file"}[case]
    assert expected in result.stdout
    assert not marker.exists()


def test_verify_detects_nan_weights_as_invalid(tmp_path, state):
    ckpt = make_checkpoint(2, state=state)
    ckpt["model"] = dict(ckpt["model"])
    ckpt["model"]["final_norm.weight"] = torch.full_like(ckpt["model"]["final_norm.weight"], float("nan"))
    path = tmp_path / "nan.pth"
    torch.save(ckpt, path)
    report = verify_checkpoint(path)
    assert report.verdict == INVALID and "NaN/Inf in final_norm.weight" in report.reason


def test_verify_against_tokenizer_and_config(tmp_path, demo_workspace, cli):
    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    gpt = dict(load_config(demo_workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    ckpt = make_checkpoint(1, gpt=gpt, tokenizer=tokenizer_record(demo_workspace.extended_tokenizer))
    path = tmp_path / "demo.pth"
    torch.save(ckpt, path)
    ok = cli("verify", path, "--tokenizer", demo_workspace.extended_tokenizer, "--config", demo_workspace.config)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "compatible with the given --tokenizer/--config" in ok.stdout
    wrong = cli("verify", path, "--tokenizer", demo_workspace.base_tokenizer)
    assert wrong.returncode == 2
    assert "INCOMPATIBLE: tokenizer differs" in wrong.stdout and "vocab 1,000" in wrong.stdout
    other_config = tmp_path / "config.yaml"
    data = yaml.safe_load(demo_workspace.config.read_text())
    data["gpt"]["layers"] = 3
    other_config.write_text(yaml.safe_dump(data))
    mismatch = cli("verify", path, "--config", other_config)
    assert mismatch.returncode == 2 and "layers 2 (checkpoint) vs 3 (now)" in mismatch.stdout
    missing = cli("verify", path, "--tokenizer", tmp_path / "nope.model")
    assert missing.returncode == 2 and missing.stderr.startswith("error: tokenizer not found")
    assert len(missing.stderr.strip().splitlines()) == 1


# ----- inspect and list -----------------------------------------------------------------------------------


def test_inspect_reports_counters_losses_sizes_versions(complete, cli):
    info = inspect_checkpoint(complete)
    assert info["kind"] == "studio" and info["step"] == 2 and info["position"] == 2
    assert info["best_val_loss"] == 3.0 and info["hparams"]["learning_rate"] == 1e-3
    assert info["model"]["values"] > 0 and info["optimizer"]["param_groups"] == 1
    assert info["versions"]["torch"] == str(torch.__version__)
    result = cli("inspect", complete)
    assert result.returncode == 0
    assert "step:        2   epoch: 0   position: 2" in result.stdout and "learning_rate=0.001" in result.stdout
    as_json = cli("inspect", complete, "--json")
    assert json.loads(as_json.stdout)["step"] == 2


def test_list_shows_every_checkpoint_newest_first_with_verdicts(tmp_path, state, cli):
    manager = CheckpointManager(tmp_path, keep=5)
    for step in (10, 20, 30):
        manager.save(make_checkpoint(step, state=state, last_val_loss=float(step) / 10), step, is_best=step == 20)
    (tmp_path / "model_step5.pth").write_bytes(b"")  # a torn leftover
    summaries = list_checkpoints(tmp_path)
    assert [(s.path.name, s.step) for s in summaries] == [
        ("latest.pth", 30), ("model_step30.pth", 30), ("model_step20.pth", 20), ("best.pth", 20),
        ("model_step10.pth", 10), ("model_step5.pth", 5)]
    verdicts = {s.path.name: s.verdict for s in summaries}
    assert verdicts["latest.pth"] == COMPLETE and verdicts["model_step5.pth"] == INVALID
    assert summaries[2].val_loss == pytest.approx(2.0)
    result = cli("list", tmp_path)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:6] == ["file", "kind", "step", "val", "loss", "verdict"]
    assert lines[1].startswith("latest.pth") and "COMPLETE" in lines[1]
    assert lines[-1].startswith("model_step5.pth") and "INVALID" in lines[-1]
    assert cli("list", tmp_path / "missing").returncode == 2


def test_a_checkpoint_rotated_away_while_it_is_listed_is_left_out_not_raised(tmp_path, state, monkeypatch):
    """A running training deletes old step files while the studio lists them (the Test tab built on a restart
    failed the whole studio with FileNotFoundError): the vanished file is skipped, the rest listed."""
    from trainer.checkpoints import metadata

    manager = CheckpointManager(tmp_path, keep=5)
    for step in (10, 20):
        manager.save(make_checkpoint(step, state=state), step)
    real = metadata.read_trailer

    def rotated_meanwhile(path):
        if Path(path).name == "model_step10.pth":
            Path(path).unlink()  # the trainer's rotation, between loading the file and reading its trailer
        return real(path)

    monkeypatch.setattr(metadata, "read_trailer", rotated_meanwhile)
    listed = [s.path.name for s in list_checkpoints(tmp_path, verify=False)]
    assert listed == ["latest.pth", "model_step20.pth"]


# ----- repair -------------------------------------------------------------------------------------------


def _community_latest(state, gpt, rng: bool = True) -> dict:
    """The community latest.pth: top-level manifests, numpy RNG state and a TorchVersion (not weights-only)."""
    import random

    ckpt = community_checkpoint(gpt, state=state)
    extra = ckpt.pop("extra")
    for key in ("last_losses", "accumulation_counter"):
        ckpt.pop(key)
    ckpt.update(manifests=extra["manifests"], batch_size=4, grad_accumulation=2,
                pytorch_version=torch.__version__, cuda_version=None, cuda_peak_memory=0)
    if rng:
        ckpt["rng_state"] = {"torch_cpu": torch.get_rng_state(), "torch_cuda": None,
                             "numpy": np.random.get_state(), "python": random.getstate()}
    return ckpt


def test_repair_community_step_checkpoint(tmp_path, demo_workspace, cli):
    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    gpt = dict(load_config(demo_workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    model_state = trained_state(gpt, steps=2)
    source = tmp_path / "model_step40.pth"
    torch.save(community_checkpoint(gpt, state=model_state), source)
    before = source.read_bytes()
    out = tmp_path / "repaired.pth"
    result = cli("repair", source, "--out", out, "--config", demo_workspace.config,
                     "--tokenizer", demo_workspace.extended_tokenizer)
    assert result.returncode == 0, result.stderr
    assert "cost:   RNG state missing: resume will not be bit-exact" in result.stdout
    assert "verify: PARTIAL" in result.stdout
    assert source.read_bytes() == before  # the input is never written

    ckpt = load_checkpoint(out)
    assert ckpt["step"] == 40 and ckpt["epoch"] == 2 and ckpt["position"] == 5
    assert ckpt["base_vocab_size"] == 1000 and ckpt["model_config"]["number_text_tokens"] == tokenizer.vocab_size
    assert ckpt["tokenizer"]["sha256"] == tokenizer.sha256
    assert ckpt["repaired_from"]["kind"] == "community"
    report = verify_checkpoint(out)
    assert report.verdict == PARTIAL
    assert {c.name for c in report.components if c.status != "ok"} == {"RNG", "sampler position"}
    # The optimizer moments were carried over by parameter name into this trainer's two AdamW groups.
    from networks.unified_voice import build_model
    from trainer.schedule import build_scheduler
    from trainer.steps import build_optimizer

    model = build_model(ckpt["model_config"])
    model.load_state_dict(ckpt["model"])
    optimizer = build_optimizer(model, 1e-3, 0.01, torch.device("cpu"))
    optimizer.load_state_dict(ckpt["optimizer"])
    build_scheduler(optimizer, 10, 100).load_state_dict(ckpt["scheduler"])
    original_model, original_optimizer, _ = model_state
    original_moments = {name: original_optimizer.state[param]["exp_avg"]
                        for name, param in original_model.named_parameters()}
    for name, param in model.named_parameters():
        assert torch.equal(optimizer.state[param]["exp_avg"], original_moments[name]), name
    assert validate_checkpoint(ckpt).ok


def test_repair_community_latest_keeps_rng_without_running_code(tmp_path, state, cli):
    gpt = tiny_gpt_config()
    source = tmp_path / "latest.pth"
    torch.save(_community_latest(state, gpt), source)
    with pytest.raises(CheckpointError, match="could run code"):
        load_checkpoint(source)  # the plain weights-only load refuses its numpy/TorchVersion objects
    as_is = verify_checkpoint(source)
    assert as_is.verdict == INVALID and "community trainer's latest.pth" in as_is.reason and "repair" in as_is.reason
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"gpt": dict(gpt)}))
    out = tmp_path / "repaired.pth"
    report = repair_checkpoint(source, out, config=config)
    assert report.source_kind == "community-latest"
    assert any("RNG state" in line for line in report.kept)
    assert any("tokenizer hash unknown" in line for line in report.costs)
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["rng"]["numpy"]["keys"].dtype == torch.uint32 and ckpt["hparams"]["batch_size"] == 4
    assert ckpt["versions"]["torch"] == str(torch.__version__)
    # A "latest.pth" that also carries code is still refused, and its code never runs.
    evil = tmp_path / "evil_latest.pth"
    marker = tmp_path / "marker"
    payload = _community_latest(state, gpt)
    from tests.checkpoint_factory import MarkerPayload

    payload["extra_code"] = MarkerPayload(marker)
    torch.save(payload, evil)
    result = cli("repair", evil, "--out", tmp_path / "x.pth", "--config", config)
    assert result.returncode == 2 and "could run code" in result.stderr and not marker.exists()
    assert not (tmp_path / "x.pth").exists()


def _trainer_layout_state(steps: int = 2):
    """The tiny model with this trainer's own two-group AdamW (trainer.steps.build_optimizer)."""
    return trained_state(tiny_gpt_config(), steps=steps, trainer_layout=True)


@pytest.mark.parametrize("layout", ["trainer", "foreign"])
def test_repair_upgrades_format_version_1(tmp_path, state, layout):
    model_state = _trainer_layout_state() if layout == "trainer" else state
    ckpt = make_checkpoint(7, state=model_state)
    # Format 1: batch_idx instead of position; no sampler, parameter names, recent list or base vocab.
    v1 = {k: v for k, v in ckpt.items() if k not in ("position", "sampler", "optimizer_param_names",
                                                     "recent_checkpoints", "base_vocab_size")}
    v1.update(format_version=1, batch_idx=3)
    source = tmp_path / "old.pth"
    torch.save(v1, source)
    old_report = verify_checkpoint(source)
    assert old_report.verdict == PARTIAL and "older format version 1" in old_report.reason
    out = tmp_path / "new.pth"
    report = repair_checkpoint(source, out, base_vocab_size=30)
    new = load_checkpoint(out)
    assert new["format_version"] == 2 and new["position"] == 3 and new["base_vocab_size"] == 30
    assert any("sampler state missing" in line for line in report.costs)
    assert report.verify.verdict == PARTIAL
    assert {c.name for c in report.verify.components if c.status != "ok"} == (
        {"sampler position"} if layout == "trainer" else {"sampler position", "optimizer", "scheduler"})
    if layout == "trainer":
        from trainer.checkpoints import optimizer_param_names

        assert new["optimizer_param_names"] == optimizer_param_names(model_state[0], model_state[1])
        original = model_state[1].state_dict()
        assert all(torch.equal(new["optimizer"]["state"][i]["exp_avg"], original["state"][i]["exp_avg"])
                   for i in original["state"])
    else:  # a single-group optimizer is not this trainer's layout: the set is dropped, never invented
        assert new["optimizer"] is None and new["scheduler"] is None and new["scaler"] is None
        assert any("optimizer state dropped" in c for c in report.costs)


@pytest.mark.parametrize("case", ["overwrite", "existing-out", "bare", "current"])
def test_repair_refusals(tmp_path, state, complete, case, cli):
    model, *_ = state
    if case == "bare":
        source = tmp_path / "gpt.pth"
        torch.save({"model": model.state_dict()}, source)
    else:
        source = complete
    out = {"overwrite": source, "existing-out": tmp_path / "exists.pth"}.get(case, tmp_path / "new.pth")
    if case == "existing-out":
        out.write_bytes(b"keep me")
    before = source.read_bytes()
    result = cli("repair", source, "--out", out)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    expected = {"overwrite": "never overwrites", "existing-out": "never overwrites", "bare": "bare model",
                "current": "nothing to repair"}[case]
    assert expected in result.stderr
    assert source.read_bytes() == before
    if case == "existing-out":
        assert out.read_bytes() == b"keep me"


def test_repair_community_without_config_says_what_is_needed(tmp_path, state, cli):
    source = tmp_path / "model_step40.pth"
    torch.save(community_checkpoint(tiny_gpt_config(), state=state), source)
    result = cli("repair", source, "--out", tmp_path / "out.pth")
    assert result.returncode == 2 and "pass --config" in result.stderr


# ----- export -------------------------------------------------------------------------------------------


def _inputs(vocab: int):
    generator = torch.Generator().manual_seed(5)
    text = torch.randint(2, vocab, (2, 6), generator=generator)
    codes = torch.randint(0, 200, (2, 9), generator=generator)
    cond = torch.randn(2, 100, 40, generator=generator)
    return dict(text_ids=text, text_lengths=torch.tensor([6, 4]), codes=codes, code_lengths=torch.tensor([9, 7]),
                cond_mels=cond, cond_mel_lengths=torch.tensor([40, 33]))


@pytest.fixture(scope="module")
def demo_checkpoint(tmp_path_factory, demo_workspace) -> Path:
    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    gpt = dict(load_config(demo_workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    path = tmp_path_factory.mktemp("export_src") / "latest.pth"
    torch.save(make_checkpoint(3, gpt=gpt, state=trained_state(gpt, steps=1, seed=3),
                               tokenizer=tokenizer_record(demo_workspace.extended_tokenizer)), path)
    return path


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("use_safetensors", [False, True], ids=["pth", "safetensors"])
def test_export_round_trip(tmp_path, demo_workspace, demo_checkpoint, dtype, use_safetensors, cli):
    from networks.unified_voice import build_model, load_gpt_state_dict

    out = tmp_path / "bundle"
    args = ["export", demo_checkpoint, "--out", out, "--dtype", dtype, "--config", demo_workspace.config]
    if use_safetensors:
        args.append("--safetensors")
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    # a complete IndexTTS-1.5 inference folder: the base model's BigVGAN comes with it (issue 36)
    expected_files = {"gpt.pth", "config.yaml", "bpe.model", "LICENSE-NOTICE", "MODEL_CARD.md", "bigvgan_generator.pth"}
    assert {p.name for p in out.iterdir()} == expected_files | ({"gpt.safetensors"} if use_safetensors else set())

    ckpt = load_checkpoint(demo_checkpoint)
    config = load_config(out / "config.yaml")
    assert config["gpt"]["number_text_tokens"] == ckpt["model_config"]["number_text_tokens"] == 1916
    assert config["version"] == 1.5
    notice = (out / "LICENSE-NOTICE").read_text(encoding="utf-8")
    assert "derived from IndexTTS (IndexTTS 1.5)" in notice and "bilibili IndexTTS model licence" in notice
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "- Model version: 1.5" in card and "1,916 pieces, sha256 " + tokenizer_record(
        demo_workspace.extended_tokenizer)["sha256"] in card
    assert "step 3, epoch 0" in card and "train: 100 items, hours not recorded" in card
    assert "validation: last 3.1000, best 3.0000" in card and "mel 3.0000" in card
    assert config["dataset"]["bpe_model"] == "bpe.model" and config["vqvae"]["channels"] == 100
    assert (out / "bpe.model").read_bytes() == demo_workspace.extended_tokenizer.read_bytes()
    if use_safetensors:
        from safetensors.torch import load_file

        state = load_file(out / "gpt.safetensors")
    else:
        exported = torch.load(out / "gpt.pth", weights_only=True)
        assert list(exported) == ["model"]
        state = exported["model"]
    wanted = torch.float16 if dtype == "fp16" else torch.float32
    assert all(t.dtype == wanted for t in state.values() if t.is_floating_point())

    fresh = build_model(config["gpt"]).eval()
    assert load_gpt_state_dict(fresh, state) == []  # strict: every key, every shape
    reference = build_model(ckpt["model_config"]).eval()
    reference.load_state_dict({k: v.to(wanted) for k, v in ckpt["model"].items()})  # the same rounding
    inputs = _inputs(1916)
    with torch.no_grad():
        got, want = fresh(**inputs), reference(**inputs)
    assert torch.equal(got.mel_logits, want.mel_logits) and torch.equal(got.text_logits, want.text_logits)
    if dtype == "fp32":
        original = build_model(ckpt["model_config"]).eval()
        original.load_state_dict(ckpt["model"])
        with torch.no_grad():
            assert torch.equal(original(**inputs).mel_logits, got.mel_logits)


def test_export_refuses_to_overwrite_and_wrong_tokenizer(tmp_path, demo_workspace, demo_checkpoint, cli):
    out = tmp_path / "bundle"
    export_checkpoint(demo_checkpoint, out)
    again = cli("export", demo_checkpoint, "--out", out)
    assert again.returncode == 2 and "already holds gpt.pth" in again.stderr
    wrong = cli("export", demo_checkpoint, "--out", tmp_path / "b2", "--tokenizer", demo_workspace.base_tokenizer)
    assert wrong.returncode == 2 and "is not the tokenizer the checkpoint was trained with" in wrong.stderr
    report = export_checkpoint(demo_checkpoint, out, "bf16", force=True)
    assert any("only the gpt section" in note for note in report.notes)
    assert torch.load(out / "gpt.pth", weights_only=True)["model"]["final_norm.weight"].dtype == torch.bfloat16


def test_cli_bad_flags_exit_2_with_one_line(tmp_path):
    result = run_cli("export", tmp_path / "x.pth")
    assert result.returncode == 2 and result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert cli_main(["inspect", str(tmp_path / "missing.pth")]) == 2


# ----- end to end: a repaired community checkpoint is resumable by the trainer ---------------------------


def test_trainer_resumes_from_a_repaired_community_checkpoint(tmp_path, demo_workspace, cli):
    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    gpt = dict(load_config(demo_workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    source = tmp_path / "model_step40.pth"
    torch.save(community_checkpoint(gpt, state=trained_state(gpt, steps=1)), source)
    repaired = tmp_path / "repaired.pth"
    done = cli("repair", source, "--out", repaired, "--config", demo_workspace.config,
               "--tokenizer", demo_workspace.extended_tokenizer)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "run"
    argv = [*demo_workspace.train_argv(max_steps=42), "--output-dir", str(out), "--resume", str(repaired),
            "--num-workers", "0", "--val-interval", "1000", "--save-interval", "1000"]
    result = subprocess.run([sys.executable, "-m", "trainer.train", *argv], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"resumed from {repaired} at step 40, epoch 2, position 5" in result.stdout
    assert "optimizer + scheduler" in result.stdout  # the re-laid-out moments were restored, not reset
    final = load_checkpoint(out / "latest.pth")
    assert final["step"] == 42 and final["format_version"] == 2
    assert verify_checkpoint(out / "latest.pth").verdict == COMPLETE


# ----- the "sounds like the base" guard (issue 22 item 5) -----------------------------------------------


def _as_base_file(ckpt_path: Path, out: Path) -> Path:
    """A bare gpt.pth ({"model": ...}) holding exactly the checkpoint's weights, as a base download is."""
    torch.save({"model": load_checkpoint(ckpt_path)["model"]}, out)
    return out


def test_export_of_the_base_weights_unchanged_is_refused_in_one_line(tmp_path, demo_checkpoint, cli):
    base = _as_base_file(demo_checkpoint, tmp_path / "gpt.pth")
    result = cli("export", demo_checkpoint, "--out", tmp_path / "bundle", "--base", base)
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert "bitwise the base model's" in result.stderr and str(base) in result.stderr
    assert not (tmp_path / "bundle" / "gpt.pth").exists()


def test_export_reports_how_far_the_weights_moved_from_the_recorded_base(tmp_path, demo_workspace,
                                                                         demo_checkpoint):
    base = _as_base_file(demo_checkpoint, tmp_path / "base_gpt.pth")
    ckpt = load_checkpoint(demo_checkpoint)
    moved = {k: v.clone() for k, v in ckpt["model"].items()}
    block = next(k for k in moved if k.startswith("gpt.") and k.endswith("attn.c_attn.weight"))
    moved[block] += 0.01
    ckpt["model"] = moved
    ckpt["hparams"] = dict(ckpt["hparams"], base_checkpoint=str(base))
    source = tmp_path / "trained.pth"
    torch.save(ckpt, source)
    report = export_checkpoint(source, tmp_path / "bundle", config=demo_workspace.config)
    card = (tmp_path / "bundle" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "## Movement from the base model" in card
    assert f"compared with {base}: 1 of {len(moved)} tensors changed" in card
    assert "- GPT blocks: relative change" in card and "text rows" not in card.split("## Movement")[1].split("##")[0]
    assert not any("movement from the base not measured" in note for note in report.notes)


def test_export_without_a_base_at_hand_says_movement_was_not_measured(tmp_path, demo_checkpoint):
    report = export_checkpoint(demo_checkpoint, tmp_path / "bundle")
    assert any("movement from the base not measured" in note for note in report.notes)
    assert "- not measured (no base model at hand)" in (tmp_path / "bundle" / "MODEL_CARD.md").read_text("utf-8")


def test_movement_compares_a_grown_text_table_on_the_base_rows_only():
    from trainer.checkpoints.base_movement import base_movement

    base = {"text_embedding.weight": torch.arange(12.0).reshape(4, 3)}  # 3 pieces + the extra row
    grown = torch.cat((base["text_embedding.weight"][:3], torch.full((2, 3), 7.0), base["text_embedding.weight"][3:]))
    same = base_movement({"text_embedding.weight": grown}, base, Path("base.pth"))
    assert same.unchanged and same.compared == 1
    grown[1, 0] += 1.0
    moved = base_movement({"text_embedding.weight": grown}, base, Path("base.pth"))
    assert moved.changed == 1 and moved.relative["text rows"] > 0
