"""An export is a voice (issue 36): the export of an IndexTTS2 or IndexTTS-2.5 checkpoint is a complete inference
folder, so it speaks through ``python -m trainer.synthesize --model-dir EXPORT`` after it has been moved away and
its base model folder is gone; the base files are copies unless ``--base-files link`` asks for links.

The tiny download folders (tests/indextts2_folder.py, tests/indextts25_folder.py) are the base models; the
checkpoints are built in memory (no training). Few codes and one CFM step keep the CPU cost low."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from data_tools.fileio import sha256_file
from trainer.checkpoints import export_checkpoint
from trainer.checkpoints.__main__ import main as checkpoints_main
from trainer.checkpoints.format import FORMAT_NAME
from trainer.synthesize import main as synthesize_main

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
FAST = ["--decode", "greedy", "--max-codes", "4", "--steps", "1", "--device", "cpu"]


def _links(folder: Path) -> list[Path]:
    return [Path(root) / name for root, dirs, files in os.walk(folder) for name in (*dirs, *files)
            if (Path(root) / name).is_symlink()]


def _moved(export: Path, base: Path, where: Path) -> Path:
    """The export moved to another folder, its base model folder removed: nothing points back."""
    target = where / "moved" / "voice"
    target.parent.mkdir(parents=True)
    shutil.move(str(export), target)
    shutil.rmtree(base)
    return target


def _prompt(path: Path) -> Path:
    t = np.arange(int(22050 * 1.2)) / 22050
    sf.write(path, (0.3 * np.sin(2 * np.pi * 170 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32),
             22050)
    return path


def _spoken(out: Path) -> int:
    audio, rate = sf.read(out, dtype="int16")
    assert rate == 22050
    return int(audio.size)


# -- IndexTTS2 ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def english_tokenizer(tmp_path_factory) -> Path:
    """A tokenizer small enough for the tiny GPT's 100 text tokens."""
    from data_tools.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("entok36")
    return train_tokenizer([CORPUS / "english_train.txt"], root / "en", vocab_size=90, language="en")


def _v2_run(tmp_path: Path, tokenizer: Path) -> tuple[Path, Path]:
    """(a tiny IndexTTS2 download folder of plain files, a checkpoint of ours trained from it)."""
    from tests.checkpoint_factory import make_checkpoint, save, trained_state
    from tests.indextts2_folder import build_download_folder, download_config

    base = build_download_folder(tmp_path / "base" / "IndexTTS-2", copy=True)
    gpt = download_config()["gpt"]
    ckpt = make_checkpoint(gpt=gpt, state=trained_state(gpt),
                           tokenizer={"path": str(tokenizer), "sha256": sha256_file(tokenizer), "vocab_size": 90})
    (tmp_path / "run").mkdir()
    return base, save(ckpt, tmp_path / "run" / "latest.pth")


def test_a_moved_v2_export_speaks_without_its_base_folder(english_tokenizer, tmp_path, capsys):
    base, checkpoint = _v2_run(tmp_path, english_tokenizer)
    export = tmp_path / "exports" / "run_latest"
    export_checkpoint(checkpoint, export, config=base / "config.yaml")
    assert not _links(export)  # the default copies the base model's files
    for name in ("s2mel.pth", "feat1.pt", "feat2.pt", "wav2vec2bert_stats.pt", "campplus_cn_common.bin",
                 "semantic_codec/model.safetensors", "bigvgan/bigvgan_generator.pt", "w2v-bert-2.0"):
        assert (export / name).exists(), name
    moved = _moved(export, base, tmp_path)
    out = tmp_path / "spoken.wav"
    args = ["--model-dir", str(moved), "--reference", str(_prompt(tmp_path / "prompt.wav")), "--text", "Hello there.",
            "--out", str(out), *FAST]
    assert synthesize_main(args) == 0, capsys.readouterr().err
    assert _spoken(out) > 0


def test_base_files_link_makes_links_and_copy_none(english_tokenizer, tmp_path, capsys):
    from webui.testing.model_spec import resolve_model

    base, checkpoint = _v2_run(tmp_path, english_tokenizer)
    linked, copied = tmp_path / "linked", tmp_path / "copied"
    assert checkpoints_main(["export", str(checkpoint), "--out", str(linked), "--config", str(base / "config.yaml"),
                             "--base-files", "link"]) == 0, capsys.readouterr().err
    assert checkpoints_main(["export", str(checkpoint), "--out", str(copied), "--config",
                             str(base / "config.yaml")]) == 0, capsys.readouterr().err
    links = _links(linked)
    assert {path.relative_to(linked).as_posix() for path in links} >= {"s2mel.pth", "bigvgan", "w2v-bert-2.0"}
    assert all(path.resolve().is_relative_to(base.resolve()) for path in links)
    assert not (linked / "gpt.pth").is_symlink() and not (linked / "config.yaml").is_symlink()
    assert not _links(copied)
    for export in (linked, copied):  # both are complete folders the Test tab speaks
        spec = resolve_model(str(export / "gpt.pth"), tmp_path)
        assert spec.problem is None, spec.problem


