"""Loading a community trainer's checkpoint: its ``latest.pth`` pickles NumPy RNG state and a torch version.

``load_for_repair`` tries a plain ``weights_only`` load first; only when that is refused for code-carrying
globals does it retry with exactly the types a community ``latest.pth`` needs, and nothing more. Used by
``repair`` and by ``verify`` (to describe such a file), so it lives apart from both. ``repair`` also converts
the file's RNG state and manifest records into this project's shape here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoints.format import CheckpointError, to_plain
from trainer.checkpoints.loading import explain_load_failure, load_checkpoint


def _community_latest_globals() -> list[Any]:
    """Exactly what a community latest.pth needs beyond plain data, and nothing more: numpy's array
    reconstruction (``np.random.get_state()`` holds a uint32 array) and ``TorchVersion`` (a str)."""
    import numpy as np
    from torch.torch_version import TorchVersion

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    allowed: list[Any] = [_reconstruct, np.ndarray, np.dtype, TorchVersion]
    if hasattr(np, "dtypes"):  # numpy >= 1.25 pickles a uint32 dtype through its class
        allowed.append(np.dtypes.UInt32DType)
    return allowed


def load_for_repair(path: Path) -> tuple[dict[str, Any], bool]:
    """Load ``path``; returns (checkpoint, needed_numpy_allow_list). Refuses anything that could run code."""
    try:
        return load_checkpoint(path), False
    except CheckpointError as first:
        if "could run code" not in str(first):
            raise
        try:
            with torch.serialization.safe_globals(_community_latest_globals()):
                obj = torch.load(path, weights_only=True, map_location="cpu")
        except Exception as exc:  # still refused: not just numpy data
            raise CheckpointError(f"{path} is not a loadable checkpoint: {explain_load_failure(exc, path)}") from None
        if not isinstance(obj, dict):
            raise CheckpointError(f"{path} is not a loadable checkpoint: it holds a {type(obj).__name__}") from None
        return to_plain(obj), True


def community_rng_state(rng: Any) -> dict[str, Any] | None:
    """The community ``rng_state`` (torch_cpu, torch_cuda, numpy tuple, python tuple) in our shape."""
    if not isinstance(rng, Mapping):
        return None
    try:
        numpy_state = rng["numpy"]
        keys = numpy_state[1]
        if not isinstance(keys, torch.Tensor):
            keys = torch.tensor(list(keys), dtype=torch.int64)
        py_version, py_state, py_gauss = rng["python"]
        out = {
            "python": {"version": int(py_version), "state": [int(v) for v in py_state],
                       "gauss": None if py_gauss is None else float(py_gauss)},
            "numpy": {"keys": keys.to(torch.int64).to(torch.uint32), "pos": int(numpy_state[2]),
                      "has_gauss": int(numpy_state[3]), "cached_gaussian": float(numpy_state[4])},
            "torch_cpu": rng["torch_cpu"].to(torch.uint8),
            "torch_cuda": [t.to(torch.uint8) for t in (rng.get("torch_cuda") or [])],
        }
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    from trainer.checkpoints.rng import check_rng_state

    return None if check_rng_state(out) else out


def community_manifest_records(value: Any) -> dict[str, list[dict[str, Any]]] | None:
    """The community ``manifests`` record (train/val files with counts and digests) in our shape."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, list[dict[str, Any]]] = {}
    for split in ("train", "val"):
        out[split] = [{"path": str(r.get("path")), "lines": r.get("count", r.get("lines")), "sha256": r.get("sha256")}
                      for r in value.get(split) or [] if isinstance(r, Mapping)]
    return out
