"""``python -m trainer.checkpoints export-s2mel``: an S2Mel run checkpoint -> what IndexTTS2 / 2.5 inference loads.

Writes ``<out>/s2mel.pth`` in the stock layout (adapters merged; loads strictly into the stock S2Mel), or with
``--adapter-only`` the adapter alone (``<out>/s2mel_adapter.pth``). With ``--scores`` (JSON: ``{"without":
[{"voice", "similarity", "cer"}, ...], "with": [...]}``, the held-out voices scored GPT-only and GPT + S2Mel)
the export is gated by :func:`trainer.s2mel.keep.decide_adapter`, whose reason is printed; ``--keep keep|drop``
overrides it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.errors import UsageError

OUT_STOCK, OUT_ADAPTER = "s2mel.pth", "s2mel_adapter.pth"


class S2MelExportRefused(UsageError):
    """The S2Mel export was not written (one line)."""


@dataclass(frozen=True)
class S2MelExportReport:
    written: Path
    decision: str | None  # decide_adapter's reason, when scores were given

    def lines(self) -> list[str]:
        return [*([self.decision] if self.decision else []), f"wrote {self.written}"]


def s2mel_model_kwargs(generation: Any, config: dict[str, Any]) -> dict[str, Any]:
    """load_s2mel's arguments beyond the config section for this generation's S2Mel."""
    return {"gpt_dim": config["gpt"]["model_dim"]} if generation.s2mel_gpt_latent else {"with_gpt_layer": False}


def _scores(path: Path) -> tuple[list[Any], list[Any]]:
    from trainer.s2mel.keep import VoiceScore

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return tuple([VoiceScore(str(s["voice"]), float(s["similarity"]), float(s["cer"])) for s in raw[side]]
                     for side in ("without", "with"))  # type: ignore[return-value]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise S2MelExportRefused(f"--scores {path}: not a scores file ({' '.join(str(exc).split())})") from None


def export_s2mel(path: Path, out: Path, model_dir: Path, *, adapter_only: bool = False, scores: Path | None = None,
                 keep: str = "auto", force: bool = False) -> S2MelExportReport:
    from data_tools.config import load_config
    from trainer.checkpoints.loading import load_checkpoint
    from trainer.generations.registry import generation_of_folder
    from trainer.generations.spec import Capability
    from trainer.s2mel.checkpoint import is_s2mel_checkpoint
    from trainer.s2mel.export import S2MelExportError, export_adapter, export_stock_s2mel
    from trainer.s2mel.keep import decide_adapter

    generation = generation_of_folder(model_dir) if model_dir.is_dir() else None
    if generation is None or not (model_dir / "s2mel.pth").is_file():
        raise S2MelExportRefused(f"--model-dir {model_dir}: not an IndexTTS2 / 2.5 download folder with s2mel.pth")
    refusal = generation.refusal(Capability.TRAIN_S2MEL)
    if refusal:
        raise S2MelExportRefused(refusal)
    if not is_s2mel_checkpoint(load_checkpoint(path)):
        raise S2MelExportRefused(f"{path} is not an S2Mel run checkpoint (python -m trainer.train --train s2mel)")
    target = out / (OUT_ADAPTER if adapter_only else OUT_STOCK)
    if target.exists() and not force:
        raise S2MelExportRefused(f"{target} exists: pass --force to replace it")
    decision = None
    if scores is not None or keep != "auto":
        if scores is None:
            chosen = keep == "keep"
            decision = f"S2Mel {'kept' if chosen else 'left out'} by the user's override (no scores given)"
        else:
            without, with_adapter = _scores(scores)
            try:
                verdict = decide_adapter(without, with_adapter, override=keep)
            except ValueError as exc:
                raise S2MelExportRefused(f"--scores {scores}: {exc}") from None
            chosen, decision = verdict.keep, verdict.reason
        if not chosen:
            raise S2MelExportRefused(f"not exported: {decision} (--keep keep exports it anyway)")
    config = load_config(model_dir / "config.yaml")
    try:
        if adapter_only:
            written = export_adapter(path, target)
        else:
            written = export_stock_s2mel(path, model_dir / "s2mel.pth", config["s2mel"], target,
                                         **s2mel_model_kwargs(generation, config))
    except (S2MelExportError, ValueError) as exc:
        raise S2MelExportRefused(" ".join(str(exc).split())) from None
    return S2MelExportReport(written, decision)
