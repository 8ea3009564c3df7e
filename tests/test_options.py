"""The option schema: one declaration -> parser, argv, train_config.yaml; round trip for every option."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from trainer.options import (
    OPTIONS,
    default_values,
    option_by_name,
    options_to_argv,
    write_train_config,
)
from trainer.options_parser import build_parser, parse_argv

CONTRACT_FLAGS = (
    '--train-manifest', '--val-manifest', '--tokenizer', '--config', '--base-checkpoint', '--output-dir',
    '--epochs', '--max-steps', '--batch-size', '--grad-accumulation', '--num-workers', '--learning-rate',
    '--weight-decay', '--warmup-steps', '--grad-clip', '--text-loss-weight', '--mel-loss-weight', '--log-interval',
    '--val-interval', '--save-interval', '--keep-checkpoints', '--amp', '--grad-checkpointing', '--resume',
    '--seed', '--device', '--max-val-batches', '--init-from', '--freeze-base-rows', '--loss-mode',
    '--preflight',
)

REQUIRED = ["--train-manifest", "t.jsonl", "--tokenizer", "tok.model", "--config", "c.yaml", "--output-dir", "out"]


def non_default_value(option):
    """A valid value different from the default, per kind."""
    if option.repeatable:
        return ["first item.jsonl", "-starts-with-dash.jsonl"]
    if option.kind == "bool":
        return not option.default
    if option.kind == "int":
        return int(option.default) + 3
    if option.kind == "float":
        return float(option.default) * 0.5 + 0.125
    if option.kind == "choice":
        return next(choice for choice in option.choices if choice != option.default)
    if option.name in ("device", "eval_device"):
        return "cuda:1"
    return "-odd value with spaces/and slashes"


def test_every_contract_flag_is_declared_once():
    flags = [option.flag for option in OPTIONS]
    assert len(flags) == len(set(flags))
    assert len({option.name for option in OPTIONS}) == len(OPTIONS)
    for flag in CONTRACT_FLAGS:
        assert flag in flags, flag
    assert option_by_name("preflight").form is False
    assert option_by_name("amp").choices == ("auto", "bf16", "fp16", "off")  # auto: bf16 where the GPU has it
    assert option_by_name("amp").default == "auto"
    assert option_by_name("freeze_base_rows").default is True


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_round_trip_each_option(option):
    values = parse_argv(REQUIRED)
    values[option.name] = non_default_value(option)
    argv = options_to_argv(values)
    assert parse_argv(argv) == values


def test_round_trip_all_options_at_once_and_defaults():
    values = {option.name: non_default_value(option) for option in OPTIONS}
    assert parse_argv(options_to_argv(values)) == values
    defaults = parse_argv(REQUIRED)
    # The documented defaults, written out (not derived from the declarations they check).
    assert {key: defaults[key] for key in ("loss_mode", "epochs", "max_steps", "batch_size", "grad_accumulation",
                                           "learning_rate", "weight_decay", "warmup_steps", "grad_clip",
                                           "text_loss_weight", "mel_loss_weight", "amp", "save_interval",
                                           "keep_checkpoints", "resume", "seed", "device", "freeze_base_rows",
                                           "val_manifest", "max_nonfinite_steps", "vocoder", "sample_every")} == {
        "loss_mode": "masked", "epochs": 10, "max_steps": 0, "batch_size": 8, "grad_accumulation": 1,
        "learning_rate": 2e-5, "weight_decay": 0.01, "warmup_steps": 500, "grad_clip": 1.0,
        "text_loss_weight": 0.2, "mel_loss_weight": 0.8, "amp": "auto", "save_interval": 1000,
        "keep_checkpoints": 3, "resume": "", "seed": 1234, "device": "auto", "freeze_base_rows": True,
        "val_manifest": [], "max_nonfinite_steps": 20, "vocoder": "", "sample_every": 0}
    assert (defaults["train_manifest"], defaults["tokenizer"], defaults["config"], defaults["output_dir"]) == (
        ["t.jsonl"], "tok.model", "c.yaml", "out")
    assert set(defaults) == set(default_values())
    assert parse_argv(options_to_argv(defaults)) == defaults


def test_float_values_round_trip_exactly():
    values = parse_argv(REQUIRED)
    values["learning_rate"] = 1 / 3 * 1e-4
    values["grad_clip"] = 0.1 + 0.2
    assert parse_argv(options_to_argv(values)) == values


def test_argv_is_what_the_ui_runs():
    values = parse_argv([*REQUIRED, "--no-freeze-base-rows", "--learning-rate", "1e-3"])
    argv = options_to_argv(values)
    assert argv[:2] == ["--train-manifest", "t.jsonl"]
    assert "--no-freeze-base-rows" in argv
    assert argv[argv.index("--learning-rate") + 1] == "0.001"
    with pytest.raises(KeyError):
        options_to_argv({"not_an_option": 1})


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
        (["--batch-size", "0"], "--batch-size: must be >= 1"),
        (["--learning-rate", "fast"], "--learning-rate: expected a number"),
        (["--amp", "fp8"], "--amp: invalid choice"),
        (["--device", "tpu"], "--device: expected auto, cpu, cuda or cuda:N"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, fragment, capsys):
    full = [*REQUIRED, *argv]
    with pytest.raises(SystemExit) as exc:
        parse_argv(full)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert fragment in err


def test_unknown_flag_via_cli_is_one_line_exit_2(repo_root):
    proc = subprocess.run([sys.executable, "-m", "trainer.train", *REQUIRED, "--no-such-flag"], cwd=repo_root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: unrecognized arguments: --no-such-flag"]


def test_help_lists_groups():
    text = build_parser().format_help()
    for title in ("Data and model:", "Length and batches:", "Optimisation:", "Logging and checkpoints:", "Run:"):
        assert title in text
    for option in OPTIONS:
        assert option.flag in text


def test_write_train_config_is_yaml_of_the_resolved_values(tmp_path):
    values = parse_argv([*REQUIRED, "--val-manifest", "v1.jsonl", "--val-manifest", "v2.jsonl"])
    path = tmp_path / "run" / "train_config.yaml"
    write_train_config(values, path)
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert loaded == values
    assert not list(path.parent.glob(".*.tmp"))


def test_missing_required_options_parse_as_not_given():
    """The run plan refuses them, in the same words for the pre-flight and the trainer (tests/test_preflight.py)."""
    values = parse_argv([])
    assert values["train_manifest"] == [] and values["tokenizer"] == values["config"] == values["output_dir"] == ""
