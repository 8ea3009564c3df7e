"""Data checker: a manifest seeded with one of each defect, every defect reported at its line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from data_tools.check_data import CheckUsageError, check_manifests, main
from data_tools.text_keys import TextBatch, text_key

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SECONDS_PER_CODE = 1024 / 24000
SPEAKERS = ("spk_a", "spk_b", "spk_c")
MAX_TEXT_TOKENS = 24
MAX_MEL_TOKENS = 100


class DataBuilder:
    """Writes a manifest line by line, with the .npy files each line refers to."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.path = root / name
        self.lines: list[str] = []
        (root / "codes").mkdir(exist_ok=True)
        (root / "cond").mkdir(exist_ok=True)

    @property
    def next_line(self) -> int:
        return len(self.lines) + 1

    def raw(self, line: str) -> int:
        self.lines.append(line)
        return len(self.lines)

    def entry(self, uid: str, text: str, *, codes: np.ndarray | None = None, codes_file: str | None = None,
              cond: np.ndarray | None = None, speaker: str | None = None, duration: float | None = None,
              **extra: object) -> int:
        line = self.next_line
        if codes is None:
            codes = ((np.arange(8 + 2 * len(text)) * 7 + 31 * line) % 256).astype(np.int16)
        if codes_file is None:
            codes_file = f"codes/{uid}_{line}.npy"
            np.save(self.root / codes_file, codes)
        cond_file = f"cond/{uid}_{line}.npy"
        np.save(self.root / cond_file, np.zeros((100, 40), np.float32) if cond is None else cond)
        if duration is None and codes.ndim == 1 and codes.dtype.kind in "iu":
            duration = round(len(codes) * SECONDS_PER_CODE, 3)
        obj = {"id": uid, "text": text, "codes": codes_file, "cond_mel": cond_file,
               "speaker": speaker or SPEAKERS[line % 3], "language": "am", "duration": duration, **extra}
        return self.raw(json.dumps({k: v for k, v in obj.items() if v is not None}, ensure_ascii=False))

    def write(self, extra_bytes: bytes = b"") -> Path:
        self.path.write_bytes(("\n".join(self.lines) + "\n").encode("utf-8") + extra_bytes)
        return self.path


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = yaml.safe_load((FIXTURES / "tiny_config.yaml").read_text(encoding="utf-8"))
    config["gpt"]["max_text_tokens"] = MAX_TEXT_TOKENS
    config["gpt"]["max_mel_tokens"] = MAX_MEL_TOKENS
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer_path(demo_workspace) -> Path:
    return demo_workspace.extended_tokenizer


