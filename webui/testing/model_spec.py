"""The files behind a pick of the Test tab (``resolve_model``), and what they lack to speak (``ModelSpec.problem``).

A checkpoint of ours uses the tokenizer it records (``ckpt["tokenizer"]["path"]``) and the config its run was
trained with; the base model uses the config's ``dataset.bpe_model``; the vocoder is the config's
``bigvgan_checkpoint`` (IndexTTS-1.5). A generation that speaks through a download folder (IndexTTS2, 2.5) uses the
folder its config.yaml sits in; its registry entry's Test facts say which way it speaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from webui.testing.listen_models import (
    ADAPTER_OFF_PREFIX,
    BASE_PREFIX,
    W2V_BERT_HUB_ID,
    ListenError,
    beside,
    generation_id_of,
    generation_name,
    one_line,
    relative_to_root,
    run_config,
    test_facts,
    typed_path,
)


@dataclass(frozen=True)
class ModelSpec:
    """The files one side of the Test tab synthesizes with."""

    label: str
    checkpoint: Path
    config: Path
    tokenizer: Path | None
    vocoder: Path | None
    version: str  # the generation id (its registry entry says how it speaks)
    notes: tuple[str, ...] = ()
    model_dir: Path | None = None  # IndexTTS2 / IndexTTS-2.5: the download folder (the config's folder)
    adapter: bool = True  # False: a LoRA checkpoint's base weights alone
    s2mel: Path | None = None  # IndexTTS2 / 2.5: an S2Mel run checkpoint or adapter instead of the folder's s2mel.pth
    s2mel_strength: float = 1.0  # how much of ``s2mel`` applies (trainer.s2mel.strength): 0 base, 1 all

    @property
    def problem(self) -> str | None:
        """Why this model cannot be spoken with (None: it can)."""
        if self.tokenizer is None:
            return f"{self.label}: no tokenizer found (the checkpoint records none and the config names none)"
        if not self.tokenizer.is_file():
            return f"{self.label}: tokenizer not found: {self.tokenizer}"
        if test_facts(self.version).speaks_through_folder:
            return self._folder_problem()
        if self.vocoder is None:
            return (f"{self.label}: the config {self.config} names no bigvgan_checkpoint: give a vocoder "
                    "(bigvgan_generator.pth)")
        if not self.vocoder.is_file():
            return f"{self.label}: vocoder not found: {self.vocoder}"
        return None

    def _folder_problem(self) -> str | None:
        """Why the IndexTTS2 / 2.5 download folder cannot speak (a file or config key missing), cheaply."""
        if self.model_dir is None:
            return f"{self.label}: no {generation_name(self.version)} download folder"
        check = test_facts(self.version).folder_problem
        assert check is not None
        problem = check(self.model_dir, self.w2v_bert)
        return f"{self.label}: {problem}" if problem else None

    @property
    def w2v_bert(self) -> str | None:
        """None (the folder's w2v-bert-2.0/, for 2.5 also under hf_cache/) or the hub model id when it has none."""
        if self.model_dir is None:
            return None
        places = [self.model_dir / place for place in test_facts(self.version).w2v_bert_places]
        return None if any(place.is_dir() for place in places) else W2V_BERT_HUB_ID

    def describe(self, root: Path | None = None) -> str:
        """One line for the tab: which files (relative to ``root`` where inside it)."""
        def show(path: Path | None) -> str:
            return "-" if path is None else relative_to_root(path, root) if root is not None else str(path)

        parts = [f"checkpoint {show(self.checkpoint)}", f"tokenizer {show(self.tokenizer)}"]
        if test_facts(self.version).speaks_through_folder:
            parts += [f"{generation_name(self.version)} folder {show(self.model_dir)}"]
            parts += [f"w2v-BERT {self.w2v_bert}"] if self.w2v_bert else []
            strength = f" at strength {self.s2mel_strength:g}" if self.s2mel_strength != 1.0 else ""
            parts += [f"S2Mel {show(self.s2mel)}{strength}" if self.s2mel is not None else "S2Mel: stock"]
        else:
            parts += [f"config {show(self.config)}", f"vocoder {show(self.vocoder)}"]
        return " · ".join(parts + list(self.notes))



def _resolve_base(config: Path, vocoder: Path | None) -> ModelSpec:
    from data_tools.config import ConfigError, load_config

    try:
        loaded = load_config(config)
    except ConfigError as exc:
        raise ListenError(one_line(exc)) from None
    checkpoint = beside(config, loaded.get("gpt_checkpoint"))
    if checkpoint is None:
        raise ListenError(f"{config} names no gpt_checkpoint: the base model is unknown")
    dataset = loaded.get("dataset") if isinstance(loaded.get("dataset"), Mapping) else {}
    version = generation_id_of(loaded)
    facts = test_facts(version)
    folder = facts.speaks_through_folder
    tokenizer = (config.parent / facts.folder_table if facts.folder_table
                 else beside(config, dataset.get("bpe_model")))
    return ModelSpec(label=f"base model {config.parent.name}/{checkpoint.name}", checkpoint=checkpoint, config=config,
                     tokenizer=tokenizer,
                     vocoder=None if folder else vocoder or beside(config, loaded.get("bigvgan_checkpoint")),
                     version=version, model_dir=config.parent if folder else None)


def _checkpoint_config(path: Path, ckpt: Mapping[str, Any]) -> Path:
    """The config.yaml of a checkpoint: the one its run recorded, else its run's, else one beside it."""
    hparams = ckpt.get("hparams") if isinstance(ckpt.get("hparams"), Mapping) else {}
    candidates = []
    if str(hparams.get("config") or "").strip():
        candidates.append(typed_path(hparams["config"], f"config recorded in {path}"))
    from_run = run_config(path.parent)
    if from_run is not None:
        candidates.append(from_run)
    candidates.append(path.parent / "config.yaml")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ListenError(f"{path}: cannot find the config.yaml it was trained with (looked for "
                      + ", ".join(str(c) for c in dict.fromkeys(candidates)) + ")")


def _resolve_checkpoint(path: Path, vocoder: Path | None) -> ModelSpec:
    from data_tools.config import ConfigError, load_config
    from trainer.checkpoints import CheckpointError, checkpoint_kind, load_checkpoint

    if not path.is_file():
        raise ListenError(f"checkpoint not found: {path}")
    try:
        ckpt = load_checkpoint(path, mmap=True)  # metadata only: the tensors stay on disk
    except CheckpointError as exc:
        raise ListenError(one_line(exc)) from None
    try:
        kind = checkpoint_kind(ckpt)
        config = _checkpoint_config(path, ckpt)
        try:
            loaded = load_config(config)
        except ConfigError as exc:
            raise ListenError(one_line(exc)) from None
        model_config = ckpt.get("model_config")
        if isinstance(model_config, Mapping) and model_config:
            version = generation_id_of({"gpt": dict(model_config)})
        else:
            version = generation_id_of(loaded)
        facts = test_facts(version)
        record = ckpt.get("tokenizer")
        notes: list[str] = []
        if isinstance(record, Mapping) and str(record.get("path") or "").strip():
            tokenizer: Path | None = typed_path(record["path"], f"tokenizer recorded in {path}")
            notes.append("tokenizer recorded in the checkpoint")
        elif (path.parent / "bpe.model").is_file():  # an export: gpt.pth, config.yaml, bpe.model side by side
            tokenizer = path.parent / "bpe.model"
        elif facts.folder_table:
            tokenizer = config.parent / facts.folder_table
            notes.append(f"{kind} checkpoint: the download folder's table")
        else:
            dataset = loaded.get("dataset") if isinstance(loaded.get("dataset"), Mapping) else {}
            tokenizer = beside(config, dataset.get("bpe_model"))
            notes.append(f"{kind} checkpoint: the config's tokenizer")
        step = ckpt.get("step") if isinstance(ckpt.get("step"), int) else None
    finally:
        del ckpt  # drop the mapped file
    label = f"{path.parent.name}/{path.name}" + (f" (step {step})" if step is not None else "")
    if facts.speaks_through_folder:
        return ModelSpec(label=label, checkpoint=path, config=config, tokenizer=tokenizer, vocoder=None,
                         version=version, notes=tuple(notes), model_dir=config.parent)
    return ModelSpec(label=label, checkpoint=path, config=config, tokenizer=tokenizer,
                     vocoder=vocoder or beside(config, loaded.get("bigvgan_checkpoint")), version=version,
                     notes=tuple(notes))


def resolve_model(key: str | None, workspace: Path | str, vocoder: str | Path | None = None) -> ModelSpec:
    """The files behind a picked (or typed) model; raises ListenError (one line) when they cannot be found.

    ``key`` is a :class:`ModelChoice` key (``base:<config>`` or a checkpoint path) or a typed checkpoint path
    (relative to the workspace). ``vocoder`` overrides the config's ``bigvgan_checkpoint``.
    """
    text = (key or "").strip()
    if not text:
        raise ListenError("no model picked")
    workspace = Path(workspace)
    override = None
    if vocoder is not None and str(vocoder).strip():
        override = typed_path(vocoder, "vocoder")
        override = override if override.is_absolute() else workspace / override
    if text.startswith(BASE_PREFIX):
        config = typed_path(text[len(BASE_PREFIX):], "base model config")
        if not config.is_file():
            raise ListenError(f"config not found: {config}")
        return _resolve_base(config, override)
    adapter = not text.startswith(ADAPTER_OFF_PREFIX)
    path = typed_path(text.removeprefix(ADAPTER_OFF_PREFIX), "model")
    spec = _resolve_checkpoint(path if path.is_absolute() else workspace / path, override)
    if adapter:
        return spec
    return replace(spec, label=spec.label + " (LoRA adapter off)", adapter=False,
                   notes=(*spec.notes, "LoRA adapter off: the base weights alone"))
