"""The recogniser's own floor: its CER and WER on the real recordings of the held-out clips.

A synthetic CER of 9.8 % means little for a new language until it stands beside what the same recogniser
makes of real speech of the same sentences: a good checkpoint approaches that floor, not zero. The floor is
measured once per evaluation set (and per recogniser) and kept in ``<folder>/floor.eval.json`` with its
interval; the tables, curves and the model card show it beside the synthetic numbers.

Real audio is found in the held-out manifest lines whose id names a sentence of the set: ``audio`` (an audio
list, as raw ingest saves it) or ``target_audio_path`` (an IndexTTS2 paired manifest). A codes manifest does
not name its utterance's audio, so it gives no floor (the note says so).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from trainer.evaluation.eval_set import Sentence
from trainer.evaluation.results import read_result, write_result
from trainer.evaluation.stats import interval_of

FLOOR_RESULT = "floor.eval.json"
AUDIO_FIELDS = ("audio", "target_audio_path")
FLOOR_RATE = 16_000


def real_audio_by_id(manifests: Iterable[str | Path]) -> dict[str, Path]:
    """Utterance id -> its real recording, from every manifest line that names one."""
    from data_tools.manifest import parse_manifest_spec

    found: dict[str, Path] = {}
    for spec_text in manifests:
        path = parse_manifest_spec(str(spec_text)).path
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            uid = obj.get("target_id") or obj.get("id")
            audio = next((obj[k] for k in AUDIO_FIELDS if isinstance(obj.get(k), str) and obj[k]), None)
            if isinstance(uid, str) and audio is not None:
                found.setdefault(uid, (Path(path).parent / Path(audio).expanduser()).resolve())
    return found


def floor_path(folder: Path) -> Path:
    return Path(folder) / FLOOR_RESULT


def measure_floor(scorer: Any, sentences: list[Sentence], language: str | None, audio_by_id: dict[str, Path],
                  eval_set: str, folder: Path) -> dict[str, Any] | None:
    """Transcribe the real recordings of ``sentences`` and keep their CER and WER (once per evaluation set and
    recogniser); the stored or new result, or None when no sentence has a real recording."""
    from data_tools.audio import AudioError, load_audio
    from data_tools.scoring import cer, wer

    asr = getattr(scorer, "asr_model", None)
    stored = read_result(floor_path(folder))
    if stored is not None and stored.get("eval_set") == eval_set and stored.get("asr") == asr:
        return stored
    pairs: list[tuple[Sentence, np.ndarray]] = []
    for sentence in sentences:
        audio = audio_by_id.get(sentence.id)
        if audio is None:
            continue
        try:
            pairs.append((sentence, load_audio(audio, FLOOR_RATE)))
        except AudioError:
            continue
    if not pairs:
        return None
    hyps = scorer.transcribe([clip for _s, clip in pairs], FLOOR_RATE, language)
    items = []
    for (sentence, _clip), hyp in zip(pairs, hyps):
        c, w = cer([sentence.text], [hyp], language), wer([sentence.text], [hyp], language)
        items.append({"sentence": sentence.id, "voice": "real", "language": language, "seed": None,
                      "text": sentence.text, "transcript": hyp, "cer": c.corpus, "wer": w.corpus,
                      "cer_errors": c.substitutions + c.deletions + c.insertions, "cer_length": c.reference_length,
                      "wer_errors": w.substitutions + w.deletions + w.insertions, "wer_length": w.reference_length})
    refs = [s.text for s, _clip in pairs]
    result: dict[str, Any] = {"model": "real speech", "eval_set": eval_set, "asr": asr, "language": language,
                              "cer": cer(refs, hyps, language).corpus, "wer": wer(refs, hyps, language).corpus,
                              "clips": len(pairs), "of": len(sentences), "items": items}
    result["intervals"] = {m: (i.to_dict() if (i := interval_of(result, m)) else None) for m in ("cer", "wer")}
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_result(floor_path(folder), result)
    return read_result(floor_path(folder)) or result


def read_floor(folder: Path, eval_set: str | None = None) -> dict[str, Any] | None:
    result = read_result(floor_path(folder))
    if result is None or (eval_set is not None and result.get("eval_set") != eval_set):
        return None
    return result
