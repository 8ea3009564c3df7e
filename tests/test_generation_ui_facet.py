"""A generation brings its own web-UI pieces through its entry's ``ui`` facet (issue 37): registered from the tests
alone, a toy generation's preparation section joins the Data tab's list and the Test tab marks its runs' text
with its own coverage rule, chosen by the entry that reads the run's tokenizer file; no hub file names it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from generations.registry import by_id, register, unregister
from generations.spec import Generation
from generations.ui_facts import UiFacts
from webui.data.prepare_section import CONFIG_FIELD, PrepareSection
from webui.data.tab_data import prepare_sections
from webui.testing import text_coverage

TABLE_SUFFIX = ".toytable"
SECTION = PrepareSection(generation="IndexTTS-Toy", prefix="preptoy", job="prepare_toy", heading="### Toy",
                         model_rows=((CONFIG_FIELD,),), default_form=lambda workspace, project=None: None,
                         generation_id="toy")
asked: list[tuple[Any, ...]] = []


def toy_marks(options: dict[str, Any], table: Any, base_size: int, manifests: Any, text: str) -> Any:
    asked.append((options["tokenizer"], table[0], base_size, len(manifests), text))
    return list(text), [1], [text[1]]


@pytest.fixture
def toy() -> Iterator[Generation]:
    entry = by_id("1.5").renamed(id="toy", name="IndexTTS-Toy",
                                 reads_tokenizer=lambda path: path.endswith(TABLE_SUFFIX),
                                 ui=UiFacts(prepare_section=lambda: SECTION, coverage_marks=toy_marks))
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.id)


def test_the_data_tab_lists_each_generations_own_section_oldest_first(toy) -> None:
    assert [section.prefix for section in prepare_sections()] == ["prep2", "prep25", "preptoy"]


def test_the_test_tab_marks_a_run_with_the_rule_of_the_generation_reading_its_tokenizer(toy, tmp_path: Path):
    table = tmp_path / f"words{TABLE_SUFFIX}"
    table.write_text("toy table", encoding="utf-8")
    manifest = tmp_path / "train.jsonl"
    manifest.write_text('{"text": "ab"}\n', encoding="utf-8")
    options = {"tokenizer": str(table), "train_manifest": [str(manifest)]}
    (tmp_path / "train_config.yaml").write_text(yaml.safe_dump(options), encoding="utf-8")
    checkpoint = tmp_path / "latest.pth"
    torch.save({"base_vocab_size": 7}, checkpoint)
    asked.clear()
    assert text_coverage.untrained_marks(checkpoint, table, "xy") == ("x<mark>y</mark>", ["y"])
    assert asked == [(str(table), str(table), 7, 1, "xy")]
