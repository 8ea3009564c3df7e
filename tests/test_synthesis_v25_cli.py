"""``python -m trainer.synthesize`` with an IndexTTS-2.5 download folder (the tiny one of tests/indextts25_folder.py):
a bare gpt.pth (bytes scheme), a checkpoint of ours recording its scheme, --duration-factor, --steps, and the
one-line refusals. Few codes and one CFM step keep the CPU cost low."""

from __future__ import annotations

import json

import pytest
import soundfile as sf
import torch

from tests.indextts25_folder import download_config, expected, shared_download_folder, tiled_features
from trainer.synthesize import main

FAST = ["--decode", "greedy", "--max-codes", "4", "--steps", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return shared_download_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def prompt(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompt25cli") / "prompt.wav"
    item = expected()["items"][0]
    sf.write(path, item["wav_int16"].reshape(-1).numpy(), int(item["wav_sr"]), subtype="PCM_16")
    return path


def run(args: list[str]) -> int:
    with tiled_features():
        return main(args)


def refused(capsys, args: list[str]) -> str:
    assert run(args) == 2
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def v25_args(folder, prompt, out, *extra: str) -> list[str]:
    return ["--model-dir", str(folder), "--reference", str(prompt), "--out", str(out), "--language", "am",
            *FAST, *extra]


def test_cli_speaks_amharic_with_a_bare_gpt_and_a_duration_factor(folder, prompt, tmp_path, capsys):
    out, report = tmp_path / "out.wav", tmp_path / "report.json"
    args = v25_args(folder, prompt, out, "--text", "ሰላም ለዓለም። ይህ የሙከራ ድምፅ ነው።", "--duration-factor", "1.5",
                    "--json", str(report))
    assert run(args) == 0, capsys.readouterr().err
    audio, rate = sf.read(out, dtype="int16")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert rate == 22050 and data["text_scheme"] == "bytes" and data["s2mel"]["duration_factor"] == 1.5
    segments = data["items"][0]["segments"]
    assert len(segments) == 2  # two sentences, over the tiny model's 32 tokens together
    assert [s["mel_frames"] for s in segments] == [int(2 * s["codes"] * 1.72 * 1.5) for s in segments]
    assert audio.size == sum(s["mel_frames"] * 256 for s in segments) + 4410


def test_cli_uses_the_scheme_a_checkpoint_records(folder, prompt, tmp_path, capsys):
    state = torch.load(folder / "gpt.pth", weights_only=True)
    ckpt = {"model": state.get("model", state), "model_config": download_config()["gpt"],
            "tokenizer": {"text_scheme": {"scheme": "translit"}}}
    torch.save(ckpt, tmp_path / "ours.pth")
    report = tmp_path / "r.json"
    args = v25_args(folder, prompt, tmp_path / "x.wav", "--checkpoint", str(tmp_path / "ours.pth"),
                    "--text", "ሰላም።", "--json", str(report))
    assert run(args) == 0, capsys.readouterr().err
    assert json.loads(report.read_text(encoding="utf-8"))["text_scheme"] == "translit"


@pytest.mark.parametrize(("extra", "message"), [
    (["--duration-factor", "0"], r"duration_factor must be in \(0, 10\]"),
    (["--steps", "0"], "steps must be >= 1"),
    (["--text-scheme", "merges"], "60510 rows, the 'merges' scheme's table"),
    (["--checkpoint", "absent.pth"], "--checkpoint absent.pth: file not found"),
    (["--emotion-vector", "0,0.3,0,0,0,0,0.2,0"], "feat1.pt / feat2.pt"),
])
def test_cli_refuses_bad_v25_input_in_one_line(folder, prompt, tmp_path, capsys, extra, message):
    import re

    args = v25_args(folder, prompt, tmp_path / "x.wav", "--text", "ሰላም።", *extra)
    assert re.search(message, refused(capsys, args))
    assert not (tmp_path / "x.wav").exists()


def test_cli_refuses_v25_flags_elsewhere(prompt, tmp_path, capsys):
    base = ["--reference", str(prompt), "--out", str(tmp_path / "x.wav"), "--text", "hi", "--checkpoint", "a",
            "--config", "b", "--tokenizer", "c"]
    assert "--duration-factor need(s) an IndexTTS-2.5 --model-dir" in refused(capsys, [*base, "--duration-factor", "2"])
    assert "--text-scheme need(s)" in refused(capsys, [*base, "--text-scheme", "bytes"])
    assert "--adapter need(s)" in refused(capsys, [*base, "--adapter", "a.pth"])


def write_adapter(path, rank: int = 2, width: int = 64) -> dict:
    """An adapter.pth as ``export --adapter-only`` writes it, on block 0's attention input projection."""
    from networks.lora import LoRAConfig

    generator = torch.Generator().manual_seed(1)
    config = LoRAConfig(rank=rank, alpha=4.0, targets=("attn.c_attn",), layers=(0,))
    adapter = {"gpt.h.0.attn.c_attn.lora_A": torch.randn(rank, 64, generator=generator),
               "gpt.h.0.attn.c_attn.lora_B": torch.randn(3 * width, rank, generator=generator)}
    torch.save({"lora_config": config.to_dict(), "adapter": adapter, "step": 10}, path)
    return {"config": config, "adapter": adapter}


def test_an_adapter_file_is_merged_into_the_folders_gpt(folder, prompt, tmp_path, capsys):
    from generations.indextts25.synthesis import SynthesizerV25

    written = write_adapter(tmp_path / "adapter.pth")
    with tiled_features():
        synth = SynthesizerV25.load(folder, adapter_file=tmp_path / "adapter.pth", local_files_only=True)
    state = torch.load(folder / "gpt.pth", weights_only=True)
    base = state.get("model", state)["gpt.h.0.attn.c_attn.weight"]
    a, b = written["adapter"]["gpt.h.0.attn.c_attn.lora_A"], written["adapter"]["gpt.h.0.attn.c_attn.lora_B"]
    want = base + (a.t() @ b.t()) * written["config"].scale
    torch.testing.assert_close(synth.model.gpt.h[0].attn.c_attn.weight, want)
    assert torch.equal(synth.model.gpt.h[1].attn.c_attn.weight, state.get("model", state)["gpt.h.1.attn.c_attn.weight"])
    out = tmp_path / "lora.wav"
    args = v25_args(folder, prompt, out, "--adapter", str(tmp_path / "adapter.pth"), "--text", "ሰላም።")
    assert run(args) == 0, capsys.readouterr().err
    assert sf.info(out).samplerate == 22050


def test_bad_adapter_files_are_refused_in_one_line(folder, prompt, tmp_path, capsys):
    write_adapter(tmp_path / "wide.pth", width=96)
    torch.save({"something": torch.zeros(1)}, tmp_path / "other.pth")
    base = v25_args(folder, prompt, tmp_path / "x.wav", "--text", "ሰላም።")
    assert "does not fit this GPT" in refused(capsys, [*base, "--adapter", str(tmp_path / "wide.pth")])
    assert "not a LoRA adapter file" in refused(capsys, [*base, "--adapter", str(tmp_path / "other.pth")])
    assert "contradict" in refused(capsys, [*base, "--adapter", str(tmp_path / "wide.pth"), "--no-adapter"])
    assert not (tmp_path / "x.wav").exists()


def test_a_lora_training_checkpoint_speaks_merged_unless_told_otherwise(folder, tmp_path):
    from generations.indextts25.synthesis import load_gpt25_checkpoint
    from trainer.lora_setup import ADAPTER_COMPONENT

    written = write_adapter(tmp_path / "adapter.pth")
    state = torch.load(folder / "gpt.pth", weights_only=True)
    state = state.get("model", state)
    saved = {"config": written["config"].to_dict(), "adapter": written["adapter"]}
    torch.save({"model": state, "extra": {"state": {ADAPTER_COMPONENT: saved}}}, tmp_path / "lora_run.pth")
    merged = load_gpt25_checkpoint(tmp_path / "lora_run.pth", download_config()).model
    plain = load_gpt25_checkpoint(tmp_path / "lora_run.pth", download_config(), adapter=False).model
    assert torch.equal(plain.gpt.h[0].attn.c_attn.weight, state["gpt.h.0.attn.c_attn.weight"])
    assert not torch.equal(merged.gpt.h[0].attn.c_attn.weight, state["gpt.h.0.attn.c_attn.weight"])
