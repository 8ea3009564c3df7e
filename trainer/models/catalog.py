"""What each model generation (and each suggested speech model) needs from the Hugging Face Hub, as data.

One :class:`ModelSet` per generation: the Hub repositories it draws on, the files of each, where they land
inside the ``--model-dir`` folder (upstream's own layout, the one its ``networks`` module reads), and each
repository's licence. Each generation's set sits in its folder (``generations/<name>/hub.py``) and its registry
entry names it (``model_set``); this module keeps the engine, the sources several generations share, and the
suggested speech models' sets. Nothing here downloads anything (``trainer.models.fetch`` does).

Sizes here are rough ("about", from the reference state-dict shapes in fp32 where known, else None): the
real size and checksum of every file come from the Hub when a set is listed or downloaded. Licences are as
remembered from the model pages unless ``licence_verified``; the Hub's own ``license`` tag is recorded at
download time beside the files (``hub_download.json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from data_tools.asr import SUGGESTED_AMHARIC_MODELS
from data_tools.speaker_similarity import SUGGESTED_SPEAKER_MODEL
from generations.registry import GENERATIONS

MB = 1_000_000
INDEXTTS_LICENCE = "bilibili IndexTTS model licence (the model page's LICENSE; read it before use)"


@dataclass(frozen=True)
class HubSource:
    """Files of one Hub repository and where they land in the model folder."""

    repo_id: str
    files: tuple[str, ...]  # required, as named in the repository
    subfolder: str = ""  # inside the model folder ('' = its root); the repository's own sub-paths are kept
    licence: str = "see the model page"
    licence_verified: bool = False  # False: from memory, not checked against the model card
    optional: tuple[str, ...] = ()  # fetched when the repository has them, never required
    weights: tuple[str, ...] = ()  # alternatives: the first the repository has is required (safetensors first)
    about_bytes: int | None = None  # rough total, shown only when the Hub cannot be asked
    revision: str = "main"

    def local_path(self, name: str) -> str:
        """A repository file's path relative to the model folder."""
        return f"{self.subfolder}/{name}" if self.subfolder else name


@dataclass(frozen=True)
class ModelSet:
    """Everything one generation (or one speech model) needs, fetched into one folder."""

    name: str  # the CLI's name for it
    title: str
    folder: str  # default folder under <workspace>/models/
    kind: str  # "generation" | "asr" | "speaker"
    sources: tuple[HubSource, ...]
    note: str = ""


W2V_BERT = HubSource("facebook/w2v-bert-2.0", ("config.json", "model.safetensors", "preprocessor_config.json"),
                     subfolder="w2v-bert-2.0", licence="MIT", about_bytes=2_323 * MB)
SEMANTIC_CODEC = HubSource("amphion/MaskGCT", ("semantic_codec/model.safetensors",),
                           licence="CC-BY-NC-4.0 (non-commercial)", about_bytes=177 * MB)
CAMPPLUS = HubSource("funasr/campplus", ("campplus_cn_common.bin",), licence="Apache-2.0", about_bytes=28 * MB)
BIGVGAN_V2 = HubSource("nvidia/bigvgan_v2_22khz_80band_256x", ("config.json", "bigvgan_generator.pt"),
                       subfolder="bigvgan", licence="MIT", about_bytes=449 * MB)

# transformers model folders: what from_pretrained reads (tokenizer/feature-extractor files where the model has them)
_TRANSFORMERS_FILES = ("config.json",)
_TRANSFORMERS_OPTIONAL = ("preprocessor_config.json", "tokenizer_config.json", "vocab.json",
                          "special_tokens_map.json", "added_tokens.json", "generation_config.json")
_TRANSFORMERS_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _speech_folder(model_id: str) -> str:
    return "speech/" + model_id.replace("/", "--")


def _asr_sets() -> tuple[ModelSet, ...]:
    sets = []
    for model in SUGGESTED_AMHARIC_MODELS:
        adapter = (f"adapter.{model.target_lang}.safetensors",) if model.target_lang else ()
        sets.append(ModelSet(
            model.model, model.model, _speech_folder(model.model), "asr",
            (HubSource(model.model, _TRANSFORMERS_FILES + adapter, licence=model.licence,
                       licence_verified=model.verified, optional=_TRANSFORMERS_OPTIONAL,
                       weights=_TRANSFORMERS_WEIGHTS),),
            note=model.note))
    return tuple(sets)


SPEECH_SETS: tuple[ModelSet, ...] = (*_asr_sets(), ModelSet(
    SUGGESTED_SPEAKER_MODEL, SUGGESTED_SPEAKER_MODEL, _speech_folder(SUGGESTED_SPEAKER_MODEL), "speaker",
    (HubSource(SUGGESTED_SPEAKER_MODEL, _TRANSFORMERS_FILES, licence="MIT (unverified)",
               optional=_TRANSFORMERS_OPTIONAL, weights=_TRANSFORMERS_WEIGHTS, about_bytes=380 * MB),),
    note="Speaker similarity for checkpoint scoring (x-vector head)."))



def generation_sets() -> tuple[ModelSet, ...]:
    """Each generation's set, as its registry entry names it (``model_set``), in the registry's order."""
    return tuple(entry.model_set() for entry in GENERATIONS if entry.model_set is not None)


def all_sets() -> tuple[ModelSet, ...]:
    """The catalogue: the generations' sets, then the suggested speech models'."""
    return generation_sets() + SPEECH_SETS


class UnknownSet(ValueError):
    """A set name that is not in the catalogue (one line listing the known names)."""


def model_set(name: str) -> ModelSet:
    """The set named ``name`` (a generation such as indextts-2, or a speech model id)."""
    known = all_sets()
    for entry in known:
        if entry.name == name:
            return entry
    raise UnknownSet(f"unknown model set {name!r}: expected one of {', '.join(s.name for s in known)}")
