"""Voice separated from music and noise before slicing, with demucs (a maintained separation library).

The model is a demucs model file in the library's own format (``<signature>.th``: its class, arguments and
weights), a folder holding one (or a bag: ``<name>.yaml`` listing signatures, their ``.th`` beside it, as
demucs' own repositories are laid out), or a pretrained name (``htdemucs``) looked up in demucs' list of
released files and downloaded into torch's hub cache (whole or not at all, checked against the hash in its
name; offline, ``HF_HUB_OFFLINE=1``, or with no network, refused in one line naming the model and how to give a
local file or folder instead). Weights are never bundled. Files are read with
``torch.load(weights_only=True)``: only demucs' model classes and ``Fraction`` are allowed in them (demucs'
own loader unpickles anything).

Per recording: the mix at the model's rate goes through ``demucs.apply.apply_model`` (split into segments,
on the GPU when there is one); the voice stem is the model's ``vocals`` and the rest is the mix minus the
voice, so the two stems sum to the input exactly. Both are written as FLAC beside each other in
``<out>/separated/`` (atomically: one that exists is whole, so a rerun never separates twice); the original
recording is never touched.
"""

from __future__ import annotations

import fractions
import os
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from data_tools.fileio import fsync_dir
from data_tools.ingest.sources import SourceError, printable

VOICE = "vocals"
DOWNLOAD_TIMEOUT_S = 30  # per network read: an unreachable host ends in one line, never a hang


class SeparationError(ValueError):
    """A separation model that cannot be used (one line)."""


def _model_classes() -> list[Any]:
    from demucs.demucs import Demucs
    from demucs.hdemucs import HDemucs
    from demucs.htdemucs import HTDemucs

    return [Demucs, HDemucs, HTDemucs, fractions.Fraction]


def _load_file(path: Path) -> Any:
    import torch
    from demucs.states import load_model

    try:
        with torch.serialization.safe_globals(_model_classes()):
            package = torch.load(path, map_location="cpu", weights_only=True)
        return load_model(package)
    except Exception as exc:  # a foreign or truncated file: say which, in one line
        raise SeparationError(f"{path}: not a demucs model file ({' '.join(str(exc).split())[:200]})") from None


def load_separator(source: str | Path) -> Any:
    """A demucs model (or bag of models) from a ``.th`` file, a folder, or a pretrained name; it must have a
    ``vocals`` stem."""
    model = _load_any(source)
    if VOICE not in model.sources:
        raise SeparationError(f"{source}: the model has no {VOICE!r} stem (it has {', '.join(model.sources)})")
    return model


def _load_any(source: str | Path) -> Any:
    from demucs.apply import BagOfModels

    path = Path(source)
    if path.is_file():
        return _load_file(path)
    if path.is_dir():
        bags = sorted(path.glob("*.yaml"))
        if bags:
            return _bag(bags[0], {p.stem.split("-")[0]: p for p in path.glob("*.th")}, BagOfModels)
        files = sorted(path.glob("*.th"))
        if len(files) != 1:
            raise SeparationError(f"{path}: expected one demucs .th file or a bag .yaml in it, found {len(files)}")
        return _load_file(files[0])
    return _pretrained(str(source), BagOfModels)


def _bag(spec: Path, files: dict[str, Path], bag_class: Any) -> Any:
    import yaml

    described = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
    missing = [sig for sig in described.get("models", []) if sig not in files]
    if missing or not described.get("models"):
        raise SeparationError(f"{spec}: model file(s) {', '.join(missing) or '(none listed)'} not beside it")
    models = [_load_file(files[sig]) for sig in described["models"]]
    return bag_class(models, described.get("weights"), described.get("segment"))


