"""The weight files every generation's export writes: gpt.pth (``{"model": state}``) and, when asked,
gpt.safetensors, atomically, each recorded in the export report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import atomic_write_bytes, atomic_write_with


def write_gpt_weights(out_dir: Path, weights: dict[str, torch.Tensor], safetensors: bool, report: Any) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpt_path = out_dir / "gpt.pth"
    atomic_write_with(gpt_path, lambda handle: torch.save({"model": weights}, handle))
    report.files.append(gpt_path)
    if safetensors:
        from safetensors.torch import save as safetensors_bytes

        st_path = out_dir / "gpt.safetensors"
        atomic_write_bytes(st_path, safetensors_bytes(weights, metadata={"format": "pt"}))
        report.files.append(st_path)
