"""Loading never runs code; broken files are refused in one line; resume falls back or refuses; validation."""

from __future__ import annotations

import pytest
import torch

from tests.checkpoint_factory import (
    TOKENIZER,
    make_checkpoint,
    random_file,
    replace_file,
    tiny_gpt_config,
    torch_bytes,
    trained_state,
    truncated_copy,
    write_code_pickle,
)
from trainer.checkpoints import (
    CheckpointError,
    CheckpointManager,
    Expectation,
    expected_state_shapes,
    load_checkpoint,
    select_resume,
    validate_checkpoint,
)


@pytest.fixture(scope="module")
def state():
    return trained_state(steps=1)


@pytest.fixture(scope="module")
def good_bytes(state) -> bytes:
    return torch_bytes(make_checkpoint(3, state=state))


@pytest.mark.parametrize("torch_format", [True, False], ids=["torch-zip", "plain-pickle"])
def test_pickle_carrying_code_is_refused_and_never_runs(tmp_path, torch_format):
    marker = tmp_path / "marker"
    path = write_code_pickle(tmp_path / "evil.pth", marker, torch_format=torch_format)
    # Positive control: the payload really does create a marker when loaded unsafely.
    control = tmp_path / "control_marker"
    write_code_pickle(tmp_path / "control.pth", control, torch_format=torch_format)
    if torch_format:
        torch.load(tmp_path / "control.pth", weights_only=False)
    else:
        import pickle

        pickle.loads((tmp_path / "control.pth").read_bytes())
    assert control.exists()

    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and "not a loadable checkpoint" in message and str(path) in message
    if torch_format:
        assert "could run code" in message and "nothing in it was executed" in message
    assert not marker.exists()


