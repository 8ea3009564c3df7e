"""IndexTTS2 paired manifests: read as the community writes them, checked by the same rules as the trainer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.check_data import check_manifests, main, write_code_len_fixes
from data_tools.manifest import MAX_LINE_BYTES, ManifestError
from generations.indextts2.dataset import PairItem
from tests.conftest import shared_file
from tests.pairs_factory import DIM, FakeTokenizer, PairsBuilder, gpt_config, write_config
from trainer.data import load_items, make_dataset


def test_fixture_batch_is_reproduced_exactly() -> None:
    """FIXTURES.md: tiny_dataset/gpt_pairs_train.jsonl, batch_size 3 in manifest order -> tiny_expected_v2.pt."""
    root = shared_file("reference", "fixtures_indextts2")
    expected = torch.load(root / "tiny_expected_v2.pt", weights_only=True)
    gpt = yaml.safe_load((root / "tiny_config_v2.yaml").read_text(encoding="utf-8"))["gpt"]
    items, report = load_items([root / "tiny_dataset" / "gpt_pairs_train.jsonl"], FakeTokenizer(100),
                               int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]), gpt=gpt)
    assert report.format == "v2" and report.kept == 3 and report.dropped == 0
    dataset = make_dataset(items, gpt, text_vocab=100)
    batch = dataset.collate([dataset[i] for i in range(3)])
    for key in ("text_ids", "codes", "condition", "emo_vec", "text_lengths", "code_lengths"):
        assert batch[key].dtype == expected[key].dtype and torch.equal(batch[key], expected[key]), key
    assert batch["ids"] == list(expected["ids"])
    assert batch["text_lengths_host"] == [12, 8, 10] and batch["code_lengths_host"] == [20, 14, 17]
    assert batch["num_tokens"] == 30 + 51
    assert dataset.lengths() == [32, 22, 27]


@pytest.fixture
def pairs(tmp_path: Path) -> PairsBuilder:
    builder = PairsBuilder(tmp_path)
    for k in range(4):
        builder.utterance(f"u{k}", text_len=6 + k, code_len=15 + k)
    return builder


def load(path: Path, **kwargs):
    return load_items([path], FakeTokenizer(), 32, 48, gpt=gpt_config(), **kwargs)


def test_lengths_come_from_the_manifest_and_cut_the_arrays(pairs: PairsBuilder) -> None:
    pairs.pair("u0", "u1", target_text_len=4, target_code_len=10)
    pairs.pair("u1", "u2", prompt_emo_vec_path="")  # falls back to the target's emo vec
    items, _ = load(pairs.write())
    assert isinstance(items[0], PairItem) and items[0].text_ids.size == 4 and items[0].num_codes == 10
    assert items[1].emo_vec == pairs.root / "emo_vec" / "u1.npy"
    dataset = make_dataset(items, gpt_config(), 100)
    first = dataset[0]
    assert list(first["codes"]) == list(np.load(pairs.root / "codes" / "u0.npy")[:10])
    assert list(first["text_ids"]) == list(np.load(pairs.root / "text_ids" / "u0.npy")[:4])


@pytest.mark.parametrize("change, expected", [
    ({"target_text_len": 99}, "'target_text_len' is 99 but"),
    ({"target_code_len": 0}, "'target_code_len' is 0, must be at least 1"),
    ({"target_code_len": 1e19}, "field 'target_code_len' must be a whole number"),
    ({"target_duration": float("nan")}, "field 'target_duration' must be a number of seconds"),
    ({"prompt_condition_path": "~nosuchuser_xyz/c.npy"}, "no home folder for user 'nosuchuser_xyz'"),
    ({"target_codes_path": "codes/missing.npy"}, "codes file not found"),
    ({"target_codes_path": None}, "missing field 'target_codes_path'"),
    ({"id": "x" * 5000}, "field 'id' is longer than"),
])
def test_bad_lines_are_refused_at_their_line(pairs: PairsBuilder, change: dict, expected: str) -> None:
    pairs.pair("u0", "u1")
    obj = pairs.pair_object("u1", "u2")
    obj.update(change)
    pairs.lines.append(json.dumps({k: v for k, v in obj.items() if v is not None}))
    path = pairs.write()
    with pytest.raises(ManifestError) as exc:
        load(path)
    assert str(exc.value).startswith(f"{path}:2: ") and expected in str(exc.value)
    assert "\n" not in str(exc.value)


def test_text_ids_outside_the_tokenizer_are_refused(pairs: PairsBuilder) -> None:
    pairs.utterance("big", text_ids=np.array([5, 150, 7], np.int32))
    pairs.pair("u0", "u1")
    pairs.pair("big", "u0")
    path = pairs.write()
    with pytest.raises(ManifestError, match=r":2: text ids must lie in 0\.\.99 .* found 5\.\.150"):
        load(path)


def test_feature_width_must_match_the_model(pairs: PairsBuilder) -> None:
    pairs.pair("u0", "u1")
    path = pairs.write()
    with pytest.raises(ManifestError, match=r":1: condition must be \[32, 24\], .* has shape \[32, 16\]"):
        load_items([path], FakeTokenizer(), 32, 48, gpt=gpt_config(dim=24))


def test_non_finite_features_become_an_error_entry(pairs: PairsBuilder) -> None:
    bad = np.ones(DIM, np.float32)
    bad[3] = np.nan
    pairs.utterance("nan", emo_vec=bad)
    pairs.pair("u0", "nan")
    items, _ = load(pairs.write())
    dataset = make_dataset(items, gpt_config(), 100)
    batch = dataset.collate([dataset[0]])
    assert batch["error"].startswith(f"{pairs.root / 'pairs.jsonl'}:1 (id u0__nan): emo vec holds 1 NaN/infinite")


def test_language_suffix_and_mixed_formats(pairs: PairsBuilder, tmp_path: Path) -> None:
    pairs.pair("u0", "u1")
    path = pairs.write()
    _items, report = load_items([f"{path}::am"], FakeTokenizer(), 32, 48, gpt=gpt_config())
    assert report.manifests[0].languages == ["am"] and report.manifests[0].path == str(path)
    codes_manifest = tmp_path / "v15.jsonl"
    codes_manifest.write_text(json.dumps({"id": "a", "text": "x", "codes": "c.npy", "cond_mel": "m.npy"}) + "\n")
    with pytest.raises(ManifestError) as exc:
        load_items([path, codes_manifest], FakeTokenizer(), 32, 48)
    assert str(exc.value) == (f"{codes_manifest}: is a v1.5 codes manifest but {path} is an IndexTTS2 paired "
                              "manifest: one run trains one format")
    utterances = tmp_path / "train_manifest.jsonl"
    utterances.write_text(json.dumps({"id": "a", "codes_path": "c.npy", "condition_path": "c.npy"}) + "\n")
    with pytest.raises(ManifestError, match="per-utterance feature manifest"):
        load_items([utterances], FakeTokenizer(), 32, 48)


def test_bad_utf8_is_reported_at_its_line_by_trainer_and_checker(pairs: PairsBuilder) -> None:
    for k in range(40):
        pairs.pair("u0", "u1", id=f"p{k}")
    path = pairs.write()
    lines = path.read_bytes().split(b"\n")
    lines[33] = lines[33].replace(b"text of", b"text \xff of")
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ManifestError, match=r":34: not valid UTF-8"):
        load(path)
    report = check_manifests([path], workers=1)
    assert [(p.code, p.where) for p in report.errors] == [("not-utf8", f"{path}:34")]


# ----- the checker on paired data -------------------------------------------------------------------------


def seeded_pairs(root: Path) -> tuple[Path, Path, dict]:
    """Train and val paired manifests with one of each v2 defect; returns {(file:line, code): severity}."""
    train = PairsBuilder(root / "data")
    rng = np.random.default_rng(5)
    for k in range(8):
        train.utterance(f"a{k}", text_len=6 + k, code_len=20 + k)
    expected: dict = {}

    def expect(path_name: str, line: int, code: str, severity: str = "error") -> None:
        expected[(f"{root / 'data' / path_name}:{line}", code)] = severity

    for k in range(3):
        train.pair(f"a{k}", f"a{k + 1}")
    expect("train.jsonl", train.pair("a3", "a3"), "prompt-is-target", "warning")
    train.utterance("bigids", text_ids=np.array([3, 5000, 4], np.int32))  # the demo tokenizer has 1916 pieces
    expect("train.jsonl", train.pair("bigids", "a0"), "text-ids-range")
    expect("train.jsonl", train.pair("a4", "a0", target_code_len=99), "length-mismatch")
    train.utterance("wide", condition=np.zeros((32, DIM + 1), np.float32), emo_vec=np.zeros(DIM + 1, np.float32))
    expect("train.jsonl", train.pair("a5", "wide"), "condition-shape")
    inf = np.zeros((32, DIM), np.float32)
    inf[0, 0] = np.inf
    train.utterance("inf", condition=inf)
    expect("train.jsonl", train.pair("a6", "inf"), "non-finite")
    padded = np.concatenate([rng.integers(0, 8000, 30), np.full(18, 8100)]).astype(np.int32)
    train.utterance("padded", codes=padded)
    expect("train.jsonl", train.pair("padded", "a0", target_duration=0.6), "padded-code-len")
    hinted = np.concatenate([rng.integers(0, 8000, 10), np.full(30, 77)]).astype(np.int32)
    train.utterance("hinted", codes=hinted)
    expect("train.jsonl", train.pair("hinted", "a1"), "padded-code-len", "warning")
    train.utterance("other", text_len=5, code_len=12)
    expect("train.jsonl", train.pair("a7", "other"), "prompt-other-speaker", "warning")
    expect("train.jsonl", train.pair("other", "a7", speaker="spk2"), "prompt-other-speaker", "warning")
    train.utterance("longtext", text_len=40)
    expect("train.jsonl", train.pair("longtext", "a2"), "text-too-long")
    train_path = train.write("train.jsonl")

    val = PairsBuilder(root / "data", seed=9)
    val.lines = []
    for k in range(3):
        val.utterance(f"v{k}", text_len=5 + k, code_len=12 + k)
    val.pair("v0", "v1")
    val.pair("v1", "v0")
    expect("val.jsonl", val.pair("v2", "a0"), "val-leak-utterance")
    return train_path, val.write("val.jsonl"), expected


@pytest.fixture(scope="module")
def tokenizer_path(demo_workspace) -> Path:
    return demo_workspace.extended_tokenizer


def test_every_v2_defect_is_reported_at_its_line(tmp_path: Path, tokenizer_path: Path) -> None:
    train, val, expected = seeded_pairs(tmp_path)
    config = write_config(tmp_path / "config.yaml")
    report = check_manifests([train], [val], tokenizer=tokenizer_path, config=config, workers=1)
    found = {(p.where, p.code): p.severity for p in report.errors + report.warnings
             if p.code not in {"single-speaker", "dominant-speaker", "very-short"}}
    assert found == expected
    assert report.formats == {str(train): "v2", str(val): "v2"}
    assert report.leakage["utterances"] == 1
    fixes = {(f["id"], f["old"], f["new"], f["basis"]) for f in report.code_len_fixes}
    assert fixes == {("padded__a0", 48, 30, "duration"), ("hinted__a1", 40, 10, "repeated code")}


def test_fix_writes_a_corrected_manifest_beside_the_original(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    train, _val, _ = seeded_pairs(tmp_path)
    before = train.read_bytes()
    report = check_manifests([train], workers=1)
    written = write_code_len_fixes(report)
    assert written == [train.with_name("train.codelen_fixed.jsonl")]
    assert train.read_bytes() == before
    old_lines, new_lines = before.decode().splitlines(), written[0].read_text(encoding="utf-8").splitlines()
    changed = [k for k, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert [json.loads(new_lines[k])["target_code_len"] for k in changed] == [30, 10]
    after = check_manifests([written[0]], workers=1)
    assert not after.code_len_fixes and "padded-code-len" not in after.problem_counts
    # The CLI does the same with --fix-code-len; a checker failure exits 3, never 0/1.
    assert main(["--manifest", str(train), "--fix-code-len", "--quiet", "--workers", "1"]) == 1
    assert "corrected target_code_len written to" in capsys.readouterr().out


def test_checker_crash_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    builder = PairsBuilder(tmp_path)
    builder.utterance("u0")
    builder.utterance("u1")
    builder.pair("u0", "u1")
    path = builder.write()

    def boom(*_args, **_kwargs):
        raise KeyError("bug")

    monkeypatch.setattr("data_tools.check_data.check_manifests", boom)
    assert main(["--manifest", str(path), "--quiet"]) == 3
    assert "the data checker failed (KeyError" in capsys.readouterr().err


def test_clean_pairs_are_clean_and_load(tmp_path: Path) -> None:
    builder = PairsBuilder(tmp_path)
    for k in range(4):
        builder.utterance(f"u{k}", text_len=6 + k, code_len=20 + k)
    for k in range(4):
        builder.pair(f"u{k}", f"u{(k + 1) % 4}")
    path = builder.write()
    report = check_manifests([path], config=write_config(tmp_path / "c.yaml"), workers=1)
    assert report.errors == [] and {p.code for p in report.warnings} <= {"single-speaker", "very-short"}
    items, _ = load(path)
    assert len(items) == 4


def test_an_over_long_pairs_line_is_named_as_such_at_its_line(tmp_path: Path) -> None:
    """The chunk reader hands a line over MAX_LINE_BYTES as a stand-in it never held in memory; the pairs checker
    says what it is (it used to call the stand-in malformed JSON), as the codes-manifest checker does."""
    builder = PairsBuilder(tmp_path)
    builder.utterance("u0")
    builder.utterance("u1")
    builder.pair("u0", "u1")
    builder.lines.append(json.dumps({"id": "x" * (MAX_LINE_BYTES + 10)}))
    builder.pair("u1", "u0")
    report = check_manifests([builder.write()], workers=1)
    long_lines = [p for p in report.errors if p.where.endswith(":2")]
    assert [(p.code, p.message) for p in long_lines] == [("invalid-entry", f"line longer than {MAX_LINE_BYTES} bytes")]
    assert report.train.entries == 2
