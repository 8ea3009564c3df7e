"""Seeded manifest fuzzer: mutated manifest lines and .npy files of both formats, through the data checker
and the trainer's whole data path (load_items, dataset, collate).

Promises checked on every case: no traceback (only the one-line error types), no hang (each case runs
under an alarm), and no disagreement: data the checker finds no error in loads in the trainer's path, and
whatever that path refuses the checker reports as an error at the same file:line.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from data_tools.check_data import check_manifests
from data_tools.manifest import ManifestError
from data_tools.text_tokenizer import TextTokenizer
from tests.pairs_factory import PairsBuilder, gpt_config, write_config
from trainer.data import load_items, make_dataset

CASES_PER_FORMAT = 110
CASE_TIMEOUT_S = 20
SEED = 20240611
REPO = Path(__file__).resolve().parents[1]


class Hang(Exception):
    pass


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def on_alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ----- valid starting points --------------------------------------------------------------------------

SENTENCES = ["ሰላም ዓለም", "አዲስ አበባ ከተማ", "ቋንቋ መማር ጥሩ ነው", "ዛሬ ውሃ ጠጣሁ"]


def build_v15(root: Path) -> Path:
    (root / "codes").mkdir(parents=True)
    (root / "mels").mkdir()
    rng = np.random.default_rng(1)
    lines = []
    for k, text in enumerate(SENTENCES):
        np.save(root / "codes" / f"u{k}.npy", rng.integers(0, 8192, 30 + k).astype(np.int16))
        np.save(root / "mels" / f"u{k}.npy", rng.standard_normal((100, 20 + k)).astype(np.float32))
        lines.append(json.dumps({"id": f"u{k}", "text": text, "codes": f"codes/u{k}.npy", "cond_mel": f"mels/u{k}.npy",
                                 "speaker": f"s{k % 2}", "language": "am", "duration": round((30 + k) * 1024 / 24000, 3)},
                                ensure_ascii=False))
    path = root / "m.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_v2(root: Path) -> Path:
    builder = PairsBuilder(root)
    for k in range(4):
        builder.utterance(f"u{k}", text_len=6 + k, code_len=20 + k)
    for k in range(4):
        builder.pair(f"u{k}", f"u{(k + 1) % 4}", speaker="spk1", target_duration=(20 + k) / 50)
    return builder.write("m.jsonl")


# ----- mutations ---------------------------------------------------------------------------------------

HOSTILE_VALUES: list[object] = [
    1e19, -1e18, float("nan"), float("inf"), -1, 0, 2**70, True, None, "", " ", [], {}, [1, 2], {"a": 1},
    "~nosuchuser_fuzz/x.npy", "~/definitely_missing.npy", "/dev/zero", "/", "a\x00b", "x" * 6000, "..", 3.5,
    "codes/u1.npy", "mels/u1.npy", "condition/u1.npy", "emo_vec/u1.npy", "text_ids/u1.npy",
]
RAW_VALUES = ["1" * 5000, "[" * 100_000 + "]" * 100_000, "NaN", "-Infinity", "1e400", '"\\ud800"']


def mutate_line(rng: random.Random, line: str) -> str | bytes:
    obj = json.loads(line)
    choice = rng.randrange(9)
    key = rng.choice(sorted(obj))
    if choice <= 3:
        obj[key] = rng.choice(HOSTILE_VALUES)
        return json.dumps(obj, ensure_ascii=False)
    if choice == 4:
        del obj[key]
        return json.dumps(obj, ensure_ascii=False)
    if choice == 5:
        raw = json.dumps({k: "@@" if k == key else v for k, v in obj.items()}, ensure_ascii=False)
        return raw.replace('"@@"', rng.choice(RAW_VALUES))
    if choice == 6:
        return line[: rng.randrange(len(line))]
    if choice == 7:
        data = line.encode("utf-8")
        at = rng.randrange(len(data))
        return data[:at] + bytes([rng.choice([0xFF, 0xC3, 0x80, 0xED])]) + data[at:]
    return rng.choice(["[1, 2]", '"text"', "null", "{}", " ", json.dumps({"id": "x"})])


def npy_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.npy") if p.is_file())


def mutate_file(rng: random.Random, path: Path) -> None:
    choice = rng.randrange(12)
    data = path.read_bytes()
    try:
        original = np.load(path)
    except (OSError, ValueError, EOFError):  # already broken by an earlier mutation
        path.write_bytes(data[:-1])
        return
    if original.size == 0:
        path.unlink()
        return
    if choice == 0:  # header claims a huge shape
        path.write_bytes(data.replace(b"'shape': (", b"'shape': (999999999999, ", 1))
    elif choice == 1:
        path.write_bytes(data[: rng.randrange(len(data))])
    elif choice == 2:
        path.write_bytes(b"")
    elif choice == 3:
        np.save(path, original.astype(np.float32) if original.dtype.kind in "iu" else original.astype(np.int32))
    elif choice == 4:
        np.save(path, original.reshape(1, *original.shape))
    elif choice == 5:
        bad = original.astype(np.float32).copy()
        bad.flat[rng.randrange(bad.size)] = rng.choice([np.nan, np.inf, -np.inf])
        np.save(path, bad if original.dtype.kind == "f" else original)
        if original.dtype.kind in "iu":
            changed = original.astype(np.int64)
            changed.flat[rng.randrange(changed.size)] = rng.choice([-1, 8192, 8193, 9000, 100_000])
            np.save(path, changed)
    elif choice == 6:
        path.unlink()
        os.mkfifo(path)
    elif choice == 7:
        path.unlink()
        path.mkdir()
    elif choice == 8:
        path.unlink()
        path.symlink_to("/dev/zero")
    elif choice == 9:
        path.unlink()
    elif choice == 10:
        np.save(path, np.asfortranarray(original.reshape(original.shape[::-1]).T) if original.ndim == 2 else original[:0])
    else:
        path.write_bytes(data[:8] + b"\xff\xff" + data[10:])  # header length far beyond the file


def make_case(rng: random.Random, build: Callable[[Path], Path], root: Path) -> Path:
    manifest = build(root)
    lines = manifest.read_text(encoding="utf-8").splitlines()
    out: list[bytes] = [line.encode("utf-8") for line in lines]
    for _ in range(rng.choice([1, 1, 2, 3])):
        kind = rng.randrange(4)
        if kind <= 1:
            k = rng.randrange(len(lines))
            mutated = mutate_line(rng, lines[k])
            out[k] = mutated if isinstance(mutated, bytes) else mutated.encode("utf-8", "surrogatepass")
        elif kind == 2:
            files = npy_files(root)
            if files:
                mutate_file(rng, rng.choice(files))
        else:
            out.insert(rng.randrange(len(out) + 1), rng.choice([b"", out[0], b"   "]))
    manifest.write_bytes(b"\n".join(out) + b"\n")
    return manifest


# ----- the two consumers ---------------------------------------------------------------------------------


def trainer_path(manifest: Path, tokenizer: TextTokenizer, gpt: dict) -> tuple[str, str] | None:
    """Everything the trainer does with data before the model; (where, message) of its refusal or None."""
    try:
        items, _report = load_items([manifest], tokenizer, gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    except ManifestError as exc:
        assert "\n" not in str(exc), str(exc)
        return (f"{exc.path}:{exc.line}" if exc.line is not None else str(exc.path)), exc.message
    if not items:
        return None
    dataset = make_dataset(items, gpt, tokenizer.vocab_size)
    for start in range(0, len(dataset), 2):
        batch = dataset.collate([dataset[i] for i in range(start, min(start + 2, len(dataset)))])
        if "error" in batch:
            assert "\n" not in batch["error"], batch["error"]
            where, _, message = batch["error"].partition(" (id ")
            return where, message
    return None


@pytest.fixture(scope="module")
def setting(demo_workspace, tmp_path_factory: pytest.TempPathFactory) -> tuple[TextTokenizer, Path, Path, dict]:
    config = write_config(tmp_path_factory.mktemp("cfg") / "config.yaml")
    tok_path = demo_workspace.extended_tokenizer
    return TextTokenizer(tok_path), tok_path, config, gpt_config()


@pytest.mark.parametrize("fmt, build", [("v1.5", build_v15), ("v2", build_v2)])
def test_fuzzed_manifests_never_crash_hang_or_disagree(tmp_path: Path, setting, fmt: str, build) -> None:
    tokenizer, tok_path, config, gpt = setting
    rng = random.Random(f"{SEED}-{fmt}")
    outcomes = {"clean": 0, "refused": 0, "checker-errors-only": 0}
    for case in range(CASES_PER_FORMAT):
        root = tmp_path / f"case{case}"
        manifest = make_case(rng, build, root)
        label = f"{fmt} case {case} ({manifest})"
        try:
            with alarm(CASE_TIMEOUT_S):
                report = check_manifests([manifest], tokenizer=tok_path, config=config, workers=1)
                refusal = trainer_path(manifest, tokenizer, gpt)
        except Hang as exc:
            pytest.fail(f"{label}: hang: {exc}")
        error_places = {p.where for p in report.errors}
        if refusal is None:
            outcomes["clean" if not report.errors else "checker-errors-only"] += 1
        else:
            outcomes["refused"] += 1
            assert report.errors, f"{label}: the trainer refused ({refusal}) but the checker found no error"
            assert refusal[0] in error_places, f"{label}: trainer refused at {refusal}, checker errors at {error_places}"
        if not report.errors:
            assert refusal is None, f"{label}: the checker passed it but the trainer refused: {refusal}"
        shutil.rmtree(root)
    assert outcomes["clean"] > 0 and outcomes["refused"] > 0, outcomes  # it reaches both outcomes


def test_fuzzed_manifests_through_the_cli(tmp_path: Path, setting) -> None:
    _tokenizer, tok_path, config, _gpt = setting
    rng = random.Random(SEED)
    for case in range(6):
        build = build_v2 if case % 2 else build_v15
        manifest = make_case(rng, build, tmp_path / f"cli{case}")
        result = subprocess.run([sys.executable, "-m", "data_tools.check_data", "--manifest", str(manifest),
                                 "--tokenizer", str(tok_path), "--config", str(config), "--quiet", "--workers", "1"],
                                capture_output=True, text=True, timeout=120, cwd=REPO)
        assert result.returncode in (0, 1), (case, result.returncode, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
        assert "verdict:" in result.stdout