@pytest.mark.parametrize("case,expected", [
    ("zero", "empty file (0 bytes)"),
    ("truncated", "truncated"),
    ("random", "not a PyTorch checkpoint"),
    ("missing", "file not found"),
    ("list", "not a checkpoint dict"),
])
def test_broken_files_are_refused_with_one_line_reason(tmp_path, good_bytes, case, expected):
    path = tmp_path / "ckpt.pth"
    good = tmp_path / "good.pth"
    good.write_bytes(good_bytes)
    if case == "zero":
        path.write_bytes(b"")
    elif case == "truncated":
        truncated_copy(good, path, keep=0.6)
    elif case == "random":
        random_file(path)
    elif case == "list":
        torch.save([1, 2, 3], path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert expected in message and "\n" not in message and message.startswith(str(path))


def _run_with(tmp_path, state, steps=(10, 20, 30), keep=3):
    manager = CheckpointManager(tmp_path, keep=keep)
    for step in steps:
        manager.save(make_checkpoint(step, state=state), step)
    return manager


@pytest.mark.parametrize("damage", ["truncated", "zero", "random", "missing"])
def test_auto_resume_falls_back_to_newest_valid_step_file(tmp_path, state, damage):
    _run_with(tmp_path, state)
    latest = tmp_path / "latest.pth"
    step30 = tmp_path / "model_step30.pth"
    if damage == "truncated":
        replace_file(latest, latest.read_bytes()[:1000])
        replace_file(step30, step30.read_bytes()[:1000])  # a torn newest step file is skipped too
    elif damage == "zero":
        replace_file(latest, b"")
    elif damage == "random":
        replace_file(latest, b"\x13\x37" * 999)
    else:
        latest.unlink()
    choice = select_resume(tmp_path, "auto")
    expected_step = 20 if damage == "truncated" else 30
    assert choice.checkpoint["step"] == expected_step
    assert choice.path.name == f"model_step{expected_step}.pth"
    assert any(f"resuming from model_step{expected_step}.pth instead of latest.pth" in n for n in choice.notes)
    if damage == "truncated":
        assert any("model_step30.pth: truncated" in n for n in choice.notes)


def test_auto_resume_uses_latest_when_sound(tmp_path, state):
    _run_with(tmp_path, state)
    choice = select_resume(tmp_path, "auto")
    assert choice.path.name == "latest.pth" and choice.checkpoint["step"] == 30 and choice.notes == []


def test_auto_resume_starts_fresh_only_without_any_checkpoint_file(tmp_path, state):
    assert select_resume(tmp_path / "does-not-exist", "auto") is None
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert select_resume(tmp_path, "auto") is None
    assert select_resume(tmp_path, "") is None


def test_auto_resume_refuses_when_every_checkpoint_is_broken(tmp_path, state):
    _run_with(tmp_path, state, steps=(10, 20))
    for name in ("latest.pth", "model_step10.pth", "model_step20.pth"):
        replace_file(tmp_path / name, b"")
    with pytest.raises(CheckpointError) as info:
        select_resume(tmp_path, "auto")
    message = str(info.value)
    assert "not starting fresh over an existing run" in message and "latest.pth: empty file" in message
    assert "2 other checkpoint(s) fail the same way" in message


def test_resume_path_refuses_a_bare_model_naming_the_right_flags(tmp_path, state):
    model, *_ = state
    path = tmp_path / "gpt.pth"
    torch.save({"model": model.state_dict()}, path)
    with pytest.raises(CheckpointError) as info:
        select_resume(tmp_path, str(path))
    assert ("is a bare model (weights only): use it as --base-checkpoint or --init-from, not --resume"
            in str(info.value))


def test_resume_path_refuses_code_pickle_and_marker_never_appears(tmp_path):
    marker = tmp_path / "marker"
    path = write_code_pickle(tmp_path / "latest.pth", marker)
    with pytest.raises(CheckpointError, match="could run code"):
        select_resume(tmp_path, str(path))
    with pytest.raises(CheckpointError, match="not starting fresh"):
        select_resume(tmp_path, "auto")
    assert not marker.exists()


# ----- validation ---------------------------------------------------------------------------------------


def test_validation_passes_for_the_matching_run(state):
    ckpt = make_checkpoint(5, state=state)
    model, *_ = state
    report = validate_checkpoint(ckpt, Expectation(gpt_config=model.gpt_config, tokenizer=dict(TOKENIZER), base_vocab_size=30,
                                                              manifests=ckpt["manifests"], hparams=ckpt["hparams"]))
    assert report.ok and report.warnings == [] and report.info == ["step 5, epoch 0, position 5"]


def test_validation_refuses_a_different_tokenizer_saying_what_to_do(state):
    ckpt = make_checkpoint(5, state=state)
    other = {"path": "new.model", "sha256": "cd34" * 16, "vocab_size": 12400}
    ckpt["tokenizer"]["vocab_size"] = 12345
    report = validate_checkpoint(ckpt, Expectation(tokenizer=other), path="run/latest.pth")
    assert not report.ok
    assert ("tokenizer differs: checkpoint sha256 ab12ab12… (vocab 12,345) vs --tokenizer cd34cd34… (vocab 12,400)"
            in report.message())
    assert "--init-from run/latest.pth" in report.message()


def test_validation_refuses_mismatched_model_config_and_shapes(state):
    ckpt = make_checkpoint(5, state=state)
    bigger = tiny_gpt_config(number_text_tokens=48, layers=2)
    report = validate_checkpoint(ckpt, Expectation(gpt_config=bigger))
    message = report.message()
    assert "model config differs" in message and "layers 1 (checkpoint) vs 2 (now)" in message
    assert "number_text_tokens 40 (checkpoint) vs 48 (now)" in message
    assert "text_embedding.weight [41, 32] (checkpoint) vs [49, 32] (model)" in message
    assert "missing" in message  # the second layer's keys


def test_expected_shapes_come_from_the_real_model_builder(state):
    model, *_ = state
    shapes = expected_state_shapes(tiny_gpt_config())
    assert shapes == {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_validation_warns_about_changed_hyperparameters_and_manifests(state):
    ckpt = make_checkpoint(5, state=state)
    hparams = dict(ckpt["hparams"], learning_rate=5e-4, batch_size=4, grad_accumulation=2, mel_loss_weight=0.7,
                   num_workers=7)
    manifests = {"train": [dict(ckpt["manifests"]["train"][0], lines=120, sha256="99" * 32)],
                 "val": ckpt["manifests"]["val"]}
    report = validate_checkpoint(ckpt, Expectation(hparams=hparams, manifests=manifests))
    assert report.ok
    text = " | ".join(report.warnings)
    assert "learning_rate 0.001 -> 0.0005" in text and "batch_size 8 -> 4" in text
    assert "grad_accumulation 1 -> 2" in text and "mel_loss_weight 0.8 -> 0.7" in text
    assert "num_workers" not in text
    assert "train manifests changed since the checkpoint: data/train.jsonl (100 -> 120 lines)" in text


@pytest.mark.parametrize("mutation,expected", [
    (lambda c: c.update(format_version=1), "format version 1 is older"),
    (lambda c: c.update(format_version=99), "newer version"),
    (lambda c: c.pop("rng") and None, "incomplete: missing rng"),
    (lambda c: c.update(scheduler=None), "scheduler state missing"),
    (lambda c: c.update(rng={"python": 1}), "RNG state is malformed"),
    (lambda c: c.update(step=-3), "step is -3"),
])
def test_validation_refuses_unsound_checkpoints(state, mutation, expected):
    ckpt = make_checkpoint(5, state=state)
    mutation(ckpt)
    report = validate_checkpoint(ckpt)
    assert not report.ok and expected in report.message()


def test_validation_warns_on_missing_optimizer_rng_and_sampler(state):
    ckpt = make_checkpoint(5, state=state, optimizer_state=None, scheduler_state=None, rng_state=None,
                           sampler_state=None)
    report = validate_checkpoint(ckpt)
    assert report.ok
    text = " | ".join(report.warnings)
    assert "no optimizer state" in text and "not be bit-exact" in text and "no sampler state" in text


def test_auto_resume_with_incompatible_tokenizer_refuses_with_the_difference(tmp_path, state):
    _run_with(tmp_path, state, steps=(10,))
    other = {"path": "new.model", "sha256": "cd34" * 16, "vocab_size": 41}
    with pytest.raises(CheckpointError) as info:
        select_resume(tmp_path, "auto", Expectation(tokenizer=other))
    assert "tokenizer differs" in str(info.value) and "fail the same way" in str(info.value)


def test_mmap_loading_gives_the_same_tensors_and_reads_legacy_files(tmp_path, good_bytes):
    path = tmp_path / "ckpt.pth"
    path.write_bytes(good_bytes)
    mapped, read = load_checkpoint(path, mmap=True), load_checkpoint(path)
    assert all(torch.equal(mapped["model"][k], v) for k, v in read["model"].items())
    legacy = tmp_path / "legacy.pth"
    torch.save({"model": {"w": torch.ones(2)}}, legacy, _use_new_zipfile_serialization=False)
    assert torch.equal(load_checkpoint(legacy, mmap=True)["model"]["w"], torch.ones(2))