def _pretrained(name: str, bag_class: Any) -> Any:
    """A released model by name: demucs' list of files gives the URLs; downloaded once into torch's hub cache
    (checked against the hash in its file name). Offline (``HF_HUB_OFFLINE=1``) only the cache is read."""
    import torch
    import yaml
    from demucs.pretrained import REMOTE_ROOT, _parse_remote_files

    spec = Path(REMOTE_ROOT) / f"{name}.yaml"
    if not spec.is_file():
        raise SeparationError(f"--separate {name}: not a demucs model file or folder, nor a released model name")
    urls = _parse_remote_files(Path(REMOTE_ROOT) / "files.txt")
    folder = Path(torch.hub.get_dir()) / "checkpoints"
    files = {}
    for sig in yaml.safe_load(spec.read_text(encoding="utf-8")).get("models", []):
        if sig not in urls:
            raise SeparationError(f"--separate {name}: no file for its model {sig}")
        target = folder / Path(urls[sig]).name
        if not target.is_file():
            _download(name, urls[sig], target)
        files[sig] = target
    return _bag(spec, files, bag_class)


def _download(name: str, url: str, target: Path) -> None:
    """One released file into the cache, whole or not at all (a temp file renamed when its hash matched)."""
    import hashlib
    import urllib.error
    import urllib.request

    local = ("give a local demucs model instead: --separate path/to/model.th, or a folder holding its .th "
             "(or a bag's .yaml and .th files)")
    if offline():
        raise SeparationError(f"--separate {name}: the separation model is not in the cache ({target}) and "
                              f"downloads are off (HF_HUB_OFFLINE is set); {local}")
    temp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        request = urllib.request.Request(url, headers={"User-Agent": "indextts-studio"})
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as answer, open(temp, "wb") as handle:
            while block := answer.read(1 << 20):
                digest.update(block)
                handle.write(block)
    except urllib.error.URLError as exc:  # no network, a refused connection, an HTTP error
        temp.unlink(missing_ok=True)
        cause = getattr(exc, "reason", exc)
        raise SeparationError(f"--separate {name}: the separation model could not be downloaded from {url} "
                              f"({' '.join(str(cause).split())[:160]}; offline or no network?); {local}") from None
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise SeparationError(f"--separate {name}: the separation model could not be downloaded into "
                              f"{target.parent} ({exc.strerror or exc}); {local}") from None
    expected = target.stem.split("-")[-1]
    if not digest.hexdigest().startswith(expected):
        temp.unlink(missing_ok=True)
        raise SeparationError(f"--separate {name}: the downloaded {target.name} does not match its hash (a cut or "
                              f"changed download); rerun, or {local}")
    os.replace(temp, target)


def offline() -> bool:
    """huggingface_hub's switch, honoured for every download the ingest makes: HF_HUB_OFFLINE=1 (yes/true/on)."""
    return (os.environ.get("HF_HUB_OFFLINE") or "").strip().lower() in ("1", "yes", "true", "on")


def stem_paths(folder: Path, source_id: str) -> tuple[Path, Path]:
    return folder / f"{source_id}.voice.flac", folder / f"{source_id}.rest.flac"


def separate_file(model: Any, audio: Path, folder: Path, source_id: str, device: str = "cpu") -> Path:
    """``audio``'s voice stem (and the rest) in ``folder``; reused when already there. Returns the voice's path."""
    import torch
    from demucs.apply import apply_model

    voice_path, rest_path = stem_paths(folder, source_id)
    if voice_path.is_file() and rest_path.is_file():
        return voice_path
    try:
        mix, rate = sf.read(str(audio), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        raise SourceError(f"{printable(audio)}: cannot read it for separation ({exc})") from None
    mono = mix.mean(axis=1)
    model_rate = int(model.samplerate)
    at_model = soxr.resample(mono, rate, model_rate).astype(np.float32) if rate != model_rate else mono
    channels = int(getattr(model, "audio_channels", 2))
    tensor = torch.from_numpy(np.ascontiguousarray(np.tile(at_model, (channels, 1))))[None]
    with torch.inference_mode():
        stems = apply_model(model, tensor, shifts=0, split=True, overlap=0.25, device=device, progress=False)
    voice = stems[0, model.sources.index(VOICE)].mean(dim=0).cpu().numpy().astype(np.float32)
    rest = at_model - voice
    folder.mkdir(parents=True, exist_ok=True)
    for path, samples in ((rest_path, rest), (voice_path, voice)):  # the voice last: its presence means both
        temp = path.with_name(f".{path.name}.tmp")
        sf.write(str(temp), samples, model_rate, format="FLAC", subtype="PCM_24")
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, path)
    fsync_dir(folder)
    return voice_path
