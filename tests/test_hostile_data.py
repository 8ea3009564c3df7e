"""Prepared data as hostile as recordings: huge or non-finite feature values and I/O errors, judged alike by
the data checker and the trainer's data path (both read through ``data_tools.item_files``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from data_tools import chunk_lines as chunk_lines_module
from data_tools import fileio, item_files, manifest_sniff, npy
from data_tools.check_data import check_manifests
from data_tools.shape_rules import MAX_FEATURE_MAGNITUDE, RuleError
from tests.test_manifest_fuzz import build_v15, setting, trainer_path  # noqa: F401  (setting: a fixture)


@pytest.mark.parametrize("dtype, value", [("float64", 1e300), ("float32", 3e38), ("float32", 1e30),
                                          ("float32", MAX_FEATURE_MAGNITUDE * 2), ("float32", np.nan)])
def test_huge_or_non_finite_features_are_refused_by_checker_and_trainer(tmp_path, setting, dtype, value):  # noqa: F811
    tokenizer, tok_path, config, gpt = setting
    manifest = build_v15(tmp_path)
    mel = np.zeros((100, 20), dtype=dtype)
    mel[3, 4] = value
    np.save(tmp_path / "mels" / "u1.npy", mel)
    report = check_manifests([manifest], tokenizer=tok_path, config=config, workers=1)
    assert [(p.code, p.where) for p in report.errors] == [("non-finite", f"{manifest}:2")]
    assert "mels/u1.npy" in report.errors[0].message
    refusal = trainer_path(manifest, tokenizer, gpt)
    assert refusal is not None and refusal[0] == f"{manifest}:2" and "mels/u1.npy" in refusal[1]


def test_a_float64_vector_is_judged_before_its_cast(tmp_path):
    """1e300 is finite as float64 and inf as float32: the one check runs on the values as stored."""
    path = tmp_path / "spk.npy"
    np.save(path, np.full(192, 1e300))
    with pytest.raises(RuleError, match="beyond"):
        item_files.load_spk_vec(path)
    np.save(path, np.full(192, 0.5))
    assert item_files.load_spk_vec(path).dtype == np.float32


class _FailingHandle:
    """An open file whose reads fail the way a bad disk fails them (EIO)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by __exit__/close)

    def __enter__(self) -> _FailingHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def close(self) -> None:
        self._file.close()

    def fileno(self) -> int:
        return self._file.fileno()

    def seek(self, *args: int) -> int:
        return self._file.seek(*args)

    def _fail(self, *_args: object) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    read = readinto = readline = _fail


def _fail_reads_of(monkeypatch, target: Path) -> None:
    real = fileio.open_regular

    def open_regular(path):
        return _FailingHandle(Path(path)) if Path(path) == target else real(path)

    for module in (fileio, npy, chunk_lines_module, manifest_sniff):
        monkeypatch.setattr(module, "open_regular", open_regular)


def test_an_unreadable_listed_file_is_named_with_its_line(tmp_path, setting, monkeypatch):  # noqa: F811
    tokenizer, tok_path, config, gpt = setting
    manifest = build_v15(tmp_path)
    bad = tmp_path / "codes" / "u2.npy"
    _fail_reads_of(monkeypatch, bad)
    report = check_manifests([manifest], tokenizer=tok_path, config=config, workers=1)
    assert [(p.code, p.where) for p in report.errors] == [("file-unreadable", f"{manifest}:3")]
    assert str(bad) in report.errors[0].message and "Input/output error" in report.errors[0].message
    refusal = trainer_path(manifest, tokenizer, gpt)
    assert refusal is not None and refusal[0] == f"{manifest}:3" and str(bad) in refusal[1]


def test_an_unreadable_manifest_is_named_not_a_traceback(tmp_path, setting, monkeypatch):  # noqa: F811
    tokenizer, tok_path, config, gpt = setting
    manifest = build_v15(tmp_path)
    _fail_reads_of(monkeypatch, manifest)
    report = check_manifests([manifest], tokenizer=tok_path, config=config, workers=1)
    assert [p.where for p in report.errors] == [f"{manifest}:1"]
    assert "cannot read the manifest" in report.errors[0].message
    refusal = trainer_path(manifest, tokenizer, gpt)
    assert refusal == (f"{manifest}:1", "cannot read the manifest: Input/output error")
