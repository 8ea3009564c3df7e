"""A manifest format registered from the tests alone (issue 37): a renamed IndexTTS-1.5 entry whose codes
manifest spells its fields otherwise (``uid``, ``sentence``, ``tokens_file``, ``voice_file``).

Without touching any shared file: ``manifest_format`` recognises it, the data checker counts its lines and names a
broken one by path:line, split splits it (rewriting its own path fields), and the trainer loads its items and
trains two steps on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from data_tools.check_data import check_manifests
from data_tools.manifest import ManifestError, manifest_format, resolve_path, string_field
from data_tools.manifest_entries import iter_entries, prompt_of
from data_tools.split import split_manifest
from generations.format_facts import ManifestFormat
from generations.indextts15.data.manifest import ManifestEntry
from generations.registry import (
    by_id,
    format_of,
    format_of_line,
    formats,
    generation_ids,
    register,
    unregister,
)
from generations.spec import Generation
from networks.generation_rule import gpt_section
from tests.trainer_helpers import run_main, subset_manifest, tiny_args
from trainer.data import load_items, make_dataset

TOY_MARK = "toy_format_generation"  # a gpt-section key the toy's configs carry
TOY_FIELDS = ("uid", "sentence", "tokens_file", "voice_file")


def parse_toy_object(obj: dict, manifest: Path, lineno: int, default_language: str | None = None) -> ManifestEntry:
    """A toy line: the codes entry its own field names spell."""
    uid, text, tokens, voice = (string_field(obj, key, manifest, lineno, required=True) for key in TOY_FIELDS)
    assert uid is not None and text is not None and tokens is not None and voice is not None
    if not text.strip():
        raise ManifestError(manifest, lineno, f"empty 'sentence' (uid {uid})")
    voice_path = resolve_path(manifest.parent, voice, manifest, lineno, "voice_file")
    is_mel = voice_path.suffix == ".npy"
    return ManifestEntry(id=uid, text=text, codes=resolve_path(manifest.parent, tokens, manifest, lineno, "tokens_file"),
                         cond_mel=voice_path if is_mel else None, cond_audio=None if is_mel else voice_path,
                         speaker=obj.get("speaker"), language=obj.get("language") or default_language, duration=None,
                         manifest=manifest, line=lineno)


def toy_format() -> ManifestFormat:
    return by_id("1.5").manifest_format.renamed(
        id="toy-codes", name="a toy codes manifest", marks=("tokens_file",), parse_object=parse_toy_object,
        path_fields=("tokens_file", "voice_file"))


def recognises_toy(config: Any, state_keys: Any = ()) -> bool:
    return bool(gpt_section(config).get(TOY_MARK))


@pytest.fixture
def toy() -> Iterator[Generation]:
    entry = by_id("1.5").renamed(id="toyfmt", name="IndexTTS-ToyFormat", recognises=recognises_toy,
                                 manifest_format=toy_format(), format_hint="toy codes manifests (uid, sentence, ...)")
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.id)
    assert "toyfmt" not in generation_ids() and "toy-codes" not in [found.id for found in formats()]


def toy_manifest(source: Path, target: Path, count: int) -> Path:
    """``count`` lines of a demo codes manifest, spelt with the toy's field names (paths absolute)."""
    subset = subset_manifest(source, target.with_suffix(".codes.jsonl"), count)
    rows = []
    for line in subset.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        rows.append({"uid": obj["id"], "sentence": obj["text"], "tokens_file": obj["codes"],
                     "voice_file": obj["cond_mel"], "speaker": obj.get("speaker"), "language": obj.get("language")})
    target.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return target


@pytest.fixture
def toy_data(tmp_path: Path, demo_workspace) -> dict[str, Path]:
    return {"train": toy_manifest(demo_workspace.train_manifest, tmp_path / "toy_train.jsonl", 8),
            "val": toy_manifest(demo_workspace.val_manifest, tmp_path / "toy_val.jsonl", 4)}


def test_the_toy_format_is_recognised_by_its_own_fields(toy, toy_data):
    line = json.loads(toy_data["train"].read_text(encoding="utf-8").splitlines()[0])
    assert format_of_line(line) is toy.manifest_format and format_of("toy-codes") is toy.manifest_format
    assert formats()[0] is toy.manifest_format  # asked first, as its entry is
    assert manifest_format(toy_data["train"]) == "toy-codes"
    entries = list(iter_entries(toy_data["train"]))
    assert len(entries) == 8 and all(isinstance(entry, ManifestEntry) for entry in entries)
    assert prompt_of(entries[0], "toy-codes").id == line["uid"]


def test_the_checker_checks_a_toy_manifest(toy, toy_data):
    lines = toy_data["train"].read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[2])
    del broken["sentence"]
    lines[2] = json.dumps(broken)
    manifest = toy_data["train"].with_name("broken.jsonl")
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = check_manifests([str(manifest)], workers=1)
    assert report.formats == {str(manifest): "toy-codes"}
    assert report.train.entries == 7 and report.verdict == "errors"
    assert [(problem.where, problem.message) for problem in report.errors] == [
        (f"{manifest}:3", "missing field 'sentence'")]


def test_split_splits_a_toy_manifest(toy, toy_data, tmp_path):
    out = tmp_path / "split"
    result = split_manifest(toy_data["train"], out, val_fraction=0.25, seed=0)
    train = [json.loads(line) for line in result.train_path.read_text(encoding="utf-8").splitlines()]
    val = [json.loads(line) for line in result.val_path.read_text(encoding="utf-8").splitlines()]
    assert result.train_count == len(train) and result.val_count == len(val) and len(train) + len(val) == 8
    assert {row["uid"] for row in train}.isdisjoint({row["uid"] for row in val})
    assert all(set(TOY_FIELDS) <= set(row) for row in train + val)
    assert manifest_format(result.train_path) == "toy-codes"


def test_the_trainer_loads_toy_items_and_trains_on_them(toy, toy_data, demo_workspace, tmp_path):
    config = yaml.safe_load(demo_workspace.config.read_text(encoding="utf-8"))
    gpt = config["gpt"]
    from data_tools.text_tokenizer import TextTokenizer

    tokenizer = TextTokenizer(demo_workspace.extended_tokenizer)
    items, report = load_items([toy_data["train"]], tokenizer, int(gpt["max_text_tokens"]),
                               int(gpt["max_mel_tokens"]), gpt=gpt)
    assert report.format == "toy-codes" and report.kept == len(items) == 8
    assert "a toy codes manifest" in report.lines("train", 1, 1)[0]
    dataset = make_dataset(items, gpt, tokenizer.vocab_size, report.format)
    batch = dataset.collate([dataset[0], dataset[1]])
    assert "error" not in batch and batch["text_ids"].shape[0] == 2

    config["gpt"][TOY_MARK] = True
    for key in ("gpt_checkpoint", "bigvgan_checkpoint", "dvae_checkpoint"):  # keep relative files reachable
        if config.get(key):
            config[key] = str((demo_workspace.config.parent / config[key]).resolve())
    dataset_section = config.get("dataset") or {}
    if dataset_section.get("bpe_model"):
        dataset_section["bpe_model"] = str((demo_workspace.config.parent / dataset_section["bpe_model"]).resolve())
    toy_config = tmp_path / "toy" / "config.yaml"
    toy_config.parent.mkdir()
    toy_config.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "run"
    argv = tiny_args(demo_workspace, toy_data, out, config=str(toy_config), max_steps=2, save_interval=2)
    assert run_main(argv) == 0
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "end" and {e["version"] for e in events if e["event"] == "start"} == {"toyfmt"}
