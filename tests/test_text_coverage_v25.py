"""Token coverage for IndexTTS-2.5 (issue 38): the byte-level table extended with merges the demo data never uses.

The merges file is built here from the demo's own texts: the six two-byte starts of Ethiopic letters, two letters
no demo text has, and last a letter the demo texts use inside words (so the last appended id is reached: the one
a count that takes the table's spare row for an appended piece would miss). The pre-flight's count is checked
against the tokenizer's own encoding of the same texts, and the Test tab marks text that needs an untrained merge
or a letter the data never had.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml

from data_tools.text import script_letters
from data_tools.tokenizer.coverage import appended_ids, byte_chunks
from generations.indextts25.data.ethiopic_merges import FORMAT
from generations.indextts25.data.text_table import TextTable
from generations.indextts25.data.tiktoken_table import BASE_TEXT_ROWS, BASE_VOCAB_SIZE
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.indextts25.ui.text_coverage import manifest_texts
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight
from webui.testing import text_coverage
from webui.testing.model_spec import ModelSpec

LETTERS = script_letters("ethiopic")


@pytest.fixture(scope="module")
def ws(demo_workspace) -> DemoV25Paths:
    return DemoV25Paths.under(demo_workspace.root)


@pytest.fixture(scope="module")
def merges(ws, tmp_path_factory) -> tuple[Path, list[str], str]:
    """(the merges file, its two letters no demo text has, the used letter that comes last)."""
    texts = [text for text, _language in manifest_texts(ws.train_manifest, "am")]
    seen = set("".join(texts))
    inside = Counter(ch for text in texts for word in text.split() for ch in word[1:] if ch in LETTERS)
    used = inside.most_common(1)[0][0]
    unused = [ch for ch in LETTERS if ch not in seen][:2]
    assert len(unused) == 2, "the demo must leave some letters out for this test to mean anything"
    starts = sorted({ch.encode()[:2] for ch in LETTERS})
    tokens = [*starts, *(ch.encode() for ch in unused), used.encode()]
    path = tmp_path_factory.mktemp("merges") / "merges.json"
    path.write_text(json.dumps({"format": FORMAT, "added": [{"bytes": base64.b64encode(t).decode()} for t in tokens]}),
                    encoding="utf-8")
    return path, unused, used


def test_a_25_table_appends_after_its_spare_row_and_shows_whole_letters():
    assert appended_ids(BASE_VOCAB_SIZE, BASE_VOCAB_SIZE + 3, BASE_TEXT_ROWS - BASE_VOCAB_SIZE) == range(
        BASE_TEXT_ROWS, BASE_TEXT_ROWS + 3)
    parts = {1: b" \xe1", 2: b"\x88", 3: b"\xb0", 4: b"a"}
    assert byte_chunks([1, 2, 3, 4], parts.__getitem__) == [(" ሰ", [1, 2, 3]), ("a", [4])]


def test_the_preflight_counts_the_merges_the_demo_data_reaches(ws, merges, tmp_path):
    path, _unused, _used = merges
    tokenizer = TextTable(ws.tokenizer, scheme="merges", merges=path)
    appended = range(BASE_TEXT_ROWS, tokenizer.vocab_size)
    reached = {i for text, language in manifest_texts(ws.train_manifest, "am")
               for i in tokenizer.encode(text, language) if i in appended}
    assert appended[-1] in reached  # the last merge trains: a count from the spare row would lose it
    values = parse_argv([*ws.train_argv(max_steps=2), "--text-merges", str(path)])
    values["output_dir"] = str(tmp_path / "run")
    line = next(c for c in run_preflight(values).checks if c.name == "token coverage")
    assert line.message.startswith(f"{len(reached)} of {len(appended)} appended pieces occur in the ")
    assert line.warning == (len(reached) < len(appended))


def _run(tmp_path: Path, ws: DemoV25Paths, merges: Path) -> Path:
    run = tmp_path / "runs" / "am25"
    run.mkdir(parents=True)
    options = {"train_manifest": [f"{ws.train_manifest}::am"], "tokenizer": str(ws.tokenizer),
               "text_scheme": "merges", "text_merges": str(merges)}
    (run / "train_config.yaml").write_text(yaml.safe_dump(options), encoding="utf-8")
    torch.save({"base_vocab_size": BASE_VOCAB_SIZE, "step": 2}, run / "model_step2.pth")
    return run / "model_step2.pth"


def test_the_test_tab_marks_untrained_merges_and_unseen_letters(ws, merges, tmp_path, monkeypatch):
    path, unused, used = merges
    checkpoint = _run(tmp_path, ws, path)
    trained_word = next(text for text, _ in manifest_texts(ws.train_manifest, "am")).split()[0]
    assert text_coverage.untrained_marks(checkpoint, ws.tokenizer, trained_word) is None

    never = next(ch for ch in LETTERS if ch not in unused and ch not in "".join(
        text for text, _ in manifest_texts(ws.train_manifest, "am")))  # neither in the data nor a merge
    shown, names = text_coverage.untrained_marks(checkpoint, ws.tokenizer,
                                                 f"{trained_word} ሰ{unused[0]} ሰ{never}")
    assert names == [unused[0], never]  # an untrained merge (and unseen letter), then an unseen letter
    assert f"<mark>{unused[0]}</mark>" in shown and f"<mark>{never}</mark>" in shown
    assert used not in names

    def resolve(key: str, workspace: Path, vocoder: str | None) -> ModelSpec:
        return ModelSpec(label=key, checkpoint=Path(key), config=ws.config, tokenizer=ws.tokenizer, vocoder=None,
                         version="2.5")

    monkeypatch.setattr(text_coverage, "resolve_model", resolve)
    line = text_coverage.coverage_html(ws.root, {"A": None, "B": str(checkpoint)}, None, f"ሰ{unused[1]}")
    assert 'data-side="B"' in line and 'data-untrained="1"' in line and "UNTRAINED PIECES" in line
