"""Capture and restore every RNG the training loop draws from, as tensors and plain values.

Stored shape (loads with ``weights_only=True``)::

    {"python": {"version": 3, "state": [625 ints], "gauss": float | None},
     "numpy": {"keys": uint32 tensor [624], "pos": int, "has_gauss": int, "cached_gaussian": float},
     "torch_cpu": uint8 tensor, "torch_cuda": [uint8 tensor per device] (empty without CUDA)}
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


class RngStateError(ValueError):
    """An RNG state that does not have the stored shape above."""


def capture_rng_state() -> dict[str, Any]:
    version, state, gauss = random.getstate()
    algorithm, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    if algorithm != "MT19937":
        raise RngStateError(f"unexpected numpy RNG algorithm {algorithm}")
    cuda: list[torch.Tensor] = []
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = [state.clone() for state in torch.cuda.get_rng_state_all()]
    return {
        "python": {"version": int(version), "state": [int(v) for v in state],
                   "gauss": None if gauss is None else float(gauss)},
        "numpy": {"keys": torch.from_numpy(np.asarray(keys, dtype=np.uint32).copy()), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch_cpu": torch.get_rng_state().clone(),
        "torch_cuda": cuda,
    }


def check_rng_state(state: Any) -> list[str]:
    """Problems with a stored RNG state (empty when it can be restored)."""
    if not isinstance(state, dict):
        return [f"expected a dict, got {type(state).__name__}"]
    problems: list[str] = []
    py = state.get("python")
    if not (isinstance(py, dict) and isinstance(py.get("state"), (list, tuple)) and len(py["state"]) == 625):
        problems.append("python state missing or not 625 ints")
    npy = state.get("numpy")
    keys = npy.get("keys") if isinstance(npy, dict) else None
    if not (isinstance(keys, torch.Tensor) and keys.numel() == 624 and isinstance(npy.get("pos"), int)):
        problems.append("numpy state missing or not 624 keys + position")
    cpu = state.get("torch_cpu")
    if not (isinstance(cpu, torch.Tensor) and cpu.dtype == torch.uint8 and cpu.numel() > 0):
        problems.append("torch CPU state missing or not a uint8 tensor")
    cuda = state.get("torch_cuda", [])
    if not (isinstance(cuda, (list, tuple)) and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8
                                                    for t in cuda)):
        problems.append("torch CUDA states not a list of uint8 tensors")
    return problems


def restore_rng_state(state: dict[str, Any]) -> list[str]:
    """Restore the RNGs from ``state``; returns notes on anything that could not be restored exactly.

    Raises RngStateError when the state is malformed (nothing is restored then).
    """
    problems = check_rng_state(state)
    if problems:
        raise RngStateError("RNG state cannot be restored: " + "; ".join(problems))
    notes: list[str] = []
    py = state["python"]
    random.setstate((int(py.get("version", 3)), tuple(int(v) for v in py["state"]), py.get("gauss")))
    npy = state["numpy"]
    keys = npy["keys"]
    keys_np = keys.numpy().astype(np.uint32) if keys.dtype != torch.uint32 else keys.numpy()
    np.random.set_state(("MT19937", keys_np, int(npy["pos"]), int(npy.get("has_gauss", 0)),
                         float(npy.get("cached_gaussian", 0.0))))
    torch.set_rng_state(state["torch_cpu"].clone())
    cuda = list(state.get("torch_cuda") or [])
    if cuda:
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            for index, cuda_state in enumerate(cuda[:count]):
                torch.cuda.set_rng_state(cuda_state.clone(), index)
            if len(cuda) != count:
                notes.append(f"CUDA RNG saved for {len(cuda)} device(s), {count} present: "
                             f"restored {min(len(cuda), count)}")
        else:
            notes.append("CUDA RNG state saved but CUDA is not available here: not restored")
    return notes
