"""The entry is small facets (issue 37): a generation's registry entry keeps few top-level fields, and each facet
(form, model, speech, export, S2Mel, test, ui, demo, presets) is a frozen object of a few fields.

Hubs ask a facet (``entry.speech.sample_plan``, ``entry.export.name``, ``entry.s2mel.sources``); a generation
without a facet's code lacks the capability, and its entry says so in ``missing``.
"""

from __future__ import annotations

import dataclasses

import pytest

from generations.export_facts import ExportFacts
from generations.registry import GENERATIONS, by_id
from generations.s2mel_facts import S2MelFacts
from generations.spec import Capability, Generation
from generations.speech_facts import SpeechFacts
from tests.toy_generation import toy_entry

# Issue 37 aims at about 30; the data facet (the manifest format's fields) takes the entry there.
MAX_ENTRY_FIELDS = 32
MAX_FACET_FIELDS = 11
MOVED = ("sample_plan", "sample_speaker", "evaluation_speech", "evaluation_backend", "evaluation_needs_audio",
         "synthesize", "synthesis_options", "export_name", "exported_version", "model_folder_files", "s2mel_sources",
         "s2mel_gpt_latent", "config_refusal", "ddp_unused_parameters", "language_table", "training_prompt")


def _entries() -> list[Generation]:
    return [*GENERATIONS, toy_entry()]


def _facets(entry: Generation) -> dict[str, object]:
    return {item.name: getattr(entry, item.name) for item in dataclasses.fields(entry)
            if dataclasses.is_dataclass(getattr(entry, item.name))}


def test_the_entry_has_few_top_level_fields_and_none_of_the_moved_ones():
    names = [item.name for item in dataclasses.fields(Generation)]
    assert len(names) <= MAX_ENTRY_FIELDS, names
    assert not set(MOVED) & set(names)
    assert {"speech", "export", "s2mel"} <= set(names)


@pytest.mark.parametrize("entry", _entries(), ids=lambda entry: entry.id)
def test_each_facet_is_frozen_and_small(entry):
    facets = _facets(entry)
    assert {"form", "model", "speech", "test"} <= set(facets)
    for name, facet in facets.items():
        assert type(facet).__dataclass_params__.frozen, name  # type: ignore[attr-defined]
        assert len(dataclasses.fields(facet)) <= MAX_FACET_FIELDS, name


@pytest.mark.parametrize("version", ["1.5", "2", "2.5"])
def test_the_shipped_entries_speak_and_export_through_their_facets(version):
    entry = by_id(version)
    assert isinstance(entry.speech, SpeechFacts) and isinstance(entry.export, ExportFacts)
    speech = entry.speech
    assert None not in (speech.sample_plan, speech.sample_speaker, speech.evaluation_speech,
                        speech.evaluation_backend, speech.synthesize)
    assert entry.export.name and entry.export.version == float(entry.id)
    assert entry.export.folder_files is not None  # every export carries files of its base model folder
    assert (entry.s2mel is None) == (not entry.can(Capability.TRAIN_S2MEL))
    assert entry.s2mel is None or isinstance(entry.s2mel, S2MelFacts)


def test_the_facets_say_what_they_said_as_fields():
    v15, v2, v25 = by_id("1.5"), by_id("2"), by_id("2.5")
    assert [e.export.name for e in (v15, v2, v25) if e.export] == ["IndexTTS 1.5", "IndexTTS2", "IndexTTS-2.5"]
    assert not v15.speech.evaluation_needs_audio and v2.speech.evaluation_needs_audio
    assert v2.speech.synthesis_options == {"s2mel", "s2mel_strength"} and not v15.speech.synthesis_options
    assert "text_scheme" in v25.speech.synthesis_options
    assert v15.s2mel is None and v2.s2mel is not None and v25.s2mel is not None
    assert v2.s2mel.gpt_latent and not v25.s2mel.gpt_latent


def test_a_generation_without_speech_or_export_is_short_and_lacks_them():
    v15 = by_id("1.5")
    bare = v15.renamed(id="quiet", name="IndexTTS-Quiet", speech=SpeechFacts(), export=None,
                       missing={**v15.missing, **{cap: "quiet" for cap in (
                           Capability.SAMPLES, Capability.EVALUATE, Capability.SYNTHESIZE, Capability.EXPORT)}})
    assert bare.speech.sample_plan is None and bare.speech.synthesis_options == frozenset()
    assert bare.refusal(Capability.EXPORT) == "IndexTTS-Quiet cannot export: quiet"
    assert v15.speech.sample_plan is not None  # renamed copies; the shipped entry keeps its facets


def test_the_toy_renames_its_export_and_keeps_the_rest():
    toy, v15 = toy_entry(), by_id("1.5")
    assert toy.export is not None and v15.export is not None
    assert toy.export.name == "IndexTTS Toy"
    assert dataclasses.replace(toy.export, name=v15.export.name) == v15.export
    assert toy.speech == v15.speech


def test_the_model_facet_holds_how_the_gpt_trains():
    v15, v2, v25 = by_id("1.5"), by_id("2"), by_id("2.5")
    assert [e.model.ddp_unused_parameters for e in (v15, v2, v25)] == [False, True, True]
    assert [e.model.language_table for e in (v15, v2, v25)] == [False, False, True]
    assert all(e.model.training_prompt is not None for e in (v15, v2, v25, toy_entry()))
    assert v25.model.config_refusal is not None and v15.model.config_refusal is None


def test_a_folder_holding_a_file_any_generation_exports_is_refused_without_force(tmp_path):
    """The export's overwrite check lists every entry's own export files (2.5's table, its translit module), not
    a constant of one generation imported by the shared exporter."""
    from trainer.checkpoints.export import export_checkpoint
    from trainer.checkpoints.format import CheckpointError

    own = [name for entry in GENERATIONS if entry.export is not None for name in entry.export.bundle_files]
    assert "amharic_translit.py" in own
    out = tmp_path / "export"
    out.mkdir()
    (out / "amharic_translit.py").write_text("# a user's file\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"already holds amharic_translit\.py"):
        export_checkpoint(tmp_path / "missing.pth", out)
    assert (out / "amharic_translit.py").read_text(encoding="utf-8") == "# a user's file\n"
