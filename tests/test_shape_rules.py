"""Property tests (seeded generators, no hypothesis): the .npy reader, the shared shape rules, and the
checker's fast line path agree with the parsers the trainer uses."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pytest

from data_tools import item_files
from data_tools.check_pool import check_chunk
from data_tools.check_records import CheckSettings, ChunkTask
from data_tools.fileio import UnusableFile, expand_path
from data_tools.manifest import ManifestError
from data_tools.npy import NpyError, read_npy, read_npy_header
from data_tools.shape_rules import DataLimits, RuleError
from generations.indextts15.data.manifest import parse_manifest_line
from networks.gpt_config import text_rows, text_tokens_of_rows
from tests.pairs_factory import DIM

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.float16, np.float32, np.float64, ">i4", "<f8",
          np.bool_]


def random_array(rng: np.random.Generator) -> np.ndarray:
    ndim = int(rng.integers(0, 4))
    shape = tuple(int(n) for n in rng.integers(0, 6, ndim))
    dtype = np.dtype(DTYPES[int(rng.integers(len(DTYPES)))])
    values = rng.standard_normal(shape) * 100
    array = values.astype(dtype) if dtype.kind != "b" else values > 0
    return np.asfortranarray(array) if ndim == 2 and rng.random() < 0.3 else array


def test_reader_equals_np_load_on_random_arrays(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    for k in range(300):
        array = random_array(rng)
        path = tmp_path / f"{k}.npy"
        np.save(path, array)
        got = read_npy(path)
        assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array, equal_nan=True)
        header = read_npy_header(path)
        assert header.shape == array.shape and header.nbytes == array.nbytes


def test_corrupt_headers_are_refused_before_any_allocation(tmp_path: Path) -> None:
    rng = random.Random(3)
    np.save(tmp_path / "base.npy", np.arange(12, dtype=np.int32).reshape(3, 4))
    base = (tmp_path / "base.npy").read_bytes()
    for k in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256)
        if rng.random() < 0.3:
            data = bytearray(bytes(data).replace(b"(3, 4)", f"({rng.randrange(10**12)}, 4)".encode()))
        path = tmp_path / f"{k}.npy"
        path.write_bytes(bytes(data))
        started = time.perf_counter()
        try:
            array = read_npy(path)
        except NpyError as exc:
            assert "\n" not in str(exc)
        else:
            assert array.nbytes <= len(data)  # never more than the file holds
        assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("value, expected", [
    ("~/x.npy", str(Path("~/x.npy").expanduser())), ("rel/x.npy", "/base/rel/x.npy"), ("/abs.npy", "/abs.npy")])
def test_paths_expand(value: str, expected: str) -> None:
    assert str(expand_path(value, Path("/base"))) == expected


@pytest.mark.parametrize("value", ["~nosuchuser_zz/x", "", "a\x00b", "x" * 5000])
def test_unexpandable_paths_are_refused_by_name(value: str) -> None:
    with pytest.raises(UnusableFile) as exc:
        expand_path(value)
    assert "\n" not in str(exc.value)


def test_shared_rules_agree_on_random_feature_files(tmp_path: Path) -> None:
    """For random arrays as codes / condition / emo vec: the header rules accept exactly what loading accepts."""
    rng = np.random.default_rng(11)
    limits = DataLimits(model_dim=DIM, condition_latents=32)
    shapes = [(32, DIM), (DIM,), (20,), (1, 20), (32, DIM + 1), (31, DIM), ()]
    for k in range(200):
        shape = shapes[int(rng.integers(len(shapes)))]
        dtype = np.dtype(DTYPES[int(rng.integers(len(DTYPES)))])
        values = rng.integers(-2, 9000, shape) if dtype.kind in "iu" else rng.standard_normal(shape)
        array = values.astype(dtype) if dtype.kind != "b" else values > 0
        if array.dtype.kind == "f" and array.size and rng.random() < 0.2:
            array.flat[0] = np.nan
        path = tmp_path / f"{k}.npy"
        np.save(path, array)
        for load, header_rule in (
            (lambda p: item_files.load_codes(p, limits), lambda p: item_files.codes_count(p)),
            (lambda p: item_files.load_condition(p, limits), None),
            (lambda p: item_files.load_emo_vec(p, limits), None),
        ):
            try:
                load(path)
                loaded = True
            except RuleError as exc:
                loaded = False
                assert exc.code and "\n" not in str(exc)
            if header_rule is not None:
                try:
                    header_rule(path)
                    header_ok = True
                except RuleError:
                    header_ok = False
                assert header_ok or not loaded  # loading is never more lenient than the header check


HOSTILE = [None, "", " ", 5, 1e19, -1e18, float("nan"), float("inf"), True, [], {}, "~nosuchuser_q/x", "x" * 2000,
           "codes/a.npy", "a\x00b", -1, 0, 3.25, 86401]
FIELDS = ["id", "text", "codes", "cond_mel", "cond_audio", "speaker", "language", "duration"]


def test_fast_line_path_agrees_with_the_parser(tmp_path: Path) -> None:
    """The checker's quick parse of a line accepts exactly the lines the trainer's parser accepts."""
    rng = random.Random(5)
    base = {"id": "a", "text": "ሰላም", "codes": "codes/a.npy", "cond_mel": "m.npy", "speaker": "s", "language": "am",
            "duration": 1.5}
    manifest = tmp_path / "m.jsonl"
    lines = []
    for _ in range(400):
        obj = dict(base)
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(FIELDS)
            value = rng.choice(HOSTILE)
            if value is None and rng.random() < 0.5:
                obj.pop(key, None)
            else:
                obj[key] = value
        lines.append(json.dumps(obj, ensure_ascii=False))
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = check_chunk(ChunkTask(str(manifest), 0, 0, manifest.stat().st_size), CheckSettings(check_files=False))
    flagged = {line for _severity, _code, line, _message in result.problems if _severity == "error"}
    for lineno, raw in enumerate(lines, 1):
        try:
            parse_manifest_line(raw, manifest, lineno)
            parsed = True
        except ManifestError:
            parsed = False
        assert parsed == (lineno not in flagged), (lineno, raw[:200])


@pytest.mark.parametrize("types", [1, 2, 3])
def test_text_tokens_of_rows_inverts_text_rows(types: int) -> None:
    for tokens in (1, 255, 1000, 12_000):
        gpt = {"number_text_tokens": tokens, "types": types}
        assert text_tokens_of_rows(text_rows(gpt), gpt) == tokens
    assert text_tokens_of_rows(1001) == 1000  # no gpt: one type