def good_sentences() -> list[str]:
    return ["ሰላም ዓለም", "አዲስ አበባ ከተማ", "ቋንቋ መማር ጥሩ ነው", "ዛሬ ውሃ ጠጣሁ", "ነገ ትምህርት ቤት እሄዳለሁ",
            "መጽሐፍ አነበብኩ", "ሰዓቱ ደርሷል", "ፋይሉን አስቀምጥ", "መስኮቱን ዝጋ", "ገጹን ክፈት"]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[tuple[str, str], str]]:
    """A train and a val manifest with one of each defect; returns {(file:line, code): severity}."""
    root = tmp_path_factory.mktemp("seeded")
    train = DataBuilder(root, "train.jsonl")
    val = DataBuilder(root, "val.jsonl")
    expected: dict[tuple[str, str], str] = {}

    def expect(builder: DataBuilder, line: int, code: str, severity: str = "error") -> None:
        expected[(f"{builder.path}:{line}", code)] = severity

    sentences = good_sentences()
    for k, sentence in enumerate(sentences[:6]):
        train.entry(f"good{k}", sentence)
    shared_codes = np.arange(40, dtype=np.int16) + 7
    first_shared = train.entry("shared_codes_a", "የመጀመሪያው ድምፅ", codes=shared_codes)

    expect(train, train.raw('{"id": "broken", "text": "ሰላም'), "malformed-json")
    expect(train, train.raw('["not", "an", "object"]'), "not-an-object")
    expect(train, train.raw('{"id": "nocodes", "text": "ሰላም", "cond_mel": "cond/x.npy"}'), "missing-field")
    expect(train, train.raw('{"id": "numtext", "text": 5, "codes": "c.npy", "cond_mel": "m.npy"}'), "wrong-type")
    expect(train, train.raw('{"id": "blank", "text": "   ", "codes": "c.npy", "cond_mel": "m.npy"}'), "empty-field")
    expect(train, train.entry("missing_codes", "የጠፋ ፋይል", codes_file="codes/nowhere.npy", duration=1.0),
           "file-missing")
    (root / "codes" / "garbage.npy").write_bytes(b"\x93NUMPY garbage")
    expect(train, train.entry("garbage_codes", "የተበላሸ ፋይል", codes_file="codes/garbage.npy", duration=1.0),
           "file-unreadable")
    expect(train, train.entry("float_codes", "ተንሳፋፊ ቁጥሮች", codes=np.zeros(30, np.float32), duration=1.28),
           "codes-dtype")
    expect(train, train.entry("matrix_codes", "ሁለት ልኬት", codes=np.zeros((1, 30), np.int32), duration=1.28),
           "codes-shape")
    expect(train, train.entry("stop_codes", "የማቆሚያ ምልክት", codes=np.array([5, 6, 7] * 10 + [8193], np.int32)),
           "codes-range")
    expect(train, train.entry("big_codes", "ትልቅ ቁጥሮች", codes=np.array([5, 9000] * 15, np.int32)), "codes-range")
    expect(train, train.entry("bad_cond", "የተሳሳተ ቅርፅ", cond=np.zeros((80, 40), np.float32)), "cond-mel-shape")
    expect(train, train.entry("int_cond", "ኢንቲጀር መል", cond=np.zeros((100, 40), np.int16)), "cond-mel-dtype")
    long_text = " ".join(["ሰላም", "ዓለም", "አዲስ", "አበባ", "ከተማ", "ቋንቋ", "መማር", "ጥሩ", "ነው"] * 3)
    expect(train, train.entry("long_text", long_text, codes=np.arange(95, dtype=np.int16)), "text-too-long")
    expect(train, train.entry("long_codes", "ረጅም ድምፅ", codes=np.arange(120, dtype=np.int16)), "codes-too-long")
    expect(train, train.entry("english", "Good morning, friends", codes=np.arange(70, dtype=np.int16)),
           "wrong-language", "warning")
    expect(train, train.entry("greek", "ሰላም ΩΨ ዓለም ጤና ይስጥልኝ"), "unknown-tokens", "warning")
    expect(train, train.entry("good0", "ሌላ ዓረፍተ ነገር"), "duplicate-id")
    expect(train, train.entry("same_text", sentences[1].upper() + " ።"), "duplicate-text", "warning")
    expect(train, train.entry("shared_codes_b", "ሁለተኛው ድምፅ", codes=shared_codes), "duplicate-codes", "warning")
    expect(train, train.entry("tiny", "አዎ", codes=np.arange(4, dtype=np.int16)), "very-short", "warning")
    expect(train, train.entry("rushed", "በጣም ብዙ ቃላት በጣም ትንሽ ጊዜ ውስጥ የተነገሩ", codes=np.arange(16, dtype=np.int16)),
           "text-audio-mismatch", "warning")
    train.raw("")  # a blank line is not an entry and not a problem
    not_utf8_line = train.next_line
    train.write(extra_bytes=b'{"id": "latin1", "text": "caf\xe9"}\n')
    expect(train, not_utf8_line, "not-utf8")

    for k, sentence in enumerate(sentences[6:8]):
        val.entry(f"val_good{k}", sentence)
    expect(val, val.entry("good1", "ፍጹም አዲስ ዓረፍተ ነገር"), "val-leak-id")
    expect(val, val.entry("val_same_text", sentences[2]), "val-leak-text", "warning")
    expect(val, val.entry("val_same_codes", "ሌላ ጽሑፍ ግን ያው ድምፅ", codes=shared_codes), "val-leak-codes")
    val.write()
    assert first_shared == 7
    return train.path, val.path, expected


