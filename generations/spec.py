"""What one IndexTTS generation is to the studio: a plain object of facts and functions (the registry's entry).

Modelled on torchtitan's ``TrainSpec``: hubs (the run plan, samples, synthesis, evaluation, export, the Test
tab, the training form, the data checker) ask an entry; they never compare version strings. A capability the
generation lacks is named in ``missing`` with the reason, and the run plan refuses it in one line
(``refusal``): "<name> cannot <capability>: <why>". No else branch decides for a generation.

An entry names its code with ``lazy("module", "function")``, as transformers' auto mapping names its classes:
the function's module is imported at the first call. So importing the registry imports none of the code it
points at, reading it (the Checkpoints tab, the form) builds no network, and no hub that asks the registry is
imported back by it (no import cycle: tests/test_import_cycles.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from generations.demo_facts import DemoFacts
from generations.export_facts import ExportFacts
from generations.format_facts import ManifestFormat
from generations.model_facts import ModelFacts
from generations.preset_facts import PresetFacts
from generations.s2mel_facts import S2MelFacts
from generations.speech_facts import SpeechFacts
from generations.ui_facts import UiFacts


class LazyFunction:
    """``module.name``, imported when first called; ``module`` and ``name`` say what it points at (the import-layer
    test reads them to check every entry's targets)."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.__name__ = self.__qualname__ = f"{module}.{name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lazy({self.module!r}, {self.name!r})"


def lazy(module: str, name: str) -> LazyFunction:
    """``module.name``, imported when first called."""
    return LazyFunction(module, name)


def resolved(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function a ``lazy`` reference names (imported now), or ``function`` itself: for calls in a hot loop."""
    if isinstance(function, LazyFunction):
        return getattr(importlib.import_module(function.module), function.name)
    return function


class Capability(StrEnum):
    TRAIN = "train"
    RESUME = "resume"
    LORA = "train LoRA adapters"
    SAMPLES = "make samples at saves"
    SYNTHESIZE = "synthesize"
    EVALUATE = "evaluate at saves"
    EXPORT = "export"
    PREPARE = "prepare from audio"
    DEMO = "build a demo"
    TRAIN_S2MEL = "train the S2Mel decoder"


@dataclass(frozen=True)
class FormFacts:
    """What the training form shows for this generation."""

    manifest_kind: str  # the data it trains on, as the form names it
    not_for: str  # the sentence under an option that does nothing for this generation
    options: frozenset[str] = frozenset()  # generation-only options that apply (e.g. the text scheme)
    sample_options: frozenset[str] = frozenset()  # which sample fields speak its samples at saves
    demo_preset: str = ""  # the form's preset whose hyper-parameters a project of this generation starts with


@dataclass(frozen=True)
class TestFacts:
    """How the Test tab speaks this generation's models."""

    folder_problem: Callable[[Path, str | None], str | None] | None = None  # (folder, w2v-BERT) -> why not; None:
    # it speaks through a config + vocoder, not a download folder
    w2v_bert_places: tuple[str, ...] = ()  # where in its folder a w2v-BERT may sit
    folder_table: str | None = None  # its tokenizer's file in the download folder (None: the config's bpe_model)

    @property
    def speaks_through_folder(self) -> bool:
        return self.folder_problem is not None


@dataclass(frozen=True)
class Generation:
    """One IndexTTS generation: every fact and function a hub needs to ask about it."""

    id: str  # the config's version ("1.5", "2", "2.5"); a key, never compared outside the registry
    name: str  # what the studio shows, e.g. "IndexTTS-1.5"
    prompt: str  # what the speaker prompt is in its data
    recognises: Callable[..., bool]  # (config or gpt section, state keys) -> is this generation
    recognises_folder: Callable[[Path], bool] | None  # a download folder of this generation (None: none)
    codes_per_second: float  # its audio codes per second of speech
    manifest_format: ManifestFormat  # the manifests it trains on (generations/<gen>/data/format.py)
    format_hint: str  # the fields of that format, for the sentence that refuses another one
    tokenizer_kind: str  # what kind of file its --tokenizer is, e.g. "a SentencePiece model"
    tokenizer_file: str  # which file its text table is, in words
    config_hint: str  # how a config says it is this generation
    reads_tokenizer: Callable[[str], bool]  # whether a --tokenizer path is this generation's kind of file
    open_tokenizer: Callable[[dict[str, Any]], Any]  # opts -> tokenizer (raises UsageError, TokenizerError, ...)
    describe_tokenizer: Callable[[str, Any], str]
    target_gpt_config: Callable[[dict[str, Any], Any], dict[str, Any]]
    tokenizer_record: Callable[[dict[str, Any], Any], dict[str, Any]]
    start: Callable[..., Any]  # (opts, config, config_path, tokenizer, mmap) -> ModelStart
    rows_refusal: Callable[[int, Any, str], str | None]  # (model text tokens, tokenizer, source) -> why not
    demo_folder: str | None  # its demo's folder under a demo workspace ("": the workspace itself; None: it has no
    # demo). python -m demo builds every demo in one workspace, each through its entry's ``demo`` facet
    prepare: str | None  # the data_tools module (``python -m``) that prepares its data from audio
    form: FormFacts
    model: ModelFacts  # its GPT class, how it is built and trained, the model config a save records
    speech: SpeechFacts = field(default_factory=SpeechFacts)  # its samples at saves, evaluation and synthesis
    export: ExportFacts | None = None  # how its export folder is built and named (None: it cannot export)
    test: TestFacts = field(default_factory=TestFacts)
    data_note: Callable[[list[Any], Any], str] | None = None  # an extra data line for the pre-flight
    missing: Mapping[Capability, str] = field(default_factory=dict)  # capability -> why this generation lacks it
    s2mel: S2MelFacts | None = None  # how its S2Mel decoder trains (None: it has none)
    ui: UiFacts | None = None  # its own Data-tab section, Tokenizer-tab panel and Test-tab coverage rule
    demo: DemoFacts | None = None  # how its demo is built and what the studio takes from it (None: no demo)
    presets: PresetFacts | None = None  # the form's GPU presets for it (None: its demo preset only)
    # () -> its trainer.models.catalog.ModelSet: what it needs from the Hugging Face Hub (None: nothing listed)
    model_set: Callable[[], Any] | None = None

    def can(self, capability: Capability) -> bool:
        return capability not in self.missing

    def refusal(self, capability: Capability) -> str | None:
        """One line naming the generation and the capability it lacks; None where it has it."""
        why = self.missing.get(capability)
        return None if why is None else f"{self.name} cannot {capability.value}: {why}"

    def is_config(self, config: Mapping[str, Any] | None, state_keys: Iterable[str] = ()) -> bool:
        return bool(self.recognises(config, list(state_keys)))

    def renamed(self, **changes: Any) -> Generation:
        """A copy with other facts (tests register a toy generation this way)."""
        return replace(self, **changes)
