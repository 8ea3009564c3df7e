"""The files an export carries over from its base model folder, so that the export is a complete inference folder.

Which files a complete model folder has is the generation's answer (its registry entry's ``export.folder_files``:
S2Mel, w2v-BERT stats, feat1/feat2, codecs, CAMPPlus, BigVGAN, a local w2v-BERT for IndexTTS2 / 2.5; the BigVGAN
for IndexTTS-1.5). They keep their place relative to the folder, as upstream's inference and the studio's look
for them. ``copy`` (the default) makes a folder that works when moved to another machine; ``link`` makes
symbolic links to the base model's files (small and fast, but it speaks only where the base folder stays).

The base folder is the one given (``--model-dir``), else the folder of ``--config``, else the folders the run
recorded (its ``--sample-model-dir``, its ``--base-checkpoint``'s folder, its ``--config``'s folder): the first that
is a complete model folder of the checkpoint's generation. When none is, the export holds the GPT files alone and
its notes say why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer.checkpoints.format import CheckpointError

BASE_FILE_MODES = ("copy", "link")
DEFAULT_BASE_FILES = "copy"
RECORDED_FOLDERS = (("sample_model_dir", False), ("base_checkpoint", True), ("config", True))  # (option, its parent)


def base_folder_candidates(ckpt: Mapping[str, Any], config: str | Path | None,
                           model_dir: str | Path | None) -> list[Path]:
    """Folders that may be the base model's, most explicit first (existing folders only, no duplicates)."""
    hparams = ckpt.get("hparams") if isinstance(ckpt.get("hparams"), Mapping) else {}
    found: list[Path] = []
    if model_dir is not None:
        found.append(Path(model_dir).expanduser())
    if config is not None:
        found.append(Path(config).expanduser().parent)
    for option, parent in RECORDED_FOLDERS:
        text = str(hparams.get(option) or "").strip()
        if text:
            path = Path(text).expanduser()
            found.append(path.parent if parent else path)
    unique: dict[Path, Path] = {}
    for folder in found:
        if folder.is_dir():
            unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


def base_files_of(generation: Any, candidates: list[Path], out_dir: Path,
                  model_dir: str | Path | None) -> tuple[Path | None, list[Path], str | None]:
    """(base folder, its files to carry, why none) for ``generation``; a given ``model_dir`` that is not a complete
    model folder is refused (CheckpointError), a recorded one is passed over."""
    folder_files = generation.export.folder_files if generation.export is not None else None
    if folder_files is None:
        return None, [], None
    problems: list[str] = []
    for folder in candidates:
        if folder.resolve() == out_dir.resolve():
            continue
        try:
            return folder, folder_files(folder), None
        except ValueError as exc:
            problem = " ".join(str(exc).split())
            if model_dir is not None and folder == Path(model_dir).expanduser():
                raise CheckpointError(f"--model-dir {folder} is not a complete {generation.name} model folder: "
                                      f"{problem}") from None
            problems.append(problem)
    why = problems[0] if problems else "no base model folder is known (pass --model-dir)"
    return None, [], why


def _relative(path: Path, folder: Path) -> Path:
    try:
        return path.absolute().relative_to(folder.absolute())
    except ValueError:
        return path.resolve().relative_to(folder.resolve())


def _remove(target: Path) -> None:
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def _copy(source: Path, target: Path) -> None:
    """``source`` (a file or a folder) to ``target`` through a temporary name beside it: never half there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        staged = temp / target.name
        if source.is_dir():
            shutil.copytree(source, staged, copy_function=shutil.copyfile)
        else:
            shutil.copyfile(source, staged)
        os.replace(staged, target)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(source.resolve(), target, target_is_directory=source.is_dir())


def carry_base_files(generation: Any, ckpt: Mapping[str, Any], out_dir: Path, *, config: str | Path | None,
                     model_dir: str | Path | None, mode: str, force: bool, report: Any) -> None:
    """Copy (or link) the base model folder's files into ``out_dir`` (see the module docstring); notes in
    ``report``."""
    if mode not in BASE_FILE_MODES:
        raise CheckpointError(f"--base-files must be one of {', '.join(BASE_FILE_MODES)}, got {mode!r}")
    folder, files, why = base_files_of(generation, base_folder_candidates(ckpt, config, model_dir), out_dir,
                                       model_dir)
    if folder is None:
        if why is not None:
            report.notes.append(f"not a complete inference folder (the {generation.name} GPT files alone): {why}")
        return
    places = [(path, out_dir / _relative(path, folder)) for path in files]
    taken = [str(target.relative_to(out_dir)) for _, target in places if target.exists() or target.is_symlink()]
    if taken and not force:
        raise CheckpointError(f"{out_dir} already holds {', '.join(taken)}: choose an empty --out folder (or pass "
                              "--force to replace an earlier export)")
    for source, target in places:
        _remove(target)
        (_copy if mode == "copy" else _link)(source, target)
        if target.is_file():
            report.files.append(target)
    names = ", ".join(str(target.relative_to(out_dir)) for _, target in places)
    how = "copied" if mode == "copy" else "linked (symbolic links: the export speaks only beside that folder)"
    report.notes.append(f"base model files {how} from {folder}: {names}")
