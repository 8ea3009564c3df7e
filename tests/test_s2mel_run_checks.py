"""S2Mel runs (issue 36): the config's training settings are honoured or refused before training; IndexTTS2 text
ids the latent's GPT cannot embed are refused by the pre-flight as by the trainer; a kill in the middle of a save
is survived exactly; a kill before the first save leaves no stale metrics lines."""

# ruff: noqa: F811 (prepared_v25 is test_s2mel_cli's fixture, imported and then requested by name)
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from networks.indextts2 import load_indextts2
from tests.test_s2mel_cli import (  # noqa: F401
    net_of,
    prepared_v2_with_grown_gpt,
    prepared_v25,
    run_argv,
    trainer_cli,
)
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight
from trainer.s2mel.run_plan import make_s2mel_plan
from trainer.s2mel.text_rows import gpt_source, text_ids_refusal
from trainer.train import main as train_main


def steps_of(run: Path, event: str = "train") -> list[int]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [record["step"] for record in map(json.loads, lines) if record["event"] == event]


@pytest.fixture
def model_copy(prepared_v25, tmp_path: Path) -> Path:
    """The 2.5 demo download folder, copied: its config.yaml may be edited."""
    return Path(shutil.copytree(prepared_v25[0], tmp_path / "model"))


def set_s2mel(folder: Path, **changes: object) -> None:
    path = folder / "config.yaml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key == "class_dropout_prob":
            config["s2mel"]["DiT"][key] = value
        else:
            config["s2mel"][key] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def with_model(argv: list[str], folder: Path) -> list[str]:
    return [*argv[:argv.index("--model-dir") + 1], str(folder), *argv[argv.index("--model-dir") + 2:]]


def test_the_run_trains_with_the_configs_loss_and_class_dropout(prepared_v25, model_copy: Path, tmp_path: Path) -> None:
    set_s2mel(model_copy, reg_loss_type="l2", class_dropout_prob=0.0)
    argv = with_model(run_argv(prepared_v25, tmp_path / "run", "--max-steps", "1"), model_copy)
    plan = make_s2mel_plan(parse_argv(argv))
    assert plan.settings is not None, plan.plan.lines()
    assert (plan.settings.loss_type, plan.settings.class_dropout_prob) == ("l2", 0.0)
    assert train_main(argv) == 0
    saved = torch.load(tmp_path / "run" / "latest.pth", weights_only=True)["settings"]
    assert (saved["loss_type"], saved["class_dropout_prob"]) == ("l2", 0.0)


@pytest.mark.parametrize(("changes", "named"), [({"reg_loss_type": "mse"}, "s2mel.reg_loss_type is 'mse'"),
                                                ({"class_dropout_prob": 1.5}, "s2mel.DiT.class_dropout_prob is 1.5")])
def test_an_unsupported_config_setting_is_refused_in_one_line_before_training(
        prepared_v25, model_copy: Path, tmp_path: Path, capsys, changes: dict, named: str) -> None:
    set_s2mel(model_copy, **changes)
    argv = with_model(run_argv(prepared_v25, tmp_path / "run"), model_copy)
    refusal = run_preflight(parse_argv(argv)).refusal
    assert refusal is not None and refusal.startswith(f"{model_copy / 'config.yaml'}: {named}"), refusal
    capsys.readouterr()
    assert train_main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {refusal}"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.fixture(scope="module")
def prepared_v2(demo_workspace, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """(download folder, manifest of 2 prepared clips whose text ids come from the extended tokenizer, the base GPT
    grown to that tokenizer, a voice) of the IndexTTS2 demo."""
    _, folder, manifest, gpt, voice = prepared_v2_with_grown_gpt(demo_workspace.root,
                                                                 tmp_path_factory.mktemp("s2mel_v2"))
    return folder, manifest, gpt, voice


def test_v2_text_ids_beyond_the_base_gpt_are_refused_by_the_preflight_as_by_the_trainer(
        prepared_v2, tmp_path: Path, capsys) -> None:
    folder, manifest, grown, voice = prepared_v2
    argv = run_argv((folder, manifest, voice), tmp_path / "run", "--max-steps", "1")
    refusal = run_preflight(parse_argv(argv)).refusal
    assert refusal is not None and "need the extended GPT checkpoint" in refusal and "--base-checkpoint" in refusal
    assert refusal.startswith(str(manifest.parent / "text_ids")), refusal
    capsys.readouterr()
    assert train_main(argv) == 2  # was an IndexError in the GPT's embedding after an all-[ok] pre-flight
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {refusal}"]
    # The trainer's own check on the GPT it loads says the same: the folder's gpt.pth has the rows planned.
    nets = load_indextts2(folder, local_files_only=True)
    stems = sorted(p.stem for p in (manifest.parent / "codes").glob("*.npy"))
    assert text_ids_refusal(manifest.parent, stems, int(nets.gpt.text_vocab_size),
                            gpt_source(parse_argv(argv), folder)) == refusal
    plan = run_preflight(parse_argv([*argv, "--base-checkpoint", str(grown)]))
    assert plan.refusal is None, plan.lines()
    assert any(check.name == "text ids" and check.ok for check in plan.checks)


def test_a_kill_in_the_middle_of_a_save_resumes_exactly(prepared_v25, tmp_path: Path) -> None:
    """STUDIO_TEST_KILL_DURING_SAVE_AT_STEP acts on S2Mel saves: step 3's write dies half-written, the run resumes
    from step 2's checkpoint and ends bit for bit where an uninterrupted run ends."""
    extra = ("--max-steps", "3")
    straight = trainer_cli(run_argv(prepared_v25, tmp_path / "straight", *extra))
    assert straight.returncode == 0, straight.stderr
    hooks = {"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_KILL_DURING_SAVE_AT_STEP": "3"}
    killed = trainer_cli(run_argv(prepared_v25, tmp_path / "killed", *extra), env=hooks)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert torch.load(tmp_path / "killed" / "latest.pth", weights_only=True)["step"] == 2
    resumed = trainer_cli(run_argv(prepared_v25, tmp_path / "killed", *extra))
    assert resumed.returncode == 0, resumed.stderr
    assert "at step 2" in resumed.stdout, resumed.stdout
    expected, actual = net_of(tmp_path / "straight" / "latest.pth"), net_of(tmp_path / "killed" / "latest.pth")
    assert expected.keys() == actual.keys() and all(torch.equal(expected[k], actual[k]) for k in expected)
    assert sorted(p.name for p in (tmp_path / "killed").iterdir() if p.name.endswith(".pth")) == \
        sorted(p.name for p in (tmp_path / "straight").iterdir() if p.name.endswith(".pth"))
    assert steps_of(tmp_path / "killed") == [1, 2, 3]


def test_a_kill_before_the_first_save_leaves_monotonic_metrics(prepared_v25, tmp_path: Path) -> None:
    argv = run_argv(prepared_v25, tmp_path / "run", "--max-steps", "2", "--save-interval", "2")
    killed = trainer_cli(argv, env={"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_KILL_AFTER_STEP": "1"})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert steps_of(tmp_path / "run") == [1] and not (tmp_path / "run" / "latest.pth").exists()
    assert train_main(argv) == 0  # a fresh start: nothing to resume from
    assert steps_of(tmp_path / "run") == [1, 2]
    assert steps_of(tmp_path / "run", "start") == [0]
