"""From an S2Mel run checkpoint to what IndexTTS2 / 2.5 inference loads.

- :func:`export_stock_s2mel`: a stock-layout ``s2mel.pth`` (``{"net": {"cfm", "length_regulator"[, "gpt_layer"]}}``)
  with LoRA adapters merged into the base weights; it loads strictly into the stock S2Mel. Parts the run did not
  hold (the 2.5 base file's unused ``gpt_layer``) are copied from the base file unchanged. ``strength`` (0..1,
  :mod:`trainer.s2mel.strength`) writes the decoder at that strength.
- :func:`export_adapter`: the adapter alone (factors, their settings, the trained regulator if any, the base
  file's digest and the strength synthesis applies it at), a few MB instead of the whole decoder.
- :func:`build_trained_s2mel`: the S2Mel a checkpoint or adapter file describes, for synthesis (wrapped, so
  adapters can be switched off for the A/B).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import atomic_open
from networks.s2mel import S2Mel, load_s2mel, read_s2mel_net
from trainer.checkpoints.loading import load_checkpoint
from trainer.s2mel.checkpoint import is_s2mel_checkpoint
from trainer.s2mel.lora import S2MelLoRASettings, attach_lora, load_adapter_state, stock_net_state_dict

ADAPTER_FORMAT = "indextts-studio-s2mel-adapter"


class S2MelExportError(ValueError):
    """A checkpoint or base file that cannot be exported (one line)."""


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def base_record(path: str | Path) -> dict[str, str]:
    return {"path": str(path), "sha256": file_sha256(path)}


def _read_run_or_adapter(path: str | Path) -> dict[str, Any]:
    obj = load_checkpoint(path)
    if not (is_s2mel_checkpoint(obj) or obj.get("format") == ADAPTER_FORMAT):
        raise S2MelExportError(f"{path} is neither an S2Mel run checkpoint nor an S2Mel adapter")
    return obj


def _check_base(obj: Mapping[str, Any], base_path: Path, where: str) -> None:
    recorded = (obj.get("base") or {}).get("sha256")
    if recorded and recorded != file_sha256(base_path):
        raise S2MelExportError(
            f"{where} was trained from another s2mel.pth than {base_path} (sha256 differs)"
        )


def build_trained_s2mel(
    source: str | Path, base_path: str | Path, s2mel_section: Mapping[str, Any], **model_kwargs: Any
) -> S2Mel:
    """The base S2Mel with a run checkpoint's (or an adapter file's) weights in it, adapters still wrapped."""
    base_path = Path(base_path)
    obj = _read_run_or_adapter(source)
    model = load_s2mel(base_path, s2mel_section, **model_kwargs)
    if obj.get("mode") == "full":
        model.load_net(obj["net"], str(source))
        return model.eval()
    _check_base(obj, base_path, str(source))
    attach_lora(model, S2MelLoRASettings.from_record(obj["lora"]))
    load_adapter_state(model, obj["adapter"], str(source))
    if obj.get("regulator") is not None:
        model.length_regulator.load_state_dict(obj["regulator"])
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()


def trained_s2mel_at(source: str | Path, base_path: str | Path, s2mel_section: Mapping[str, Any], strength: float,
                     **model_kwargs: Any) -> S2Mel:
    """The S2Mel a run checkpoint or adapter file describes, at ``strength``, as synthesis and export use it."""
    from trainer.s2mel.strength import FULL_STRENGTH, at_strength, check_strength

    strength = check_strength(strength)
    trained = build_trained_s2mel(source, base_path, s2mel_section, **model_kwargs)
    base = trained if strength == FULL_STRENGTH else load_s2mel(base_path, s2mel_section, **model_kwargs)
    return at_strength(trained, base, strength)


def recorded_strength(obj: Mapping[str, Any]) -> float:
    """The strength an adapter file was exported at (1 for run checkpoints and older files)."""
    from trainer.s2mel.strength import FULL_STRENGTH, check_strength

    value = obj.get("strength") if obj.get("format") == ADAPTER_FORMAT else None
    return FULL_STRENGTH if value is None else check_strength(value, "the adapter file's strength")


def _write(obj: dict[str, Any], out_path: str | Path) -> Path:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out_path, "wb") as handle:
        torch.save(obj, handle)
    return out_path


def export_stock_s2mel(
    source: str | Path,
    base_path: str | Path,
    s2mel_section: Mapping[str, Any],
    out_path: str | Path,
    strength: float = 1.0,
    **model_kwargs: Any,
) -> Path:
    """Write the stock ``s2mel.pth`` of a run checkpoint or adapter (adapters merged) at ``strength``."""
    model = trained_s2mel_at(source, base_path, s2mel_section, strength, **model_kwargs)
    net: dict[str, Any] = dict(read_s2mel_net(base_path))  # keeps parts this model does not hold
    net.update(stock_net_state_dict(model))
    return _write({"net": net}, out_path)


def export_adapter(source: str | Path, out_path: str | Path, strength: float = 1.0) -> Path:
    from trainer.s2mel.strength import check_strength

    strength = check_strength(strength)
    obj = _read_run_or_adapter(source)
    if obj.get("mode") != "lora" and obj.get("format") != ADAPTER_FORMAT:
        raise S2MelExportError(
            f"{source} is a full S2Mel fine-tune: it has no adapter (export s2mel.pth instead)"
        )
    return _write(
        {
            "format": ADAPTER_FORMAT,
            "mode": "lora",
            "lora": obj["lora"],
            "adapter": obj["adapter"],
            "regulator": obj.get("regulator"),
            "base": obj.get("base", {}),
            "step": obj.get("step"),
            "strength": strength,
        },
        out_path,
    )
