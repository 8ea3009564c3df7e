"""Pre-flight: passes on the demo workspace, and fails with a precise message for each broken input."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.config import load_config
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.checkpoint_factory import make_checkpoint, trained_state
from tests.conftest import shared_file
from tests.test_train_cli import refusal
from tests.trainer_helpers import run_main, subset_manifest, tiny_args
from trainer.checkpoints import CheckpointManager, OutputDirLock, tokenizer_record
from trainer.options import options_to_argv
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(tmp_path, demo_workspace):
    """Trainer option values for the demo run, writing into a fresh output dir of this test."""
    values = parse_argv(demo_workspace.train_argv(max_steps=20))
    values["output_dir"] = str(tmp_path / "run")
    return values


def _check(report, name):
    return next(c for c in report.checks if c.name == name)


def _failed(report) -> dict[str, str]:
    return {c.name: c.message for c in report.checks if not c.ok}


def test_preflight_passes_on_the_demo_workspace(demo):
    report = run_preflight(demo)
    assert report.ok, report.lines()
    names = [c.name for c in report.checks]
    assert names == ["manifests", "tokenizer", "config", "device", "data", "output directory", "resume", "weights",
                     "token coverage", "samples", "evaluation", "disk space"]
    assert "IndexTTS-1.5 GPT" in _check(report, "config").message
    assert "296 items usable" in _check(report, "data").message
    assert "grown 1000 -> 1916" in _check(report, "weights").message
    assert report.to_dict()["resume_step"] is None and "fresh start" in _check(report, "resume").message
    assert report.to_dict()["version"] == "1.5"
    assert not Path(demo["output_dir"]).exists()  # pre-flight writes nothing


def test_preflight_counts_the_appended_pieces_the_training_data_never_reaches(demo, demo_workspace):
    """Issue 38: the demo grows 1000 -> 1916 rows; its 296 training texts reach only some of the 916 appended rows, and
    the line says how many, as the tokenizer counts them over the same texts. A run on the base tokenizer (nothing
    appended) gets no line."""
    from data_tools.tokenizer.train import iter_corpus_lines

    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    reached = {i for raw, language, _ in iter_corpus_lines(Path(demo["train_manifest"][0].split("::")[0]))
               for i in tokenizer.encode(raw, language or "am") if i >= 1000}
    line = _check(run_preflight(demo), "token coverage")
    assert line.ok and line.warning == (len(reached) < 916)
    assert line.message.startswith(f"{len(reached):,} of 916 appended pieces occur in the 296 training items")
    assert f"{916 - len(reached):,} never do" in line.message


def test_preflight_cli_exit_codes_and_json(tmp_path, demo_workspace, capsys):
    out = tmp_path / "run"
    argv = [*demo_workspace.train_argv(max_steps=20), "--output-dir", str(out)]
    report_path = tmp_path / "preflight.json"
    ok = subprocess.run([sys.executable, "-m", "trainer.train", *argv, "--preflight", "--preflight-json",
                         str(report_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[ok] tokenizer:" in ok.stdout
    payload = json.loads(report_path.read_text())
    assert payload["ok"] is True and {c["name"] for c in payload["checks"]} >= {"manifests", "resume"}
    from trainer.train import main as train_main

    capsys.readouterr()
    code = train_main([*argv, "--tokenizer", str(tmp_path / "none.model"), "--preflight"])
    bad = capsys.readouterr()
    assert code == 2
    assert "[FAIL] tokenizer: --tokenizer: tokenizer not found" in bad.out
    assert len(bad.err.strip().splitlines()) == 1
    assert bad.err.startswith("error: --tokenizer: tokenizer not found")
    assert not out.exists()


Case = namedtuple("Case", "name check expected")


def _break(case: str, values: dict, tmp_path: Path, demo_workspace) -> None:
    data = tmp_path / "data"
    if case in ("manifest-missing", "manifest-malformed", "codes-missing"):
        shutil.copytree(demo_workspace.train_manifest.parent, data)
        manifest = data / "train.jsonl"
        values["train_manifest"] = [str(manifest)]
        if case == "manifest-missing":
            manifest.unlink()
        elif case == "manifest-malformed":
            lines = manifest.read_text(encoding="utf-8").splitlines()
            lines[2] = '{"id": "broken", "text": '
            manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            first = json.loads(manifest.read_text(encoding="utf-8").splitlines()[0])
            (data / first["codes"]).unlink()
    elif case == "tokenizer-garbage":
        bad = tmp_path / "bad.model"
        bad.write_bytes(b"not a sentencepiece model")
        values["tokenizer"] = str(bad)
    elif case == "config-no-gpt":
        bad = tmp_path / "config.yaml"
        bad.write_text("dataset: {}\n")
        values["config"] = str(bad)
    elif case in ("base-mismatch", "base-random"):
        if case == "base-random":
            bad = tmp_path / "gpt.pth"
            bad.write_bytes(b"\x00\x01garbage" * 50)
            values["base_checkpoint"] = str(bad)
        else:
            config = yaml.safe_load(demo_workspace.config.read_text())
            config["gpt"]["number_text_tokens"] = 1200
            other = tmp_path / "config.yaml"
            other.write_text(yaml.safe_dump(config))
            values["config"] = str(other)
    elif case == "output-is-file":
        target = tmp_path / "file"
        target.write_text("x")
        values["output_dir"] = str(target)
    elif case == "resume-torn":
        out = Path(values["output_dir"])
        out.mkdir()
        for name in ("latest.pth", "model_step20.pth"):
            (out / name).write_bytes(b"")
        values["resume"] = "auto"
    elif case == "existing-run-no-resume":
        out = Path(values["output_dir"])
        out.mkdir()
        (out / "model_step20.pth").write_bytes(b"x")
    elif case == "device-fp16-on-cpu":
        values["amp"] = "fp16"


CASES = [
    Case("manifest-missing", "manifests", "train.jsonl: manifest not found"),
    Case("manifest-malformed", "data", "train.jsonl:3: malformed JSON"),
    Case("codes-missing", "data", "codes file not found"),
    Case("tokenizer-garbage", "tokenizer", "not a SentencePiece model"),
    Case("config-no-gpt", "config", "no 'gpt:' section"),
    Case("config-v25", "config", "declares IndexTTS-2.5 but its gpt section has no emo_condition_module"),
    Case("config-condition-type", "config", "gpt.condition_type 'perceiver'"),
    Case("config-v25-reference", "config", "describes an IndexTTS-2.5 GPT"),
    Case("config-v2-campplus", "config", "describes an IndexTTS-2.5 GPT"),
    Case("base-v25-weights", "weights", "holds an IndexTTS-2.5 GPT (spk_emb_proj.weight, spk_emb_proj.bias, "
                                        "lang_embedding.weight: CAM++ speaker embedding and language table) but the "
                                        "config describes an IndexTTS-1.5/IndexTTS2 GPT"),
    # IndexTTS-2.5 (issue 23): every 2.5 refusal, on the 2.5 demo workspace.
    Case("v25-base-v2-weights", "weights", "lacks spk_emb_proj.weight: not an IndexTTS-2.5 GPT checkpoint"),
    Case("v25-base-without-lang-embedding", "weights", "lacks lang_embedding.weight: not an IndexTTS-2.5 GPT"),
    Case("v25-scheme-does-not-fit-rows", "weights", "has 62,510 text rows but the 'bytes' text scheme's table "
                                                    "needs 60,510"),
    Case("v25-config-v2-data", "data", "describes an IndexTTS-2.5 GPT, which trains on IndexTTS-2.5 paired "
                                       "manifests"),
    Case("v25-sentencepiece-tokenizer", "config", "whose text table is its .tiktoken file"),
    Case("config-v2-with-v25-table", "config", "is an IndexTTS-2.5 table but --config"),
    Case("v25-ids-of-another-scheme", "data", "were made with the 'bytes' text scheme, this run uses 'merges'"),
    Case("v25-no-language", "data", "missing field 'language': IndexTTS-2.5 needs each item's language"),
    Case("v25-merges-missing", "tokenizer", "the merges scheme needs a merges file"),
    Case("base-mismatch", "weights", "gpt.number_text_tokens 1200 means 1201 text rows, the checkpoint has 1001"),
    Case("base-random", "weights", "not a loadable checkpoint: not a PyTorch checkpoint"),
    Case("output-is-file", "output directory", "exists and is not a directory"),
    Case("resume-torn", "resume", "latest.pth: empty file (0 bytes)"),
    Case("existing-run-no-resume", "resume", "already holds checkpoints of a run"),
    Case("device-fp16-on-cpu", "device", "--amp fp16 needs a CUDA device"),
    Case("v2-config-v15-data", "data", "describes an IndexTTS2 GPT, which trains on paired manifests"),
    Case("v15-config-v2-data", "data", "describes an IndexTTS-1.5 GPT, which trains on codes manifests"),
    Case("v2-val-v15", "data", "--train-manifest is an IndexTTS2 paired manifest but --val-manifest is a v1.5"),
    Case("v2-base-for-v15-config", "weights", "does not fit the model of --config"),
    # Every other refusal of the plan (issue 13: each one the trainer knows, checked both ways).
    Case("no-train-manifest", "manifests", "no --train-manifest given"),
    Case("no-tokenizer", "tokenizer", "no --tokenizer given"),
    Case("no-config", "config", "no --config given"),
    Case("no-output-dir", "output directory", "no --output-dir given"),
    Case("manifest-is-a-directory", "manifests", "train.jsonl: manifest is not a regular file"),
    Case("manifest-is-a-fifo", "manifests", "val.fifo: manifest is not a regular file"),
    Case("config-not-a-model", "config", "the gpt section does not build a model (conformer output_size 32 is "
                                         "not divisible by heads 3)"),
    Case("device-cuda-without-cuda", "device", "--device cuda: CUDA is not available on this machine"),
    Case("no-items-within-limits", "data", "no training items left after dropping the ones beyond the model's "
                                           "limits: train: 0 items kept, 296 dropped"),
    Case("output-under-a-file", "output directory", "file.txt is not a directory"),
    Case("output-not-writable", "output directory", "is not writable"),
    Case("output-locked-by-another-process", "output directory", "(another trainer is running there)"),
    Case("samples-texts-empty", "samples", "no text in the file"),
    Case("eval-without-asr", "evaluation", "--eval-at-saves needs a speech recogniser: give --eval-asr"),
    Case("resume-bigger-tokenizer", "resume", "tokenizer differs"),
    Case("resume-position-beyond-epoch", "resume", "is beyond the"),
    Case("resume-samples-beyond-own-epoch", "resume", "the checkpoint's position cannot belong to its own data"),
    Case("resume-optimizer-of-other-parameters", "resume", "optimizer state belongs to different parameters"),
]


def _hold_lock(out_dir: Path, stack: contextlib.ExitStack) -> int:
    """Another process holding ``out_dir``'s lock until the test ends; returns its PID."""
    code = ("import sys; from trainer.checkpoints import OutputDirLock; OutputDirLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out_dir)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def end() -> None:
        assert proc.stdin is not None
        proc.stdin.close()  # the holder reads stdin to its end, then exits (releasing the lock)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    stack.callback(end)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready and proc.stdout.readline().strip() == "held", "the lock holder did not start"
    return proc.pid


def _break_plan(case: str, values: dict, tmp_path: Path, workspace, stack: contextlib.ExitStack) -> None:
    if case.startswith("no-"):
        name = {"no-train-manifest": "train_manifest", "no-tokenizer": "tokenizer", "no-config": "config",
                "no-output-dir": "output_dir"}.get(case)
        if name is not None:
            values[name] = [] if name == "train_manifest" else ""
            return
    if case == "manifest-is-a-directory":
        (tmp_path / "train.jsonl").mkdir()
        values["train_manifest"] = [str(tmp_path / "train.jsonl")]
    elif case == "manifest-is-a-fifo":  # opening it would block: it must be refused by kind, never read
        os.mkfifo(tmp_path / "val.fifo")
        values["val_manifest"] = [str(tmp_path / "val.fifo")]
    elif case == "config-not-a-model":
        config = yaml.safe_load(workspace.config.read_text())
        config["gpt"]["condition_module"]["attention_heads"] = 3
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        values["config"] = str(tmp_path / "config.yaml")
    elif case == "device-cuda-without-cuda":
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        values["device"] = "cuda"
    elif case == "no-items-within-limits":  # every transcript beyond max_text_tokens
        rows = [json.loads(line) for line in workspace.train_manifest.read_text(encoding="utf-8").splitlines()]
        for row in rows:
            row["text"] = " ".join([row["text"]] * 40)
            for key in ("codes", "cond_mel"):
                row[key] = str(workspace.train_manifest.parent / row[key])
        (tmp_path / "long.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                             encoding="utf-8")
        values["train_manifest"] = [str(tmp_path / "long.jsonl")]
    elif case == "output-under-a-file":  # refused for root too
        (tmp_path / "file.txt").write_text("x")
        values["output_dir"] = str(tmp_path / "file.txt" / "run")
    elif case == "output-not-writable":
        locked = tmp_path / "readonly"
        locked.mkdir()
        locked.chmod(0o555)
        stack.callback(locked.chmod, 0o755)
        if os.access(locked, os.W_OK):
            pytest.skip("this user writes into a read-only folder (root): see output-under-a-file")
        values["output_dir"] = str(locked / "run")
    elif case == "output-locked-by-another-process":
        pid = _hold_lock(Path(values["output_dir"]), stack)
        assert pid != os.getpid()
    elif case == "samples-texts-empty":
        (tmp_path / "texts.txt").write_text("\n  \n", encoding="utf-8")
        values.update(vocoder=str(workspace.vocoder), sample_texts=str(tmp_path / "texts.txt"))
    elif case == "eval-without-asr":
        values.update(vocoder=str(workspace.vocoder), eval_at_saves=True)
    elif case in RESUME_TARGETS:
        _resume_target(case, values, workspace)
    else:
        _break_more(case, values, tmp_path, workspace)


RESUME_TARGETS = ("resume-bigger-tokenizer", "resume-position-beyond-epoch", "resume-samples-beyond-own-epoch",
                  "resume-optimizer-of-other-parameters")


def _resume_target(case: str, values: dict, workspace) -> None:
    values["resume"] = "auto"
    if case == "resume-bigger-tokenizer":  # trained with the base tokenizer; now the extended one (more pieces)
        gpt = dict(load_config(workspace.config)["gpt"])
        ckpt = make_checkpoint(12, gpt=gpt, state=trained_state(gpt, trainer_layout=True), base_vocab_size=1000,
                               tokenizer=tokenizer_record(workspace.base_tokenizer), epoch=1, position=4)
    elif case == "resume-position-beyond-epoch":  # the same data and batching, a position past its epoch
        sampler = run_preflight(values).sampler
        assert sampler is not None
        beyond = len(sampler) + 1
        ckpt = _resumable_checkpoint(values, workspace, position=beyond,
                                     sampler_state={**sampler.state_dict(1, len(sampler)), "position": beyond})
    elif case == "resume-samples-beyond-own-epoch":  # other data: more samples into the epoch than it had items
        ckpt = _resumable_checkpoint(values, workspace)
        ckpt["sampler"]["samples_in_epoch"] = 10**6
    else:  # the optimizer of another parameter layout (one group of every parameter)
        tokenizer = TextTokenizer(workspace.extended_tokenizer)
        gpt = dict(load_config(workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
        ckpt = _resumable_checkpoint(values, workspace, state=trained_state(gpt, steps=1))
    CheckpointManager(values["output_dir"], keep=2).save(ckpt, 12)


def _break_v25(case: str, values: dict, tmp_path: Path, demo_workspace) -> None:
    """2.5 cases start from the 2.5 demo's run and break one thing."""
    ws = DemoV25Paths.under(demo_workspace.root)
    v2 = DemoV2Paths.under(demo_workspace.root)
    values.update(parse_argv([*ws.train_argv(max_steps=20), "--output-dir", values["output_dir"]]))
    if case == "config-v2-with-v25-table":
        values.update(config=str(v2.config), base_checkpoint=str(v2.base_checkpoint),
                      train_manifest=[str(v2.train_manifest)], val_manifest=[str(v2.val_manifest)])
    elif case == "v25-base-v2-weights":
        values["base_checkpoint"] = str(v2.base_checkpoint)
    elif case in ("v25-base-without-lang-embedding", "v25-scheme-does-not-fit-rows"):
        state = torch.load(ws.base_checkpoint, weights_only=True)["model"]
        if case == "v25-base-without-lang-embedding":
            del state["lang_embedding.weight"]
        else:  # a table grown for 2000 merges, trained on with --text-scheme bytes
            for key in ("text_embedding.weight", "text_head.weight", "text_head.bias"):
                state[key] = torch.cat((state[key], torch.zeros(2000, *state[key].shape[1:])))
            config = yaml.safe_load(ws.config.read_text())
            config["gpt"]["number_text_tokens"] += 2000
            (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
            values.update(config=str(tmp_path / "config.yaml"), text_scheme="bytes")
        torch.save({"model": state}, tmp_path / "gpt.pth")
        values["base_checkpoint"] = str(tmp_path / "gpt.pth")
    elif case == "v25-config-v2-data":
        values.update(train_manifest=[str(v2.train_manifest)], val_manifest=[str(v2.val_manifest)])
    elif case == "v25-sentencepiece-tokenizer":
        values["tokenizer"] = str(demo_workspace.extended_tokenizer)
    elif case in ("v25-ids-of-another-scheme", "v25-no-language"):
        rows = [json.loads(line) for line in ws.train_manifest.read_text(encoding="utf-8").splitlines()]
        folder = ws.train_manifest.parent
        for row in rows:
            for key in ("prompt_spk_vec_path", "prompt_emo_vec_path", "target_codes_path"):
                row[key] = str(folder / row[key])
        if case == "v25-no-language":
            del rows[3]["language"]
        else:
            np.save(tmp_path / "ids.npy", np.arange(5, 15, dtype=np.int32))
            rows[3].update(target_text_ids_path=str(tmp_path / "ids.npy"), text_scheme="bytes")
        (tmp_path / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                              encoding="utf-8")
        values["train_manifest"] = [str(tmp_path / "train.jsonl")]
    elif case == "v25-merges-missing":
        values["text_merges"] = str(tmp_path / "none.json")


def _break_more(case: str, values: dict, tmp_path: Path, demo_workspace) -> None:
    v2 = DemoV2Paths.under(demo_workspace.root)
    if case.startswith("v25-") or case == "config-v2-with-v25-table":
        _break_v25(case, values, tmp_path, demo_workspace)
    elif case == "config-v25-reference":  # the real IndexTTS-2.5 reference config, as upstream wrote it
        values["config"] = str(shared_file("reference", "indextts25", "tiny_config_v25.yaml"))
    elif case == "config-v2-campplus":
        config = yaml.safe_load(v2.config.read_text())
        config["gpt"]["spk_cond_mode"] = "campplus"
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        values.update(config=str(tmp_path / "config.yaml"), base_checkpoint=str(v2.base_checkpoint),
                      train_manifest=[str(v2.train_manifest)], val_manifest=[str(v2.val_manifest)])
    elif case == "base-v25-weights":  # 2.5 ships the v2.0 config.yaml: only its weights tell it apart
        values.update(config=str(v2.config), base_checkpoint=str(shared_file("reference", "indextts25",
                                                                             "tiny_gpt_v25.pth")),
                      train_manifest=[str(v2.train_manifest)], val_manifest=[str(v2.val_manifest)])
    elif case in ("config-v25", "config-condition-type"):
        config = yaml.safe_load(demo_workspace.config.read_text())
        if case == "config-v25":
            config["version"] = 2.5
        else:
            config["gpt"]["condition_type"] = "perceiver"
        other = tmp_path / "config.yaml"
        other.write_text(yaml.safe_dump(config))
        values["config"] = str(other)
    elif case.startswith(("v2-", "v15-")):
        if case in ("v2-config-v15-data", "v2-val-v15"):
            values.update(config=str(v2.config), base_checkpoint=str(v2.base_checkpoint))
        if case in ("v15-config-v2-data", "v2-val-v15"):
            values["train_manifest"] = [str(v2.train_manifest)]
        if case == "v15-config-v2-data":
            values["val_manifest"] = [str(v2.val_manifest)]
        if case == "v2-base-for-v15-config":
            values["base_checkpoint"] = str(v2.base_checkpoint)
    else:
        _break(case, values, tmp_path, demo_workspace)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preflight_and_trainer_refuse_alike(tmp_path, demo, demo_workspace, case, capsys):
    """Pre-flight red with a sentence <=> the trainer exits 2 with exactly that sentence (one run plan)."""
    if case.name == "device-fp16-on-cpu" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: fp16 is allowed")
    with contextlib.ExitStack() as stack:
        _break_plan(case.name, demo, tmp_path, demo_workspace, stack)
        report = run_preflight(demo)
        failed = _failed(report)
        assert not report.ok and list(failed) == [case.check], report.lines()
        assert case.expected in failed[case.check]
        capsys.readouterr()
        assert run_main(options_to_argv(demo)) == 2
        assert refusal(capsys) == f"error: {failed[case.check]}"


@pytest.mark.parametrize("version", ["1.5", "2", "2.5"])
def test_what_preflight_passes_the_trainer_starts(demo, demo_workspace, version, capsys):
    demo["max_steps"] = 1
    if version == "2.5":
        demo.update(parse_argv([*DemoV25Paths.under(demo_workspace.root).train_argv(max_steps=1), "--output-dir",
                                demo["output_dir"]]))
        demo["sample_model_dir"] = ""  # samples at saves: tests/test_training_samples_v25.py
    elif version == "2":
        v2 = DemoV2Paths.under(demo_workspace.root)
        demo.update(config=str(v2.config), base_checkpoint=str(v2.base_checkpoint),
                    train_manifest=[str(v2.train_manifest)], val_manifest=[str(v2.val_manifest)])
    report = run_preflight(demo)
    assert report.ok, report.lines()
    assert report.to_dict()["version"] == version
    assert run_main(options_to_argv(demo)) == 0, capsys.readouterr().err
    first = json.loads((Path(demo["output_dir"]) / "metrics.jsonl").read_text().splitlines()[0])
    assert first["event"] == "start" and first["version"] == version


def _resumable_checkpoint(values: dict, workspace, **overrides) -> dict:
    tokenizer = TextTokenizer(workspace.extended_tokenizer)
    gpt = dict(load_config(workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    fields = {"state": trained_state(gpt, trainer_layout=True), "base_vocab_size": 1000, "epoch": 1, "position": 4,
              "tokenizer": tokenizer_record(workspace.extended_tokenizer), **overrides}
    return make_checkpoint(12, gpt=gpt, **fields)


def test_preflight_reports_the_resume_point_and_changed_hyperparameters(demo, demo_workspace):
    CheckpointManager(demo["output_dir"], keep=2).save(_resumable_checkpoint(demo, demo_workspace), 12)
    demo["resume"] = "auto"
    report = run_preflight(demo)
    assert report.ok, report.lines()
    summary = report.to_dict()
    assert summary["resume_step"] == 12
    assert summary["resume_path"] == str(Path(demo["output_dir"]) / "latest.pth")
    message = _check(report, "resume").message
    assert message.startswith("will resume from step 12, epoch 1, position 4") or "data or batching changed" in message
    assert "learning_rate 0.001 -> 0.003" in message  # the checkpoint's hparams differ from the demo's flags


def test_preflight_refuses_resume_with_another_tokenizer(demo, demo_workspace):
    CheckpointManager(demo["output_dir"], keep=2).save(_resumable_checkpoint(demo, demo_workspace), 12)
    demo["resume"] = "auto"
    demo["tokenizer"] = str(demo_workspace.base_tokenizer)
    report = run_preflight(demo)
    failed = _failed(report)
    assert list(failed) == ["resume"] and "tokenizer differs" in failed["resume"]
    assert "--init-from" in failed["resume"]


def test_preflight_names_the_pid_holding_the_output_dir(demo):
    with OutputDirLock(demo["output_dir"]):
        report = run_preflight(demo)
    assert _failed(report) == {"output directory": f"output dir {demo['output_dir']} is in use by PID {os.getpid()} "
                                                   "(another trainer is running there)"}


def test_preflight_warns_when_three_checkpoints_do_not_fit(demo, monkeypatch):
    from trainer import plan_files

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(plan_files.shutil, "disk_usage", lambda _path: usage(10 << 20, 9 << 20, 1 << 20))
    report = run_preflight(demo)
    assert report.ok, report.lines()  # a warning: the trainer would start too
    disk = _check(report, "disk space")
    assert disk.warning and disk.message.startswith("warning: little disk left, saves may fail: 1.0 MiB free")
    assert "3 checkpoints need ~" in disk.message and "1,8" in disk.message  # 1.8M parameters


def test_a_trainer_given_nothing_refuses_like_the_preflight(capsys):
    """A missing required option is the plan's refusal (not the parser's), so both say the same line."""
    assert run_main([]) == 2
    line = refusal(capsys)
    assert line == "error: no --train-manifest given"
    assert run_main(["--preflight"]) == 2
    assert capsys.readouterr().err.strip() == line


@pytest.mark.slow
def test_fewer_items_than_processes_is_refused_alike_by_preflight_and_torchrun(demo_workspace, tmp_path, capsys):
    """No batch for every process: ``--preflight-processes 2`` says what a 2-process torchrun job refuses with."""
    from tests.test_torchrun import torchrun

    data = {"train": subset_manifest(demo_workspace.train_manifest, tmp_path / "train1.jsonl", 1),
            "val": subset_manifest(demo_workspace.val_manifest, tmp_path / "val.jsonl", 2)}
    argv = tiny_args(demo_workspace, data, tmp_path / "run")
    assert run_main([*argv, "--preflight"]) == 0  # one process: one batch of the one item
    capsys.readouterr()
    assert run_main([*argv, "--preflight", "--preflight-processes", "2"]) == 2
    line = refusal(capsys)
    assert line == "error: 1 training items give no batch of 2 for each of 2 processes"
    done = torchrun(argv)
    assert done.returncode != 0 and "exitcode  : 2" in done.stderr, done.stderr[-3000:]  # torchrun itself says 1
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")] == [
        line.replace("error: ", "error: rank 0: ", 1)]


def test_preflight_checks_the_memory_estimate_against_a_given_card(demo):
    """A card size (--gpu-memory-gb, or CUDA's own) makes the pre-flight estimate the run: one line that fits or
    refuses with the card's size; a CPU run without one is not estimated (no card to fit)."""
    assert "memory" not in [c.name for c in run_preflight(demo).checks]
    roomy = run_preflight({**demo, "gpu_memory_gb": 80.0})
    assert roomy.ok, roomy.lines()
    assert "this GPU has 80.0 GB" in _check(roomy, "memory").message
    small = run_preflight({**demo, "gpu_memory_gb": 0.5})
    assert not small.ok
    refusal = _failed(small)["memory"]
    assert "needs about" in refusal and "this GPU has 0.5 GB" in refusal
