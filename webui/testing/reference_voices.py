"""Reference voices for the Test tab: which voice a synthesis imitates.

:func:`reference_choices` lists audio under ``<workspace>/references/`` and validation prompts that are
audio files (of every generation's demo validation manifest, each read by its format's parser:
``data_tools.manifest_entries``); :func:`default_reference` writes, once, a generated stand-in (espeak-ng's Amharic voice, or a
tone with noise without it) so the tab works before a real voice is uploaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".m4a", ".opus")
MAX_REFERENCES = 50
ESPEAK_TIMEOUT_S = 30.0
DEFAULT_REFERENCE_TEXT = "ሰላም። ይህ ለሙከራ የተሠራ ድምፅ ነው።"
ESPEAK_REFERENCE = "generated_espeak_am.wav"
TONE_REFERENCE = "generated_tone.wav"


def references_dir(workspace: Path | str) -> Path:
    return Path(workspace) / "references"


def _write_tone(path: Path, seconds: float = 3.0, rate: int = 24_000) -> None:
    """A voice-like stand-in: a gliding harmonic tone with breath noise (deterministic)."""
    import numpy as np
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    pitch = 120.0 + 30.0 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * np.minimum(t / seconds, 1.0)))
    noise = np.random.default_rng(0).normal(0.0, 0.02, t.size)
    wave = (0.25 * voiced * envelope + noise).astype(np.float32)
    soundfile.write(path, np.clip(wave, -1.0, 1.0), rate, subtype="PCM_16")


def _write_espeak(path: Path, espeak: str) -> bool:
    try:
        done = subprocess.run([espeak, "-v", "am", "-s", "140", "-w", str(path), DEFAULT_REFERENCE_TEXT],
                              capture_output=True, timeout=ESPEAK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and path.is_file() and path.stat().st_size > 1000


def default_reference(workspace: Path | str) -> tuple[str, Path]:
    """(label, path) of the generated reference voice, written once into ``<workspace>/references/``.

    With espeak-ng installed it is its Amharic voice reading a sentence; without, a tone with noise.
    Either way it is a stand-in for trying the tab (the demo data has prompt mels, no audio).
    """
    folder = references_dir(workspace)
    espeak_path, tone_path = folder / ESPEAK_REFERENCE, folder / TONE_REFERENCE
    if not espeak_path.is_file() and not tone_path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        espeak = shutil.which("espeak-ng")
        scratch = folder / f".writing-{os.getpid()}.wav"
        try:
            if espeak and _write_espeak(scratch, espeak):
                os.replace(scratch, espeak_path)
            else:
                _write_tone(scratch)
                os.replace(scratch, tone_path)
        finally:
            scratch.unlink(missing_ok=True)
    if espeak_path.is_file():
        return "generated: espeak-ng's Amharic voice (a robot stand-in, upload a real voice)", espeak_path
    return "generated: a tone with noise (no voice; upload a real reference)", tone_path


def demo_val_manifests(workspace: Path | str) -> list[Path]:
    """Every generation's demo validation manifest in ``workspace`` (the registry's demos, oldest generation first)."""
    from demo.workspace import demo_of
    from generations.registry import oldest_first

    demos = (demo_of(entry, Path(workspace)) for entry in oldest_first())
    return list(dict.fromkeys(demo.val_manifest for demo in demos if demo is not None))


def _data_name(fmt: str) -> str:
    """The studio name of the generation that trains on manifests of format ``fmt``."""
    from generations.registry import generation_of_format

    try:
        return generation_of_format(fmt).name
    except KeyError:
        return fmt


def _prompts(manifest: Path, limit: int, known: set[str]) -> list[tuple[str, str]]:
    """(label, path) of the prompt audio files of a manifest of any format that exist, each file once (``known``
    holds the paths listed already); a mel prompt is no audio and is left out, an unreadable manifest gives none."""
    from data_tools.manifest import ManifestError, manifest_format
    from data_tools.manifest_entries import iter_entries, prompt_of

    found: list[tuple[str, str]] = []
    try:
        fmt = manifest_format(manifest)
        data = _data_name(fmt)
        for entry in iter_entries(manifest, fmt):
            if len(found) >= limit:
                break
            prompt = None if isinstance(entry, ManifestError) else prompt_of(entry, fmt)
            if prompt is None or prompt.audio is None or str(prompt.audio) in known or not prompt.audio.is_file():
                continue
            known.add(str(prompt.audio))
            speaker = f" ({prompt.speaker})" if prompt.speaker else ""
            found.append((f"validation prompt {prompt.id}{speaker}, {data} data", str(prompt.audio)))
    except (ManifestError, OSError):
        pass
    return found


def reference_choices(workspace: Path | str, val_manifests: Iterable[Path | str] | None = None
                      ) -> list[tuple[str, str]]:
    """(label, path) of reference voices to pick: audio under ``references/`` (the generated one first) and the
    audio prompts of validation manifests of any format (a codes manifest's ``cond_audio``, a paired one's
    ``prompt_audio_path``; a prompt mel .npy is not audio and is left out). ``val_manifests`` None: every
    generation's demo validation manifest in the workspace. The manifests share the room that is left, so one
    long manifest cannot hide the others' prompts."""
    label, generated = default_reference(workspace)
    choices = [(label, str(generated))]
    folder = references_dir(workspace)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.suffix.lower() in AUDIO_SUFFIXES and path.is_file() and path.name not in (ESPEAK_REFERENCE,
                                                                                           TONE_REFERENCE):
            choices.append((f"references/{path.name}", str(path)))
    manifests = demo_val_manifests(workspace) if val_manifests is None else [Path(m) for m in val_manifests]
    known = {path for _, path in choices}
    for index, manifest in enumerate(manifests):
        room = (MAX_REFERENCES - len(choices)) // (len(manifests) - index)
        if room > 0:
            choices += _prompts(manifest, room, known)
    return choices
