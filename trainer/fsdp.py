"""FSDP2 under torchrun (``--sharding fsdp``): parameters, gradients and optimizer state sharded over the ranks.

For a full fine-tune that does not fit one device with DDP. ``shard_run(run)`` turns a built ``TrainingRun``
into a sharded one, in place, before its optimizer is made:

- every transformer block, then the whole model, goes through PyTorch's ``fully_shard`` (each parameter a
  DTensor sharded on dim 0; a block's weights are gathered only while it runs);
- the frozen base rows (``trainer.vocab.BaseRowFreezer``, also the 2.5 language row's) are held on the shards:
  each rank zeroes the gradient of, and restores after every step, the frozen rows that fall in its own shard;
- the ``weights`` and ``optimisation`` checkpoint components become their consolidating versions
  (``trainer.fsdp_state``): a checkpoint stays the stock single file, so every tool and promise of a DDP
  checkpoint holds, and any number of processes (one included) resumes it;
- ``run.train_model`` gets DDP's ``no_sync()`` (gradient accumulation without a reduce-scatter per micro-batch).

Refused under FSDP: LoRA (adapters train a small part; DDP fits) and ``--amp fp16`` (its grad scaler is not
made for sharded gradients; bf16 is). Training samples are not made: rank 0 alone cannot run a sharded model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

from trainer.errors import UsageError
from trainer.sharding import fsdp_refusal
from trainer.vocab import BaseRowFreezer

TrainingRun = Any  # trainer.run.TrainingRun (it imports trainer.distributed, which imports this module)


class ShardedTrainModel(nn.Module):
    """The sharded model as the training loop drives it: its forward, and DDP's ``no_sync()``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        assert isinstance(model, FSDPModule)
        self.module = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradients accumulate unsharded on each rank; the micro-batch after this one reduce-scatters them."""
        self.module.set_requires_gradient_sync(False)  # type: ignore[operator]
        try:
            yield
        finally:
            self.module.set_requires_gradient_sync(True)  # type: ignore[operator]


def _shard_rows(param: DTensor) -> tuple[int, int]:
    """The global rows ``[start, stop)`` of dim 0 that this rank's shard of ``param`` holds.

    FSDP2 shards dim 0 as ``torch.chunk`` does: rank r holds rows ``r*c .. (r+1)*c - 1`` (c = ceil(rows/world)),
    the last ranks fewer or none."""
    mesh = param.device_mesh
    rank, world = mesh.get_local_rank(), mesh.size()
    rows = param.shape[0]
    chunk = -(-rows // world)
    start = min(rows, rank * chunk)
    return start, start + param.to_local().shape[0]


class ShardedRowFreezer:
    """``BaseRowFreezer``'s promise on sharded parameters: the frozen rows of each shard get no gradient (so the
    gradient norm and clipping are those of DDP) and are copied back bitwise after every optimizer step.

    Built from the freezer made on the unsharded model: its reference rows are the full rows as loaded (the
    base checkpoint's, or on resume the checkpoint's, which are bitwise the base's)."""

    def __init__(self, unsharded: BaseRowFreezer, model: nn.Module) -> None:
        unsharded.remove()  # its hooks were on the parameters fully_shard replaced
        self.rows = unsharded.rows
        self.params: dict[str, DTensor] = {}
        self._local: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # name -> (local row index, its rows)
        self._num_frozen = unsharded.num_frozen_params
        for key in unsharded.params:
            param = model.get_parameter(key)
            if not isinstance(param, DTensor):
                raise UsageError(f"--sharding fsdp: {key} is not sharded; its frozen rows cannot be held")
            start, stop = _shard_rows(param)
            mine = [i for i, row in enumerate(self.rows) if start <= row < stop]
            local_rows = torch.tensor([self.rows[i] - start for i in mine], dtype=torch.long)
            local = param.to_local()
            reference = unsharded.reference[key].index_select(0, torch.tensor(mine, dtype=torch.long,
                                                                              device=unsharded.reference[key].device))
            self.params[key] = param
            self._local[key] = (local_rows.to(local.device), reference.to(local.device, local.dtype))
            if param.requires_grad and mine:
                param.register_post_accumulate_grad_hook(self._zero_rows_hook(key))

    def _zero_rows_hook(self, key: str):
        """Runs once the reduce-scattered gradient is on the shard, before clipping and the optimizer step."""

        def hook(param: torch.Tensor) -> None:
            if param.grad is not None:
                grad = param.grad.to_local() if isinstance(param.grad, DTensor) else param.grad
                index, _ = self._local[key]
                grad.index_fill_(0, index.to(grad.device), 0)

        return hook

    @property
    def num_frozen_params(self) -> int:
        return self._num_frozen

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        for key, param in self.params.items():
            index, reference = self._local[key]
            if len(index):
                param.to_local().index_copy_(0, index, reference)

    @torch.no_grad()
    def mismatches(self) -> list[str]:
        """Names of the tensors whose frozen rows in this rank's shard differ from the reference."""
        return [key for key, param in self.params.items()
                if not torch.equal(param.to_local().index_select(0, self._local[key][0]), self._local[key][1])]

    def remove(self) -> None:
        """Nothing to detach: the hooks live as long as the sharded parameters (the run's)."""


def transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The GPT backbone's blocks (``gpt.h``), each its own FSDP unit; none when the model has no such list."""
    blocks = getattr(getattr(model, "gpt", None), "h", None)
    return list(blocks) if isinstance(blocks, nn.ModuleList) else []


def shard_run(run: TrainingRun) -> nn.Module:
    """Shard ``run.model`` in place, hold its frozen rows on the shards, swap in the consolidating checkpoint
    components; returns the module the training loop drives (``run.train_model``)."""
    from trainer.fsdp_state import ShardedOptimisation, ShardedWeights

    why = fsdp_refusal(run.opts.replace(sharding="fsdp"))
    if why:
        raise UsageError(why)
    model = run.model
    for block in transformer_blocks(model):
        fully_shard(block)
    fully_shard(model)
    if run.freezer is not None:
        run.freezer = ShardedRowFreezer(run.freezer, model)
    languages = getattr(run, "languages", None)
    if languages is not None and languages.row_freezer is not None:
        languages.row_freezer = ShardedRowFreezer(languages.row_freezer, model)
    replacements = {"weights": ShardedWeights(run), "optimisation": ShardedOptimisation(run)}
    run.components = [replacements.get(component.name, component) for component in run.components]
    samples = run.plan.samples
    if samples is not None and samples.enabled:
        run.say("note: no training samples under --sharding fsdp (rank 0 alone cannot run the sharded model); "
                "listen to a checkpoint in the Test tab")
        run.plan.samples = None
    run.say(f"sharding: FSDP2 over {run.ctx.world_size} processes ({len(transformer_blocks(model))} blocks and the "
            "rest, each sharded); checkpoints are consolidated on rank 0")
    return ShardedTrainModel(model)
