"""``python -m trainer.train --train s2mel``: the plan refuses IndexTTS-1.5 in one line; a demo 2.5 run is killed
and resumed bit-exactly through the CLI, and speaks samples at saves; the pre-flight plans it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.s2mel_clip import add_missing_s2mel_files
from demo.workspace import demo_of
from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.registry import by_id
from generations.spec import Capability
from networks.frontends.s2mel_mel import S2MelMelSettings
from networks.indextts2 import load_indextts2
from networks.indextts25 import load_indextts25
from networks.s2mel import load_s2mel
from tests.checkpoint_factory import tiny_gpt_config
from trainer.checkpoints.__main__ import main as checkpoints_main
from trainer.checkpoints.format import checkpoint_kind
from trainer.checkpoints.inspect import inspect_checkpoint, inspect_lines
from trainer.checkpoints.verify import verify_checkpoint
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight
from trainer.s2mel.sources import audio_loader
from trainer.synthesize import main as synthesize_main
from trainer.train import main as train_main
from trainer.vocab import grow_text_vocab

REPO = Path(__file__).resolve().parents[1]


def trainer_cli(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "trainer.train", *argv], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=600)


def test_indextts15_is_refused_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"gpt": tiny_gpt_config()}), encoding="utf-8")
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(json.dumps({"target_codes_path": "codes/a.npy"}) + "\n", encoding="utf-8")
    argv = ["--train", "s2mel", "--config", str(config), "--train-manifest", str(manifest),
            "--output-dir", str(tmp_path / "run")]
    plan = run_preflight(parse_argv(argv))
    assert plan.refusal is not None and plan.refusal.startswith("IndexTTS-1.5 cannot train the S2Mel decoder")
    done = trainer_cli(argv)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {plan.refusal}"]
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def prepared_v25(demo_workspace, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(download folder, a prepared folder's manifest with S2Mel files, a voice) of the 2.5 demo (4 clips)."""
    paths = DemoV25Paths.under(demo_workspace.root)
    folder = paths.config.parent
    nets = load_indextts25(folder, local_files_only=True, load_gpt_weights=False)
    data = paths.train_manifest.parent
    stems = sorted(p.stem for p in (data / "wavs").glob("*.wav"))[:4]
    out = tmp_path_factory.mktemp("s2mel_data")
    (out / "codes").mkdir()
    for stem in stems:
        shutil.copy(data / "codes" / f"{stem}.npy", out / "codes" / f"{stem}.npy")
    settings = S2MelMelSettings.from_preprocess_params(nets.config["s2mel"]["preprocess_params"])
    add_missing_s2mel_files(out, stems, audio_loader(data / "wavs", settings.sample_rate), nets.campplus, settings)
    manifest = out / "train.jsonl"
    manifest.write_text("".join(json.dumps({"target_codes_path": f"codes/{s}.npy"}) + "\n" for s in stems),
                        encoding="utf-8")
    return folder, manifest, data / "wavs" / f"{stems[0]}.wav"


def run_argv(prepared: tuple[Path, Path, Path], out: Path, *extra: str) -> list[str]:
    folder, manifest, _ = prepared
    return ["--train", "s2mel", "--model-dir", str(folder), "--train-manifest", str(manifest),
            "--output-dir", str(out), "--max-steps", "4", "--save-interval", "2", "--batch-size", "2",
            "--learning-rate", "1e-3", "--log-interval", "1", "--device", "cpu", *extra]


