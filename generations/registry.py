"""The one list of IndexTTS generations, and the one function that answers "which generation is this?".

``GENERATIONS`` holds an entry (``generations.spec.Generation``) per generation, most specific first;
``generation_of_config`` / ``generation_of_checkpoint`` / ``generation_of_folder`` ask each entry's
recogniser in that order (the shipped recognisers are ``networks.generation_rule``'s). ``register`` adds an
entry in front (tests register a toy generation this way); ``unregister`` takes it away again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from generations.demo_facts import DemoFacts
from generations.format_facts import ManifestFormat, unique
from generations.indextts2 import INDEXTTS2
from generations.indextts15 import INDEXTTS15
from generations.indextts25 import INDEXTTS25
from generations.spec import Capability, Generation
from networks.generation_rule import gpt_section

GENERATIONS: list[Generation] = [INDEXTTS25, INDEXTTS2, INDEXTTS15]
CAPABILITIES: tuple[Capability, ...] = tuple(Capability)


def oldest_first() -> list[Generation]:
    """The registry's entries, oldest generation first: the order every list the studio shows follows."""
    return list(reversed(GENERATIONS))


def generation_ids() -> tuple[str, ...]:
    """The choice list of generations (ids, oldest first), e.g. for the form and the Test tab."""
    return tuple(entry.id for entry in oldest_first())


def generation_names() -> dict[str, str]:
    """id -> the name the studio shows."""
    return {entry.id: entry.name for entry in oldest_first()}


def by_id(ident: str) -> Generation:
    """The entry of generation ``ident``; KeyError (naming the known ids) for an unknown one."""
    for entry in GENERATIONS:
        if entry.id == ident:
            return entry
    raise KeyError(f"no IndexTTS generation {ident!r} (known: {', '.join(generation_ids())})")


def name_of(ident: str | None, unknown: str = "?") -> str:
    """The studio name of generation ``ident`` (``unknown`` where there is none)."""
    try:
        return by_id(str(ident)).name
    except KeyError:
        return unknown


def generation_of_config(config: Mapping[str, Any] | None, state_keys: Iterable[str] = ()) -> Generation:
    """The generation a config (whole, or its gpt section) and optionally a state dict's keys describe."""
    keys = list(state_keys)
    for entry in GENERATIONS:
        if entry.is_config(config, keys):
            return entry
    raise LookupError("no generation recognises this config")  # the oldest entry recognises anything


