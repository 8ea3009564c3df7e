"""``python -m trainer.synthesize``: speaks on the demo workspace; refuses bad input with one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from trainer.synthesis.demo_vocoder import demo_bigvgan_config, write_demo_vocoder
from trainer.synthesize import main, output_paths


@pytest.fixture(scope="module")
def setup(demo_workspace, tmp_path_factory):
    """The demo GPT and tokenizer, a config with the demo bigvgan section, a vocoder and a prompt."""
    root = tmp_path_factory.mktemp("synth")
    config = yaml.safe_load(demo_workspace.config.read_text(encoding="utf-8"))
    config["bigvgan"] = demo_bigvgan_config(config["gpt"]["model_dim"])
    config["bigvgan_checkpoint"] = "bigvgan_generator.pth"
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    write_demo_vocoder(root / "bigvgan_generator.pth", config["bigvgan"])
    t = np.arange(24000 * 2) / 24000
    prompt = 0.3 * np.sin(2 * np.pi * 150 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    sf.write(root / "prompt.wav", prompt.astype(np.float32), 24000)
    return {"root": root, "ws": demo_workspace}


def argv(setup, *extra: str, **overrides: str) -> list[str]:
    root, ws = setup["root"], setup["ws"]
    base = {"--checkpoint": str(ws.base_checkpoint), "--config": str(root / "config.yaml"),
            "--tokenizer": str(ws.base_tokenizer), "--reference": str(root / "prompt.wav"),
            "--out": str(root / "out.wav"), "--max-codes": "6", "--decode": "greedy", "--device": "cpu"}
    base.update(overrides)
    args = [item for pair in base.items() for item in pair if pair[1] is not None]
    return args + list(extra)


def refused(capsys, args: list[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_speaks_a_text_and_reports(setup, capsys):
    root = setup["root"]
    report = root / "report.json"
    assert main(argv(setup, "--text", "Hello world, this is a test.", "--json", str(report))) == 0
    audio, rate = sf.read(root / "out.wav", dtype="int16")
    assert rate == 24000
    assert audio.size == 6 * 1024  # the random demo GPT never stops: --max-codes codes
    data = json.loads(report.read_text(encoding="utf-8"))
    item = data["items"][0]
    assert item["codes"] == 6 and item["hit_stop"] is False
    assert item["audio_seconds"] == pytest.approx(6 * 1024 / 24000, abs=1e-3)
    assert item["real_time_factor"] == pytest.approx(item["seconds"] / item["audio_seconds"], rel=1e-2)
    assert data["settings"]["mode"] == "greedy"
    assert "real-time factor" in capsys.readouterr().out


def test_texts_file_gives_numbered_files(setup, capsys):
    root = setup["root"]
    texts = root / "texts.txt"
    texts.write_text("First sentence.\n\n  Second one.  \n", encoding="utf-8")
    out = root / "many"
    args = argv(setup, "--texts-file", str(texts), "--decode", "sample", "--seed", "3", **{"--out": str(out)})
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["001.wav", "002.wav"]


def test_output_names():
    assert output_paths(Path("a/out.wav"), 1, single=True) == [Path("a/out.wav")]
    assert output_paths(Path("a/take.wav"), 2, single=False) == [Path("a/take_001.wav"), Path("a/take_002.wav")]
    assert output_paths(Path("a/dir"), 1000, single=False)[-1] == Path("a/dir/1000.wav")


def test_refuses_a_vocoder_of_the_wrong_layout(setup, capsys):
    line = refused(capsys, argv(setup, "--text", "hello", "--vocoder", str(setup["ws"].base_checkpoint)))
    assert "does not fit the BigVGAN" in line and "missing" in line
    junk = setup["root"] / "junk.pth"
    torch.save({"weights": [1, 2, 3]}, junk)
    assert "not a BigVGAN generator file" in refused(capsys, argv(setup, "--text", "hello", "--vocoder", str(junk)))


def test_refuses_a_missing_reference(setup, capsys):
    line = refused(capsys, argv(setup, "--text", "hello", **{"--reference": str(setup["root"] / "nope.wav")}))
    assert "nope.wav" in line and "not found" in line


@pytest.mark.parametrize("text", ["", "   "])
def test_refuses_an_empty_text(setup, capsys, text):
    assert "empty" in refused(capsys, argv(setup, "--text", text))


def test_refuses_a_text_beyond_the_model_limit(setup, capsys):
    line = refused(capsys, argv(setup, "--text", "hello world " * 80))
    assert "too long" in line and "max_text_tokens" in line


def test_refuses_a_texts_file_with_a_long_line_naming_it(setup, capsys):
    texts = setup["root"] / "long.txt"
    texts.write_text("fine\n" + "hello world " * 80 + "\n", encoding="utf-8")
    line = refused(capsys, argv(setup, "--texts-file", str(texts)))
    assert f"{texts}:2" in line


def test_refuses_other_bad_input(setup, capsys):
    assert "top_p" in refused(capsys, argv(setup, "--text", "hi", "--top-p", "0"))
    assert "exceeds the model's limit" in refused(capsys, argv(setup, "--text", "hi", **{"--max-codes": "5000"}))
    line = refused(capsys, argv(setup, "--text", "hi", **{"--tokenizer": str(setup["ws"].extended_tokenizer)}))
    assert "tokenizer has" in line
    blank = setup["root"] / "blank.txt"
    blank.write_text("\n \n", encoding="utf-8")
    assert "holds no text" in refused(capsys, argv(setup, "--texts-file", str(blank)))
    with pytest.raises(SystemExit) as exit_info:
        main(argv(setup, "--text", "hi", "--decode", "nonsense"))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_module_entry_point_refuses_in_one_line(setup, repo_root: Path):
    """The real process: exit 2, one line on stderr, no traceback."""
    args = argv(setup, "--text", "", **{"--reference": str(setup["root"] / "missing.wav")})
    proc = subprocess.run([sys.executable, "-m", "trainer.synthesize", *args], cwd=repo_root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: ")


def test_a_prompt_mel_npy_is_a_reference_too(demo_workspace, tmp_path):
    """The data's own cond_mel .npy speaks as the voice (no audio of the demo speakers exists)."""
    import json as _json

    from trainer.synthesize import main as synth_main

    first = _json.loads(demo_workspace.val_manifest.read_text(encoding="utf-8").splitlines()[0])
    mel = demo_workspace.val_manifest.parent / first["cond_mel"]
    out = tmp_path / "mel.wav"
    code = synth_main(["--checkpoint", str(demo_workspace.base_checkpoint), "--config", str(demo_workspace.config),
                       "--tokenizer", str(demo_workspace.base_tokenizer), "--reference", str(mel),
                       "--text", "hello world", "--out", str(out), "--decode", "greedy", "--max-codes", "20"])
    assert code == 0 and out.is_file()
