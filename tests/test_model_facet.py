"""The model facet of each entry (issue 37): its GPT class, how it is built, what a save records of it.

Shared code builds a GPT through the registry (``build_gpt``) or the run's entry, and a save records the config
its entry's ``saved_config`` gives: recognising that config again names the same generation. No product module
outside generations/ and networks/ names a generation's GPT class.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from generations.registry import (
    build_gpt,
    by_id,
    generation_of_config,
    generation_of_model,
    saved_model_config,
)
from tests.layers import REPO
from tests.test_gpt_v25 import tiny_gpt as tiny_gpt_v25
from tests.test_model import TINY_GPT
from tests.test_model_v2 import TINY_GPT_V2
from trainer.vocab import frozen_text_rows

SPK_COND_MODE = "campplus"


def tiny_section(ident: str) -> dict[str, Any]:
    """A tiny gpt section of generation ``ident``, as a config describes it."""
    return {"1.5": lambda: copy.deepcopy(TINY_GPT), "2": lambda: copy.deepcopy(TINY_GPT_V2),
            "2.5": lambda: {**tiny_gpt_v25(), "spk_cond_mode": SPK_COND_MODE}}[ident]()


@pytest.mark.parametrize("ident", ["1.5", "2", "2.5"])
def test_each_entry_builds_its_own_class_and_its_saved_config_names_it_again(ident):
    entry = by_id(ident)
    torch.manual_seed(0)
    model = build_gpt(tiny_section(ident))
    assert type(model) is entry.model.gpt_type() and generation_of_model(model) is entry
    saved = saved_model_config(model)
    assert saved == entry.model.saved_config(model) and generation_of_config(saved) is entry
    rebuilt = build_gpt(saved)  # a resume builds the same network from the recorded config
    assert type(rebuilt) is type(model) and rebuilt.state_dict().keys() == model.state_dict().keys()


def test_a_whole_config_is_built_by_the_generation_it_declares():
    with torch.device("meta"):
        model = build_gpt({"version": 2.5, "gpt": tiny_gpt_v25()})
    assert generation_of_model(model) is by_id("2.5")


def test_a_model_no_entry_builds_is_a_lookup_error():
    with pytest.raises(LookupError, match="no generation builds a Linear"):
        generation_of_model(torch.nn.Linear(2, 2))


def test_only_the_s2mel_generations_speak_through_an_s2mel():
    assert {ident: by_id(ident).model.latent_decoder for ident in ("1.5", "2", "2.5")} == {
        "1.5": "BigVGAN", "2": "S2Mel", "2.5": "S2Mel"}


def test_the_s2mel_pipeline_refuses_a_bigvgan_gpt_by_its_entry():
    from types import SimpleNamespace

    from trainer.synthesis.errors import SynthesisError
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer

    with torch.device("meta"):
        model = build_gpt(tiny_section("1.5"))
    with pytest.raises(SynthesisError, match=r"an IndexTTS-1\.5 GPT's are spoken by BigVGAN"):
        S2MelSynthesizer(SimpleNamespace(gpt=model))  # type: ignore[arg-type]
    with pytest.raises(SynthesisError, match="needs an IndexTTS GPT, got NoneType"):
        S2MelSynthesizer(SimpleNamespace(gpt=None))  # type: ignore[arg-type]


def test_frozen_rows_follow_the_entry():
    gpt = {"number_text_tokens": 120}
    assert frozen_text_rows(gpt, 100, by_id("1.5").model.appends_text_rows) == (100, 120)
    assert frozen_text_rows(gpt, 100, by_id("2.5").model.appends_text_rows) == (101, None)


GPT_CLASSES = {"UnifiedVoice", "UnifiedVoiceV2", "UnifiedVoiceV25"}
SHARED = ("trainer", "webui", "demo", "data_tools")


def _class_uses(path: Path, root: Path = REPO) -> list[str]:
    """'path:line name' for each isinstance/issubclass call on a GPT class and each import of V2/V25 classes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("isinstance", "issubclass"):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            found += [f"{path.relative_to(root).as_posix()}:{node.lineno} {name}" for name in sorted(names & GPT_CLASSES)]
        if isinstance(node, ast.ImportFrom):
            found += [f"{path.relative_to(root).as_posix()}:{node.lineno} {alias.name}" for alias in node.names
                      if alias.name in GPT_CLASSES - {"UnifiedVoice"}]
    return found


def test_no_shared_module_picks_code_by_a_gpt_class():
    uses = [use for package in SHARED for path in sorted((REPO / package).rglob("*.py")) for use in _class_uses(path)]
    assert uses == [], "ask the entry (generations.registry.generation_of_model / build_gpt): " + "; ".join(uses)


def test_the_class_check_finds_a_planted_use(tmp_path):
    path = tmp_path / "trainer" / "planted.py"
    path.parent.mkdir()
    path.write_text("from networks.unified_voice import UnifiedVoiceV2\n\n\ndef f(m):\n"
                    "    return isinstance(m, UnifiedVoiceV2)\n", encoding="utf-8")
    assert _class_uses(path, tmp_path) == ["trainer/planted.py:1 UnifiedVoiceV2", "trainer/planted.py:5 UnifiedVoiceV2"]