def generation_of_checkpoint(ckpt: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> Generation:
    """The generation of a checkpoint: its recorded model config where it has one, and its weights' keys."""
    config = ckpt.get("model_config") if isinstance(ckpt.get("model_config"), Mapping) else None
    return generation_of_config(config, list(state or {}))


def generation_of_model(model: Any) -> Generation:
    """The generation whose GPT class ``model`` is (entries asked most specific first, as for configs)."""
    for entry in GENERATIONS:
        if entry.model.owns(model):
            return entry
    raise LookupError(f"no generation builds a {type(model).__name__}")


def build_gpt(config: Mapping[str, Any]) -> Any:
    """The GPT a config (whole, or its gpt section) describes, built by its generation, freshly initialised
    (under ``torch.device("meta")``: shapes and names only)."""
    return generation_of_config(config).model.build(gpt_section(config))


def saved_model_config(model: Any) -> dict[str, Any]:
    """The gpt section a checkpoint records for ``model``, as its generation says."""
    return generation_of_model(model).model.saved_config(model)


def generation_of_folder(folder: str | Path) -> Generation | None:
    """The generation of a download folder (its config.yaml and files); None where no entry reads folders."""
    for entry in GENERATIONS:
        if entry.recognises_folder is not None and entry.recognises_folder(Path(folder)):
            return entry
    return None


def formats() -> list[ManifestFormat]:
    """Every generation's manifest format, newest generation first, each once."""
    return unique(entry.manifest_format for entry in GENERATIONS)


def format_of(ident: str) -> ManifestFormat:
    """The manifest format ``ident`` (a ``ManifestFormat.id``); KeyError (naming the known ids) for an unknown one."""
    for found in formats():
        if found.id == ident:
            return found
    raise KeyError(f"no manifest format {ident!r} (known: {', '.join(known.id for known in formats())})")


def format_of_line(obj: Mapping[str, Any]) -> ManifestFormat | None:
    """The format one manifest line (its JSON object) is of: the first format, newest generation first, whose
    marking fields it has; None when it has none (the one recognition rule for lines)."""
    for entry in GENERATIONS:  # per line: no list built, no facet hashed
        if entry.manifest_format.recognises(obj):
            return entry.manifest_format
    return None


def default_format() -> ManifestFormat:
    """The format a manifest is read as when no line names any format's marking field: the oldest generation's
    (its line parser then says what each line lacks)."""
    return oldest_first()[0].manifest_format


def generation_of_format(ident: str) -> Generation:
    """The (newest) generation that trains on manifests of format ``ident``; KeyError for none."""
    for entry in GENERATIONS:
        if entry.manifest_format.id == ident:
            return entry
    raise KeyError(f"no generation trains on manifest format {ident!r}")


DEMO_CHECKPOINTS = "checkpoints"  # under a demo's folder: its base model (download) folder
DEMO_RUNS = "runs"  # under a demo's folder: its training output folders


def demo_folders(leaf: str = "") -> tuple[str, ...]:
    """Each generation's demo folder in a demo workspace, oldest generation first, with ``leaf`` joined on, as
    relative POSIX paths ("" is the workspace itself): ``demo_folders(DEMO_RUNS)`` -> ``("runs", "v2/runs", ...)``."""
    folders = (entry.demo_folder for entry in oldest_first() if entry.demo_folder is not None)
    return tuple(dict.fromkeys("/".join(part for part in (folder, leaf) if part) for folder in folders))


def demo_paths(workspace: str | Path, leaf: str = "") -> list[Path]:
    """``demo_folders(leaf)`` under ``workspace``."""
    return [Path(workspace) / folder for folder in demo_folders(leaf)]


def demo_facets() -> list[DemoFacts]:
    """Each generation's demo facet (those with a demo folder), oldest generation first, each once (a renamed copy
    of an entry shares its demo)."""
    facets = (entry.demo for entry in oldest_first() if entry.demo is not None and entry.demo_folder is not None)
    return list(dict.fromkeys(facets))


def register(entry: Generation) -> None:
    """Add a generation in front of the list (its recogniser is asked first)."""
    if any(known.id == entry.id for known in GENERATIONS):
        raise ValueError(f"generation {entry.id!r} is already registered")
    GENERATIONS.insert(0, entry)


def unregister(ident: str) -> None:
    GENERATIONS[:] = [entry for entry in GENERATIONS if entry.id != ident]


SUPPORTED_CONDITION_TYPE = "conformer_perceiver"


def config_refusal(config: Mapping[str, Any], generation: Generation, where: str = "--config") -> str | None:
    """Why this studio cannot train the GPT ``config`` describes (None: it can); ``generation`` is its entry."""
    whole = isinstance(config.get("gpt"), Mapping)
    gpt = config["gpt"] if whole else config
    declared = str(config.get("version", "")).strip() if whole else ""
    own_rule = generation.model.config_refusal
    own = own_rule(gpt, where) if own_rule is not None else None
    if own:
        return own
    if declared and not any(declared.startswith(ident) for ident in generation_ids()):
        names = ", ".join(entry.name for entry in oldest_first())
        return f"{where} declares 'version: {declared}'; this studio trains {names} GPTs only"
    if str(gpt.get("condition_type", SUPPORTED_CONDITION_TYPE)) != SUPPORTED_CONDITION_TYPE:
        return (f"{where} uses gpt.condition_type '{gpt.get('condition_type')}'; this studio supports "
                f"'{SUPPORTED_CONDITION_TYPE}' only (the IndexTTS release configs)")
    if int(gpt.get("types", 1) or 1) != 1:
        return f"{where} sets gpt.types {gpt.get('types')}; this studio supports types 1 only"
    if bool(gpt.get("train_solo_embeddings", False)):
        return f"{where} sets gpt.train_solo_embeddings true; this studio supports the release setting false only"
    if gpt.get("use_mel_codes_as_input", True) is False:
        return f"{where} sets gpt.use_mel_codes_as_input false; this studio supports the release setting true only"
    return None