def test_an_earlier_export_is_kept_unless_forced(english_tokenizer, tmp_path):
    from trainer.checkpoints.format import CheckpointError

    base, checkpoint = _v2_run(tmp_path, english_tokenizer)
    export = tmp_path / "export"
    export.mkdir()
    (export / "s2mel.pth").write_bytes(b"mine")
    with pytest.raises(CheckpointError, match=r"already holds s2mel\.pth"):
        export_checkpoint(checkpoint, export, config=base / "config.yaml")
    export_checkpoint(checkpoint, export, config=base / "config.yaml", force=True, base_files="link")
    assert (export / "s2mel.pth").is_symlink()


# -- IndexTTS-2.5 ---------------------------------------------------------------------------------------------
def v25_run(tmp_path: Path) -> tuple[Path, Path]:
    """(a tiny IndexTTS-2.5 download folder, a checkpoint of ours whose weights moved from it), no training."""
    from generations.indextts25 import TABLE_NAME
    from tests.indextts25_folder import build_download_folder, download_config

    base = build_download_folder(tmp_path / "base" / "IndexTTS-2.5")
    state = torch.load(base / "gpt.pth", weights_only=True)
    state = {k: v + 0.01 if v.is_floating_point() else v for k, v in state.get("model", state).items()}
    table = base / TABLE_NAME
    ckpt = {"format": FORMAT_NAME, "model": state, "step": 2,
            "model_config": {**download_config()["gpt"], "spk_cond_mode": "campplus"},
            "tokenizer": {"path": str(table), "sha256": sha256_file(table), "text_scheme": {"scheme": "bytes"}}}
    checkpoint = tmp_path / "run" / "latest.pth"
    checkpoint.parent.mkdir()
    torch.save(ckpt, checkpoint)
    return base, checkpoint


def test_a_moved_v25_export_speaks_without_its_base_folder(tmp_path, capsys):
    from tests.indextts25_folder import expected, tiled_features

    base, checkpoint = v25_run(tmp_path)
    export = tmp_path / "exports" / "run_latest"
    export_checkpoint(checkpoint, export, config=base / "config.yaml")
    assert not _links(export)
    assert (export / "codec.pth").is_file() and (export / "hf_cache" / "bigvgan" / "config.json").is_file()
    moved = _moved(export, base, tmp_path)
    prompt = tmp_path / "prompt.wav"
    item = expected()["items"][0]
    sf.write(prompt, item["wav_int16"].reshape(-1).numpy(), int(item["wav_sr"]), subtype="PCM_16")
    out = tmp_path / "spoken.wav"
    with tiled_features():
        code = synthesize_main(["--model-dir", str(moved), "--reference", str(prompt), "--language", "am",
                                "--text", "ሰላም።", "--out", str(out), *FAST])
    assert code == 0, capsys.readouterr().err
    assert _spoken(out) > 0


def test_an_exported_merges_table_speaks_as_the_runs_tokenizer(tmp_path):
    """A moved 2.5 merges export has no merges JSON beside it: its extended table (upstream's layout) gives the
    same ids as the run's tokenizer (base table + merges), and the folder says its scheme."""
    from generations.indextts25.data.ethiopic_merges import write_upstream_table
    from generations.indextts25.data.text_table import DEFAULT_MERGES, DEFAULT_TABLE, TextTable
    from generations.indextts25.exported_table import exported_tokenizer, folder_scheme

    runs = TextTable(DEFAULT_TABLE, scheme="merges", merges=DEFAULT_MERGES)
    table = tmp_path / DEFAULT_TABLE.name
    write_upstream_table(runs.tokenizer, table)
    exported = exported_tokenizer(table)
    text = "ሰላም ለዓለም። ዛሬ አየሩ ጥሩ ነው።"
    assert exported.scheme == "merges" and exported.added_tokens == runs.added_tokens > 0
    assert exported.encode(text, "am") == runs.encode(text, "am")
    assert exported.tokenizer.upstream_id_order() == runs.tokenizer.upstream_id_order()
    assert folder_scheme(tmp_path, table) == "merges"
    assert exported_tokenizer(DEFAULT_TABLE) is None and folder_scheme(DEFAULT_TABLE.parent, DEFAULT_TABLE) is None