def found_problems(report) -> dict[tuple[str, str], str]:
    return {(p.where, p.code): p.severity for p in report.errors + report.warnings}


def test_every_seeded_defect_is_reported_at_its_line(seeded, tokenizer_path: Path, config_path: Path) -> None:
    train, val, expected = seeded
    report = check_manifests([train], [val], tokenizer=tokenizer_path, config=config_path, language="am", workers=1)
    assert found_problems(report) == expected
    assert report.verdict == "errors"
    assert report.exit_code == 1
    assert report.leakage == {"ids": 1, "texts": 1, "codes": 1}
    assert report.train.duplicate_ids == 1 and report.train.duplicate_texts == 1
    # Both entries after the first shared one repeat its codes; only the train one is a duplicate.
    assert report.train.duplicate_codes == 1
    stop = next(p for p in report.errors if p.code == "codes-range" and "stop_codes" in p.message)
    assert "start/stop ids" in stop.message
    unknown = {u.char for u in report.train.unknown_chars}
    assert unknown == {"Ω", "Ψ"}
    assert report.train.unknown_rate is not None and 0 < report.train.unknown_rate < 0.1
    assert report.train.lines_not_expected_language == 1
    assert report.train.speaker_count == 3
    json.dumps(report.to_json())  # plain data all the way down


def test_parallel_chunks_give_the_same_report(seeded, tokenizer_path: Path, config_path: Path) -> None:
    train, val, _expected = seeded
    serial = check_manifests([train], [val], tokenizer=tokenizer_path, config=config_path, language="am", workers=1)
    parallel = check_manifests([train], [val], tokenizer=tokenizer_path, config=config_path, language="am",
                               workers=2, chunk_bytes=700)
    assert parallel.settings["workers"] == 2

    def comparable(report) -> dict:
        data = report.to_json()
        for key in ("elapsed_s", "lines_per_s", "settings"):
            data.pop(key)
        return data

    assert comparable(parallel) == comparable(serial)


def test_without_file_checks_files_are_not_read(seeded, config_path: Path) -> None:
    train, val, _expected = seeded
    report = check_manifests([train], [val], config=config_path, language="am", workers=1, check_files=False)
    codes = {code for (_where, code) in found_problems(report)}
    assert not codes & {"file-missing", "file-unreadable", "codes-dtype", "codes-range", "cond-mel-shape"}
    # Lengths are then estimated from durations; structure and duplicates are still checked.
    assert {"malformed-json", "codes-too-long", "duplicate-id", "val-leak-id", "val-leak-text"} <= codes
    assert report.train.codes_lengths is None


def test_clean_data_is_clean(tmp_path: Path, tokenizer_path: Path, config_path: Path) -> None:
    train = DataBuilder(tmp_path, "train.jsonl")
    val = DataBuilder(tmp_path, "val.jsonl")
    for k, sentence in enumerate(good_sentences()[:8]):
        train.entry(f"t{k}", sentence)
    for k, sentence in enumerate(good_sentences()[8:]):
        val.entry(f"v{k}", sentence)
    report = check_manifests([train.write()], [val.write()], tokenizer=tokenizer_path, config=config_path,
                             language="am")
    assert report.errors == [] and report.warnings == []
    assert report.verdict == "clean" and report.exit_code == 0
    assert report.train.entries == 8 and report.val.entries == 2
    assert report.train.script_shares["ethiopic"] == 1.0
    assert report.train.durations_s.histogram is not None
    assert sum(report.train.durations_s.histogram.counts) == 8
    assert report.train.text_tokens is not None and report.train.text_tokens.max <= MAX_TEXT_TOKENS


