"""``python -m trainer.checkpoints export-s2mel``: an S2Mel run checkpoint -> what IndexTTS2 / 2.5 inference loads.

Writes ``<out>/s2mel.pth`` in the stock layout (adapters merged; loads strictly into the stock S2Mel), or with
``--adapter-only`` the adapter alone (``<out>/s2mel_adapter.pth``). With scores (JSON: ``{"without":
[{"voice", "similarity", "cer"}, ...], "with": [...]}``, the held-out voices scored GPT-only and GPT + S2Mel:
``--scores``, else the ``s2mel_scores.json`` that ``python -m trainer.s2mel.evaluate`` wrote beside the checkpoint)
the export is gated by :func:`trainer.s2mel.keep.decide_adapter` (an adapter the scores' health found to change
nothing is left out), whose reason is printed and appended to the
run's ``metrics.jsonl``; ``--keep keep|drop`` overrides it. Scores of another step than the checkpoint's are
refused (measure this checkpoint, or override). ``--strength S`` (0..1, :mod:`trainer.s2mel.strength`) writes the
decoder at that adapter strength (an adapter file records it); without it, the strength the scores' gate chose,
else 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.errors import UsageError
from trainer.s2mel.evaluate import SCORES_FILE

OUT_STOCK, OUT_ADAPTER = "s2mel.pth", "s2mel_adapter.pth"


class S2MelExportRefused(UsageError):
    """The S2Mel export was not written (one line)."""


@dataclass(frozen=True)
class S2MelExportReport:
    written: Path
    decision: str | None  # decide_adapter's reason, when scores were given
    strength: float = 1.0  # the adapter strength written

    def lines(self) -> list[str]:
        at = "" if self.strength == 1.0 else f" (adapter strength {self.strength:g})"
        return [*([self.decision] if self.decision else []), f"wrote {self.written}{at}"]


def s2mel_model_kwargs(generation: Any, config: dict[str, Any]) -> dict[str, Any]:
    """load_s2mel's arguments beyond the config section for this generation's S2Mel."""
    with_gpt = generation.s2mel is not None and generation.s2mel.gpt_latent
    return {"gpt_dim": config["gpt"]["model_dim"]} if with_gpt else {"with_gpt_layer": False}


def _scores(path: Path) -> tuple[list[Any], list[Any], Any, float | None, str | None]:
    """(without, with, the step they measured (None when not recorded), the strength the gate chose (None: not
    recorded), health's "adapter changes nothing (...)" (None: it applies, or was not checked))."""
    from trainer.s2mel.adapter_health import unchanged_reason
    from trainer.s2mel.keep import VoiceScore

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        without, with_adapter = ([VoiceScore(str(s["voice"]), float(s["similarity"]), float(s["cer"]))
                                  for s in raw[side]] for side in ("without", "with"))
        strength = raw.get("strength")
        return (without, with_adapter, raw.get("step"), None if strength is None else float(strength),
                unchanged_reason(raw.get("health")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise S2MelExportRefused(f"--scores {path}: not a scores file ({' '.join(str(exc).split())})") from None


def _log(run_dir: Path, record: dict[str, Any]) -> None:
    """The export's decision in the run's metrics.jsonl (its log), where the checkpoint sits in a run folder."""
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        with open(metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"part": "s2mel", "event": "export", **record}, ensure_ascii=False) + "\n")


def export_s2mel(path: Path, out: Path, model_dir: Path, *, adapter_only: bool = False, scores: Path | None = None,
                 keep: str = "auto", force: bool = False, strength: float | None = None) -> S2MelExportReport:
    from data_tools.config import load_config
    from generations.registry import generation_of_folder
    from generations.spec import Capability
    from trainer.checkpoints.loading import load_checkpoint
    from trainer.s2mel.checkpoint import is_s2mel_checkpoint
    from trainer.s2mel.export import S2MelExportError, export_adapter, export_stock_s2mel
    from trainer.s2mel.keep import decide_adapter
    from trainer.s2mel.strength import FULL_STRENGTH, check_strength

    generation = generation_of_folder(model_dir) if model_dir.is_dir() else None
    if generation is None or not (model_dir / "s2mel.pth").is_file():
        raise S2MelExportRefused(f"--model-dir {model_dir}: not an IndexTTS2 / 2.5 download folder with s2mel.pth")
    refusal = generation.refusal(Capability.TRAIN_S2MEL)
    if refusal:
        raise S2MelExportRefused(refusal)
    ckpt = load_checkpoint(path, mmap=True)
    if not is_s2mel_checkpoint(ckpt):
        raise S2MelExportRefused(f"{path} is not an S2Mel run checkpoint (python -m trainer.train --train s2mel)")
    step = ckpt.get("step")
    del ckpt
    if scores is None and (path.parent / SCORES_FILE).is_file():
        scores = path.parent / SCORES_FILE  # what python -m trainer.s2mel.evaluate measured for this run
    target = out / (OUT_ADAPTER if adapter_only else OUT_STOCK)
    if target.exists() and not force:
        raise S2MelExportRefused(f"{target} exists: pass --force to replace it")
    decision, chosen_strength = None, None
    if strength is not None:
        try:
            strength = check_strength(strength, "--strength")
        except ValueError as exc:
            raise S2MelExportRefused(str(exc)) from None
    if scores is not None or keep != "auto":
        if scores is None:
            chosen = keep == "keep"
            decision = f"S2Mel {'kept' if chosen else 'left out'} by the user's override (no scores given)"
        else:
            without, with_adapter, measured, chosen_strength, unchanged = _scores(scores)
            if measured is not None and measured != step and keep == "auto":
                raise S2MelExportRefused(f"{scores} measured step {measured}, {path.name} is step {step}: run python "
                                         "-m trainer.s2mel.evaluate on it (or --keep keep|drop)")
            try:
                verdict = decide_adapter(without, with_adapter, override=keep, unchanged=unchanged)
            except ValueError as exc:
                raise S2MelExportRefused(f"--scores {scores}: {exc}") from None
            chosen, decision = verdict.keep, verdict.reason
            if chosen_strength not in (None, FULL_STRENGTH):  # the strength its gate chose (trainer.s2mel.evaluate --strengths)
                decision = f"{decision} (the gate chose strength {chosen_strength:g})"
        if strength is None:
            strength = chosen_strength if chosen_strength is not None else FULL_STRENGTH
        _log(path.parent, {"step": step, "exported": chosen, "strength": strength, "reason": decision})
        if not chosen:
            raise S2MelExportRefused(f"not exported: {decision}; the download folder's s2mel.pth stays the one to use "
                                     "(--keep keep exports it anyway)")
    config = load_config(model_dir / "config.yaml")
    try:
        strength = FULL_STRENGTH if strength is None else check_strength(strength, "the scores' strength")
        if adapter_only:
            written = export_adapter(path, target, strength)
        else:
            written = export_stock_s2mel(path, model_dir / "s2mel.pth", config["s2mel"], target, strength,
                                         **s2mel_model_kwargs(generation, config))
    except (S2MelExportError, ValueError) as exc:
        raise S2MelExportRefused(" ".join(str(exc).split())) from None
    return S2MelExportReport(written, decision, strength)
