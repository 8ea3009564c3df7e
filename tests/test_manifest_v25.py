"""The IndexTTS-2.5 paired manifest: its fields, the data checker's report and the trainer's reading agree.

Broken lines and arrays are made from the demo's 2.5 data; each is found by the checker (a problem code at
``file:line``) and refused by the trainer's item loading with the same rule (``data_tools.shape_rules``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from data_tools.check_data import check_manifests
from data_tools.manifest import ManifestError, manifest_format
from generations.indextts25.data.manifest import parse_pair_line
from generations.indextts25.data.text_table import TextTable
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.indextts25.ui.tokenizer_panel import measure_schemes
from generations.registry import by_id
from trainer.data import load_items


@pytest.fixture(scope="module")
def ws(demo_workspace) -> DemoV25Paths:
    return DemoV25Paths.under(demo_workspace.root)


def rows_of(ws: DemoV25Paths, count: int = 6) -> list[dict]:
    folder = ws.train_manifest.parent
    rows = [json.loads(line) for line in ws.train_manifest.read_text(encoding="utf-8").splitlines()][:count]
    for row in rows:
        for key in ("prompt_spk_vec_path", "prompt_emo_vec_path", "target_codes_path"):
            row[key] = str(folder / row[key])
    return rows


def write(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"language": None}, "missing field 'language': IndexTTS-2.5 needs each item's language"),
    ({"target_text": None}, "missing field 'target_text' (or target_text_ids_path)"),
    ({"target_text_ids_path": "ids.npy"}, "'target_text_ids_path' needs 'text_scheme'"),
    ({"text_scheme": "bpe"}, "field 'text_scheme' must be one of bytes, merges, translit"),
    ({"prompt_emo_vec_path": None}, "missing field 'prompt_emo_vec_path' (or target_emo_vec_path)"),
    ({"target_codes_path": None}, "missing field 'target_codes_path'"),
])
def test_line_fields_are_refused_by_name(ws, tmp_path, change, message):
    row = {**rows_of(ws, 1)[0], **change}
    raw = json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False)
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_pair_line(raw, tmp_path / "m.jsonl", 1)


def test_format_is_told_by_the_speaker_vector_and_the_manifest_language_fills_in(ws, tmp_path):
    assert manifest_format(ws.train_manifest) == by_id("2.5").manifest_format.id == "v2.5"
    row = rows_of(ws, 1)[0]
    del row["language"]
    entry = parse_pair_line(json.dumps(row, ensure_ascii=False), tmp_path / "m.jsonl", 1, "am")
    assert entry.language == "am" and entry.text_ids is None and entry.spk_vec.name.endswith(".npy")


def test_checker_is_clean_on_the_demo_and_reports_tokens_per_character(ws):
    report = check_manifests([ws.train_manifest], [ws.val_manifest], tokenizer=ws.tokenizer, config=ws.config,
                             language="am", workers=1)
    assert report.verdict == "clean", report.summary_text()
    assert report.train.text_scheme == "merges" and 0.2 < report.train.tokens_per_char < 0.5
    assert "tokens per character ('merges' scheme, language prefix excluded): 0." in report.summary_text()
    bytes_report = check_manifests([ws.train_manifest], tokenizer=ws.tokenizer, config=ws.config, workers=1,
                                   text_scheme="bytes")
    assert bytes_report.train.tokens_per_char > 2.0


def _broken(ws: DemoV25Paths, tmp_path: Path) -> tuple[Path, Path]:
    rows = rows_of(ws)
    np.save(tmp_path / "spk191.npy", np.zeros(191, dtype=np.float32))
    rows[1]["prompt_spk_vec_path"] = str(tmp_path / "spk191.npy")
    np.save(tmp_path / "codes_big.npy", np.array([5, 9000, 7], dtype=np.int32))
    rows[2].update(target_codes_path=str(tmp_path / "codes_big.npy"), target_code_len=3)
    rows[3]["target_text"] = "ሰላም " * 200  # beyond max_text_tokens with the language prefix
    np.save(tmp_path / "ids.npy", np.arange(5, 15, dtype=np.int32))
    rows[4].update(target_text_ids_path=str(tmp_path / "ids.npy"), text_scheme="bytes")
    return write(rows, tmp_path / "broken.jsonl"), ws.config


def test_checker_finds_each_broken_item(ws, tmp_path):
    manifest, config = _broken(ws, tmp_path)
    report = check_manifests([manifest], tokenizer=ws.tokenizer, config=config, workers=1)
    found = {(p.where.rsplit(":", 1)[1], p.code) for p in report.errors}
    assert found == {("2", "spk-vec-shape"), ("3", "codes-range"), ("4", "text-too-long"), ("5", "text-scheme")}
    long = next(p for p in report.errors if p.code == "text-too-long")
    assert "more than gpt.max_text_tokens 128 with the 'merges' text scheme, language prefix included" in long.message


def test_the_trainer_refuses_what_the_checker_finds(ws, tmp_path):
    manifest, config = _broken(ws, tmp_path)
    tokenizer = TextTable(ws.tokenizer)
    gpt = yaml.safe_load(config.read_text())["gpt"]
    rows = manifest.read_text(encoding="utf-8").splitlines()
    expectations = {2: "spk vec must be [192] (CAM++)", 5: "were made with the 'bytes' text scheme, this run uses"}
    for line, message in expectations.items():
        single = tmp_path / f"line{line}.jsonl"
        single.write_text(rows[line - 1] + "\n", encoding="utf-8")
        with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                           .replace("]", r"\]").replace("+", r"\+")):
            load_items([single], tokenizer, gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    long = tmp_path / "long.jsonl"
    long.write_text(rows[3] + "\n" + rows[0] + "\n", encoding="utf-8")
    items, report = load_items([long], tokenizer, gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    assert len(items) == 1 and len(report.too_many_text_tokens) == 1  # dropped and counted, as the checker says
    assert items[0].lang == 75 and items[0].text_ids[0] == tokenizer.tokenizer.specials["<|am|>"]


def test_tokenizer_tab_panel_measures_the_three_schemes():
    table, message = measure_schemes("ሰላም ለዓለም። ኢትዮጵያ ውብ ሀገር ናት።", "am")
    per_char = dict(zip(table["scheme"], table["tokens per character"]))
    assert per_char["merges (default)"] <= per_char["translit"] < per_char["bytes"]
    assert set(table["text rows"]) == {60510, 62510} and "--text-scheme" in message
    assert (table["ids with prefix"] == table["tokens"] + 1).all()  # "<|am|>" is one special token


def test_split_keeps_2_5_pairs_trainable(ws, tmp_path):
    """``data_tools.split`` splits a 2.5 paired manifest by target; val prompts are re-chosen outside train
    targets and every path still points at its file (the trainer reads the result)."""
    from data_tools.split import split_manifest

    result = split_manifest(ws.train_manifest, tmp_path / "split", val_fraction=0.1, seed=0)
    assert result.train_count > 0 and result.val_count > 0
    tokenizer = TextTable(ws.tokenizer)
    gpt = yaml.safe_load(ws.config.read_text())["gpt"]
    train, _ = load_items([result.train_path], tokenizer, gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    val, _ = load_items([result.val_path], tokenizer, gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    targets = {json.loads(line)["target_id"] for line in result.train_path.read_text(encoding="utf-8").splitlines()}
    prompts = [json.loads(line)["prompt_id"] for line in result.val_path.read_text(encoding="utf-8").splitlines()]
    assert len(train) == result.train_count and len(val) == result.val_count
    assert not targets & set(prompts)  # no val prompt is a train target


@pytest.mark.parametrize("code", ["xx", "amh"])
def test_an_unknown_language_code_is_refused_not_trained_as_common(ws, tmp_path, code):
    rows = rows_of(ws, 2)
    rows[1]["language"] = code
    manifest = write(rows, tmp_path / "m.jsonl")
    report = check_manifests([manifest], tokenizer=ws.tokenizer, config=ws.config, workers=1)
    assert [p.where for p in report.errors] == [f"{manifest}:2"]
    assert f"language '{code}' is not a code of the IndexTTS-2.5 language table" in report.errors[0].message
    gpt = yaml.safe_load(ws.config.read_text())["gpt"]
    with pytest.raises(ManifestError, match=f"{manifest}:2: language '{code}' is not a code"):
        load_items([manifest], TextTable(ws.tokenizer), gpt["max_text_tokens"], gpt["max_mel_tokens"], gpt=gpt)
    row = {k: v for k, v in rows[0].items() if k != "language"}
    with pytest.raises(ManifestError, match="language 'xx' is not a code"):  # a manifest's ::xx alike
        parse_pair_line(json.dumps(row, ensure_ascii=False), tmp_path / "n.jsonl", 1, "xx")