def net_of(path: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(path, weights_only=True)
    return {f"{part}.{key}": value for part, state in ckpt["net"].items() for key, value in state.items()}


def test_v25_full_run_killed_and_resumed_bit_exactly(prepared_v25, tmp_path: Path) -> None:
    straight = trainer_cli(run_argv(prepared_v25, tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr
    hooks = {"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_KILL_AFTER_STEP": "3"}
    killed = trainer_cli(run_argv(prepared_v25, tmp_path / "killed"), env=hooks)
    assert killed.returncode == -9, killed.stderr
    assert (tmp_path / "killed" / "model_step2.pth").is_file()
    resumed = trainer_cli(run_argv(prepared_v25, tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    # latest.pth and model_step2.pth both hold step 2; which one is newest on disk depends on when the kill
    # caught the background writer.
    assert re.search(r"resumed from (latest|model_step2)\.pth at step 2\b", resumed.stdout), resumed.stdout
    expected, actual = net_of(tmp_path / "straight" / "latest.pth"), net_of(tmp_path / "killed" / "latest.pth")
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[key], actual[key]) for key in expected)
    events = [json.loads(line) for line in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "train"] == [1, 2, 3, 4]
    assert events[-1]["event"] == "end" and events[-1]["status"] == "finished"


def with_speakers(prepared: tuple[Path, Path, Path]) -> tuple[Path, Path, Path]:
    """The prepared clips' manifest with a speaker per line: two clips of one speaker, two of another."""
    folder, manifest, voice = prepared
    lines = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    named = manifest.parent / "train_speakers.jsonl"
    named.write_text("".join(json.dumps({**line, "speaker": "amara" if i < 2 else "bekele"}) + "\n"
                             for i, line in enumerate(lines)), encoding="utf-8")
    return folder, named, voice


def test_v25_cross_prompt_run_killed_and_resumed_bit_exactly(prepared_v25, tmp_path: Path) -> None:
    """The manifest's speakers reach the trainer (auto: cross), and a killed cross-prompt run resumes exactly."""
    refused = run_preflight(parse_argv(run_argv(prepared_v25, tmp_path / "no", "--s2mel-prompt", "cross")))
    assert refused.refusal is not None and "no speaker of the training manifest has two clips" in refused.refusal
    prepared = with_speakers(prepared_v25)
    plan = run_preflight(parse_argv(run_argv(prepared, tmp_path / "plan")))
    settings = next(check for check in plan.checks if check.name == "settings")
    assert settings.ok and "prompts: another clip of the same speaker" in settings.message, plan.lines()
    straight = trainer_cli(run_argv(prepared, tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr
    killed = trainer_cli(run_argv(prepared, tmp_path / "killed"),
                         env={"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_KILL_AFTER_STEP": "3"})
    assert killed.returncode == -9, killed.stderr
    resumed = trainer_cli(run_argv(prepared, tmp_path / "killed"))
    assert resumed.returncode == 0 and "at step 2" in resumed.stdout, resumed.stdout + resumed.stderr
    expected, actual = net_of(tmp_path / "straight" / "latest.pth"), net_of(tmp_path / "killed" / "latest.pth")
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[key], actual[key]) for key in expected)
    own = trainer_cli(run_argv(prepared, tmp_path / "own", "--s2mel-prompt", "own"))
    assert own.returncode == 0, own.stderr
    assert not all(torch.equal(expected[key], value) for key, value in net_of(tmp_path / "own" / "latest.pth").items())


def test_v25_lora_run_speaks_samples_and_preflight_plans_it(prepared_v25, tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("ሰላም\n", encoding="utf-8")
    argv = run_argv(prepared_v25, tmp_path / "lora", "--lora", "--lora-rank", "4", "--sample-texts", str(texts),
                    "--eval-reference", str(prepared_v25[2]))
    preflight = trainer_cli([*argv, "--preflight"])
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert "LoRA rank 4" in preflight.stdout and "4 clip(s)" in preflight.stdout
    done = trainer_cli(argv)
    assert done.returncode == 0, done.stderr
    samples = sorted(p.name for p in (tmp_path / "lora" / "samples").glob("*.wav"))
    assert samples == ["s2mel_step2_0.wav", "s2mel_step4_0.wav"]
    from webui.testing.listen_models import trains_s2mel

    assert trains_s2mel(tmp_path / "lora")  # its train_config.yaml: the studio offers it as a decoder, not a GPT
    ckpt = torch.load(tmp_path / "lora" / "latest.pth", weights_only=True)
    assert ckpt["mode"] == "lora" and ckpt["step"] == 4 and ckpt["adapter"]
    assert checkpoint_kind(ckpt) == "s2mel"
    lines = inspect_lines(inspect_checkpoint(tmp_path / "lora" / "latest.pth"))
    assert any("S2Mel decoder (lora fine-tune), step 4" in line for line in lines)
    report = verify_checkpoint(tmp_path / "lora" / "latest.pth")
    assert (report.kind, report.verdict) == ("s2mel", "COMPLETE")


def test_v25_export_and_synthesis_with_the_trained_s2mel(prepared_v25, tmp_path: Path, capsys) -> None:
    folder, _, voice = prepared_v25
    argv = run_argv(prepared_v25, tmp_path / "run", "--lora", "--lora-rank", "4", "--max-steps", "2")
    assert train_main(argv) == 0
    latest = tmp_path / "run" / "latest.pth"
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    export = ["export-s2mel", str(latest), "--model-dir", str(folder)]
    assert checkpoints_main([*export, "--out", str(tmp_path / "out")]) == 0
    load_s2mel(tmp_path / "out" / "s2mel.pth", config["s2mel"], with_gpt_layer=False)  # strict, stock layout
    assert checkpoints_main([*export, "--out", str(tmp_path / "out"), "--adapter-only"]) == 0
    assert torch.load(tmp_path / "out" / "s2mel_adapter.pth", weights_only=True)["adapter"]
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"without": [{"voice": "a", "similarity": 0.8, "cer": 0.1}],
                                  "with": [{"voice": "a", "similarity": 0.7, "cer": 0.1}]}), encoding="utf-8")
    capsys.readouterr()
    assert checkpoints_main([*export, "--out", str(tmp_path / "gated"), "--scores", str(scores)]) == 2
    assert "not exported: S2Mel adapter left out: similarity fell" in capsys.readouterr().err
    assert not (tmp_path / "gated").exists()
    assert checkpoints_main([*export, "--out", str(tmp_path / "gated"), "--scores", str(scores),
                             "--keep", "keep"]) == 0
    assert "kept by the user's override" in capsys.readouterr().out
    wav = tmp_path / "spoken.wav"
    assert synthesize_main(["--model-dir", str(folder), "--s2mel", str(tmp_path / "out" / "s2mel_adapter.pth"),
                            "--reference", str(voice), "--text", "ሰላም", "--out", str(wav), "--steps", "2",
                            "--decode", "greedy", "--max-codes", "20", "--device", "cpu"]) == 0
    assert wav.is_file() and wav.stat().st_size > 44



def test_v25_adapter_strength_at_synthesis_and_export(prepared_v25, tmp_path: Path, capsys) -> None:
    """--s2mel-strength 0 speaks exactly as the folder's own s2mel.pth; the export writes the strength the keep
    gate recorded, and an adapter file carries it."""
    import soundfile

    folder, _, voice = prepared_v25
    assert train_main(run_argv(prepared_v25, tmp_path / "run", "--lora", "--lora-rank", "4", "--max-steps", "2")) == 0
    latest = tmp_path / "run" / "latest.pth"
    speak = ["--model-dir", str(folder), "--reference", str(voice), "--text", "ሰላም", "--steps", "2",
             "--decode", "greedy", "--max-codes", "20", "--device", "cpu"]
    spoken = {}
    for name, extra in (("stock", []), ("zero", ["--s2mel", str(latest), "--s2mel-strength", "0"]),
                        ("full", ["--s2mel", str(latest), "--s2mel-strength", "1"])):
        assert synthesize_main([*speak, *extra, "--out", str(tmp_path / f"{name}.wav")]) == 0
        spoken[name] = soundfile.read(tmp_path / f"{name}.wav")[0]
    assert np.array_equal(spoken["zero"], spoken["stock"])
    assert not np.array_equal(spoken["full"], spoken["stock"])  # the adapter does change the voice
    scores = tmp_path / "run" / "s2mel_scores.json"
    same = [{"voice": "a", "similarity": 0.8, "cer": 0.1}]
    scores.write_text(json.dumps({"step": 2, "without": same, "with": same, "strength": 0.6}), encoding="utf-8")
    capsys.readouterr()
    export = ["export-s2mel", str(latest), "--model-dir", str(folder), "--adapter-only"]
    assert checkpoints_main([*export, "--out", str(tmp_path / "gated")]) == 0
    assert "the gate chose strength 0.6" in capsys.readouterr().out
    assert torch.load(tmp_path / "gated" / "s2mel_adapter.pth", weights_only=True)["strength"] == 0.6
    assert checkpoints_main([*export, "--out", str(tmp_path / "mine"), "--strength", "0.3"]) == 0
    assert torch.load(tmp_path / "mine" / "s2mel_adapter.pth", weights_only=True)["strength"] == 0.3
    assert checkpoints_main([*export, "--out", str(tmp_path / "bad"), "--strength", "2"]) == 2
    assert "--strength must be from 0 to 1, got 2" in capsys.readouterr().err


def prepared_v2_with_grown_gpt(root: Path, dest: Path) -> tuple[DemoV2Paths, Path, Path, Path, Path]:
    """(the demo's paths, download folder, manifest of 2 prepared clips whose text ids come from the extended
    tokenizer, the base GPT grown to that tokenizer, a voice) of the IndexTTS2 demo, written under ``dest``."""
    paths = DemoV2Paths.under(root)
    folder = paths.config.parent
    nets = load_indextts2(folder, local_files_only=True)
    data = paths.train_manifest.parent
    stems = sorted(p.stem for p in (data / "wavs").glob("*.wav"))[:2]
    prepared = dest / "data"
    for sub in ("codes", "text_ids", "condition", "emo_vec"):
        (prepared / sub).mkdir(parents=True)
        for stem in stems:
            shutil.copy(data / sub / f"{stem}.npy", prepared / sub / f"{stem}.npy")
    settings = S2MelMelSettings.from_preprocess_params(nets.config["s2mel"]["preprocess_params"])
    add_missing_s2mel_files(prepared, stems, audio_loader(data / "wavs", settings.sample_rate), nets.campplus,
                            settings)
    manifest = prepared / "train.jsonl"
    manifest.write_text("".join(json.dumps({"target_codes_path": f"codes/{s}.npy"}) + "\n" for s in stems),
                        encoding="utf-8")
    # The demo's text ids use its extended tokenizer: the latent's GPT is the base grown to it (a GPT run's start).
    grown = grow_text_vocab(nets.gpt.state_dict(), nets.config["gpt"], paths.extended_tokenizer,
                            paths.base_tokenizer)
    gpt = dest / "gpt_grown.pth"
    torch.save(grown.state_dict, gpt)
    return paths, folder, manifest, gpt, data / "wavs" / f"{stems[0]}.wav"


def test_v2_lora_run_feeds_the_gpt_latent_and_speaks_samples(demo_workspace, tmp_path: Path) -> None:
    paths, folder, manifest, gpt, voice = prepared_v2_with_grown_gpt(demo_workspace.root, tmp_path)
    texts = tmp_path / "texts.txt"
    texts.write_text("ሰላም\n", encoding="utf-8")
    argv = run_argv((folder, manifest, voice), tmp_path / "run", "--lora",
                    "--lora-rank", "4", "--max-steps", "2", "--base-checkpoint", str(gpt), "--tokenizer",
                    str(paths.extended_tokenizer), "--sample-texts", str(texts), "--eval-reference",
                    str(voice))
    assert train_main(argv) == 0
    ckpt = torch.load(tmp_path / "run" / "latest.pth", weights_only=True)
    assert ckpt["uses_gpt_layer"] and ckpt["mode"] == "lora" and ckpt["step"] == 2
    assert sorted(p.name for p in (tmp_path / "run" / "samples").glob("*.wav")) == ["s2mel_step2_0.wav"]


@pytest.mark.parametrize("version", ["1.5", "2", "2.5"])
def test_s2mel_preflight_rows(version: str, demo_workspace, tmp_path: Path) -> None:
    """The registry answers: IndexTTS2 / 2.5 find their download folder's S2Mel, 1.5 is refused by its entry."""
    generation = by_id(version)
    demo = demo_of(generation, demo_workspace.root)
    assert demo is not None
    opts = parse_argv([*demo.train_argv(), "--train", "s2mel"])
    opts.update(output_dir=str(tmp_path / "run"))
    plan = run_preflight(opts)
    model = next(check for check in plan.checks if check.name == "model")
    if generation.can(Capability.TRAIN_S2MEL):
        assert model.ok and model.message.startswith(f"{generation.name} S2Mel from "), plan.lines()
    else:
        assert [check.name for check in plan.checks if not check.ok] == ["model"]
        assert model.message == generation.refusal(Capability.TRAIN_S2MEL)


def test_a_guard_with_nothing_to_watch_is_refused_in_one_line(prepared_v25, tmp_path: Path) -> None:
    argv = run_argv(prepared_v25, tmp_path / "run")
    assert run_preflight(parse_argv(argv)).refusal is None
    plan = run_preflight(parse_argv([*argv, "--forget-margin", "0.5"]))  # no other language's validation set
    assert plan.refusal is not None and "give their validation manifests as --val-manifest PATH::lang" in plan.refusal
    assert not (tmp_path / "run").exists()


def test_dora_is_planned_with_lora_and_refused_without_it(prepared_v25, tmp_path: Path) -> None:
    plan = run_preflight(parse_argv(run_argv(prepared_v25, tmp_path / "run", "--lora", "--lora-rank", "4",
                                             "--lora-dora")))
    assert plan.refusal is None and any("DoRA rank 4 on attention, feed_forward" in line for line in plan.lines())
    plan = run_preflight(parse_argv(run_argv(prepared_v25, tmp_path / "run", "--lora-dora")))
    assert plan.refusal is not None and plan.refusal.startswith("--lora-dora: ")
    assert not (tmp_path / "run").exists()


def test_torchrun_trains_one_s2mel_on_two_processes_and_resumes_exactly(prepared_v25, tmp_path: Path) -> None:
    """Two CPU processes (Gloo) share each batch; rank 0 alone writes; a run stopped at step 2 and resumed ends
    bit for bit where the straight run does."""
    from tests.test_torchrun import torchrun

    straight = torchrun(run_argv(prepared_v25, tmp_path / "straight"))
    assert straight.returncode == 0, straight.stdout + straight.stderr
    assert "fresh start at step 0, 2 processes" in straight.stdout
    events = [json.loads(line) for line in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "train"] == [1, 2, 3, 4]  # rank 0's lines only
    assert sorted(p.name for p in (tmp_path / "straight").glob("*.pth")) == ["latest.pth", "model_step2.pth",
                                                                            "model_step4.pth"]
    half = torchrun(run_argv(prepared_v25, tmp_path / "halves", "--max-steps", "2"))
    assert half.returncode == 0, half.stdout + half.stderr
    rest = torchrun(run_argv(prepared_v25, tmp_path / "halves"))
    assert rest.returncode == 0 and "resumed from latest.pth at step 2" in rest.stdout, rest.stdout + rest.stderr
    expected, actual = net_of(tmp_path / "straight" / "latest.pth"), net_of(tmp_path / "halves" / "latest.pth")
    assert all(torch.equal(expected[key], actual[key]) for key in expected)
    base = net_of(prepared_v25[0] / "s2mel.pth")
    assert any(not torch.equal(base[key], expected[key]) for key in expected)  # it trained


def test_the_forgetting_guard_watches_other_languages_and_stops_the_run(prepared_v25, tmp_path: Path) -> None:
    """--forget-margin with a validation manifest of another language: measured at every save, its first values kept
    in the checkpoints; a rise past the margin warns, and with --stop-on-forgetting stops (exit 2) naming the
    checkpoint from before it."""
    _, manifest, _ = prepared_v25
    watched = ["--val-manifest", f"{manifest}::en", "--save-interval", "1"]
    calm = trainer_cli(run_argv(prepared_v25, tmp_path / "calm", *watched, "--max-steps", "2", "--forget-margin",
                                "100"))
    assert calm.returncode == 0, calm.stdout + calm.stderr
    assert "watching en (4 clip(s)) at every save, margin 100" in calm.stdout
    events = [json.loads(line) for line in (tmp_path / "calm" / "metrics.jsonl").read_text().splitlines()]
    measured = [e for e in events if e["event"] == "validation"]
    assert [e["step"] for e in measured] == [1, 2] and all("en" in e["languages"] for e in measured)
    saved = torch.load(tmp_path / "calm" / "latest.pth", weights_only=True)["components"]["forgetting guard"]
    assert saved["first"] == {"en": measured[0]["languages"]["en"]} and saved["last_good_step"] == 2

    # A learning rate far too large for the decoder: the other language's loss rises past a tiny margin.
    wild = trainer_cli(run_argv(prepared_v25, tmp_path / "wild", *watched, "--max-steps", "4", "--learning-rate",
                                "0.5", "--forget-margin", "1e-6", "--stop-on-forgetting"))
    assert wild.returncode == 2, wild.stdout + wild.stderr
    line = wild.stderr.strip().splitlines()[-1]
    assert line.startswith("error: forgetting en: validation loss") and "(--stop-on-forgetting)" in line, line
    assert "last checkpoint before the rise: " in line and "model_step" in line, line
    fired = [json.loads(x) for x in (tmp_path / "wild" / "metrics.jsonl").read_text().splitlines()]
    assert [e["language"] for e in fired if e["event"] == "forgetting"] == ["en"]