def test_speaker_diversity_warnings(tmp_path: Path) -> None:
    single = DataBuilder(tmp_path, "single.jsonl")
    for k, sentence in enumerate(good_sentences()[:4]):
        single.entry(f"s{k}", sentence, speaker="only_one")
    report = check_manifests([single.write()], workers=1)
    assert [p.code for p in report.warnings] == ["single-speaker"]

    anonymous = DataBuilder(tmp_path, "anonymous.jsonl")
    for k, sentence in enumerate(good_sentences()[:4]):
        anonymous.entry(f"a{k}", sentence, speaker="x")
    anonymous.lines = [json.dumps({k: v for k, v in json.loads(line).items() if k != "speaker"}, ensure_ascii=False)
                       for line in anonymous.lines]
    report = check_manifests([anonymous.write()], workers=1)
    assert [p.code for p in report.warnings] == ["no-speakers"]


def test_empty_manifest_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    report = check_manifests([empty])
    blank = "only blank lines: a manifest is UTF-8 JSON lines, one object per line"
    assert [(p.code, p.where, p.message) for p in report.errors] == [("not-a-training-manifest", str(empty), blank)]
    assert main(["--manifest", str(empty), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert f"{empty}: {blank}" in out
    assert "verdict: ERRORS" in out


def test_cli_exit_codes_and_json(seeded, tmp_path: Path, tokenizer_path: Path, config_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    train, val, expected = seeded
    out_json = tmp_path / "report.json"
    code = main(["--manifest", str(train), "--val-manifest", str(val), "--tokenizer", str(tokenizer_path),
                 "--config", str(config_path), "--language", "am", "--json", str(out_json), "--workers", "1",
                 "--quiet"])
    assert code == 1
    stdout = capsys.readouterr().out
    assert "verdict: ERRORS" in stdout
    assert f"{train}:8: malformed JSON" in stdout
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["verdict"] == "errors" and data["exit_code"] == 1
    assert {(p["where"], p["code"]) for p in data["errors"] + data["warnings"]} == set(expected)

    assert main(["--manifest", str(tmp_path / "missing.jsonl"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'missing.jsonl'}: manifest not found"
    assert main(["--manifest", str(train), "--language", "xx", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("error: --language xx: no script known")
    with pytest.raises(CheckUsageError, match="config file not found"):
        check_manifests([train], config=tmp_path / "nope.yaml")


def test_cli_usage_error_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "data_tools.check_data", "--bogus"], capture_output=True,
                            text=True, timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")


def test_text_keys_ignore_case_punctuation_and_spacing() -> None:
    assert text_key("  ሰላም፡ ዓለም። ") == text_key("ሰላም ዓለም") == "ሰላም ዓለም"
    assert text_key("Hello, World!") == text_key("hello   world") == "hello world"
    assert text_key("e\u0301") == text_key("é")  # NFC
    assert text_key("ab") != text_key("a b")
    texts = ["ሰላም ዓለም።", "ሰላም ዓለም", "Hello, World!", "hello world", "!!!", "a b", "ab"]
    hashes = TextBatch(texts).key_hashes().tolist()
    assert hashes[0] == hashes[1] and hashes[2] == hashes[3]
    assert hashes[4] == 0  # nothing to compare
    assert len({hashes[0], hashes[2], hashes[5], hashes[6]}) == 4


def test_vectorised_script_counts_match_the_front_end() -> None:
    from data_tools.text import script_counts

    texts = ["ሰላም Hello 漢字 ፩፪ 123 ...", "", "ΩΨ", "\"ገጽ \" & #PAGENUMBER#"]
    counts = TextBatch(texts).script_counts()  # (texts, 4): none, ethiopic, latin, other
    for text, row in zip(texts, counts.tolist()):
        expected = script_counts(text)
        assert row[1:] == [expected["ethiopic"], expected["latin"], expected["other"]]


def test_whole_chunk_read_matches_the_line_by_line_reader(tmp_path: Path) -> None:
    """The one-read split of a chunk gives exactly the bounded reader's lines and byte count."""
    from data_tools.check_records import ChunkTask
    from data_tools.chunk_lines import read_lines, read_lines_bounded
    from data_tools.manifest import MAX_LINE_BYTES

    good = '{"id": "a", "text": "ሰላም"}'.encode()
    cases = {
        "plain": good + b"\n" + good + b"\n",
        "no-final-newline": good + b"\n" + good,
        "empty": b"",
        "blank-lines": b"\n\n" + good + b"\n\n",
        "crlf": good + b"\r\n" + good + b"\r\n",
        "bad-utf8": good + b"\n\xff\xfe broken\n" + good + b"\n\xe1\x88\n",
        "separators": "{\"text\": \"a\u2028b\u0085c\x0bd\"}\n".encode(),
        "too-long": good + b"\n" + b"x" * (MAX_LINE_BYTES + 5) + b"\n" + good + b"\n",
        "exactly-limit": b"y" * (MAX_LINE_BYTES - 1) + b"\n" + b"z" * MAX_LINE_BYTES,
        "too-long-bad-utf8": b"\xff" * (MAX_LINE_BYTES + 1) + b"\n" + good,
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        for start, end in ((0, len(data)), (0, len(data) // 2), (len(data) // 3, len(data))):
            task = ChunkTask(str(path), 0, start, end)
            assert read_lines(task) == read_lines_bounded(task), (name, start, end)


@pytest.mark.parametrize("line", [
    '{"id": "u1", "text": "hi there", "codes": "c.npy", "cond_mel": "m.npy", "duration": 2.5}',
    '{"id": "u1", "text": "hi there", "codes": "c.npy", "cond_mel": "m.npy", "duration": 2}',
    ' {"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy"}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy"} \r',
    '\ufeff{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy"}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy"} {}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy"}]',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "duration": NaN}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "duration": Infinity}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "duration": -0.0}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "duration": 86400.5}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "duration": true}',
    '{"id": "u1", "text": "hi", "codes": "~/c.npy", "cond_mel": " ", "cond_audio": "a.wav"}',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": 3}',
    '[1, 2]',
    '"text"',
    '',
    '   ',
    '{"id": "u1", "text": "hi", "codes": "c.npy", "cond_mel": "m.npy", "id": 5}',
    '[' * 100000,
])
def test_fast_parse_path_gives_what_json_loads_gives(tmp_path: Path, line: str) -> None:
    """The scanner shortcut takes a line only when json.loads would give the same value."""
    from data_tools import check_lines

    fast_problems: list = []
    fast = check_lines.parse_lines([line], tmp_path / "m.jsonl", fast_problems)
    slow_problems: list = []
    scan = check_lines._SCAN_ONCE
    try:
        check_lines._SCAN_ONCE = _refuse
        slow = check_lines.parse_lines([line], tmp_path / "m.jsonl", slow_problems)
    finally:
        check_lines._SCAN_ONCE = scan
    assert (fast, fast_problems) == (slow, slow_problems)


def _refuse(_text: str, _index: int) -> tuple:
    raise StopIteration(0)


def test_string_hashes_are_blake2b_of_the_utf8() -> None:
    """Path and key hashes stay blake2b-64 of the UTF-8 (lone surrogates passed), whatever the shortcut."""
    import hashlib

    from data_tools.check_chunks import _hash_strings

    keys = ["codes/a.npy", "", "ሰላም/ፋይል.npy", "\ud800x", "codes/a.npy"]
    expected = [int.from_bytes(hashlib.blake2b(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
                for k in keys]
    assert _hash_strings(keys).tolist() == expected
    assert _hash_strings([]).dtype == np.uint64 and _hash_strings([]).size == 0
