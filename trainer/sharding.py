"""The rule of ``--sharding fsdp`` that the run plan and the sharded run both check (no torch import here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.run_options import RunOptions, as_run_options


def fsdp_refusal(opts: RunOptions | Mapping[str, Any]) -> str | None:
    """Why ``--sharding fsdp`` cannot train the run of ``opts`` (None: it can, or the run is not sharded)."""
    opts = as_run_options(opts)
    if opts.sharding != "fsdp":
        return None
    if opts.lora:
        return ("--sharding fsdp shards a full fine-tune; LoRA trains adapters only, which DDP fits: use "
                "--sharding ddp")
    if opts.amp == "fp16":
        return "--sharding fsdp trains with --amp bf16 or off, not fp16 (its grad scaler does not take sharded gradients)"
    return None
