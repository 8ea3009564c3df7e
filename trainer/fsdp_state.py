"""Checkpoints of a sharded run: consolidated on rank 0 at each save, resharded on load.

The choice (and why not a directory of shards per save): a checkpoint of an FSDP run is the stock single file,
bitwise what a DDP or single-process run writes for the same state. So the checkpoint store's commit marker and
digest, ``latest.pth`` / rotation / ``best.pth``, auto-resume's fallback past a torn file, the checkpoint tools,
the evaluation child, synthesis and export all work on it unchanged, and a run resumes with any number of
processes (one included): each rank reads the full state and keeps its own shard (``set_*_state_dict``).
The cost is host memory on rank 0 at a save (weights plus AdamW's two moments, gathered one tensor at a time
and offloaded to CPU, ``cpu_offload=True``): the device memory that FSDP saves stays saved.

``ShardedWeights`` and ``ShardedOptimisation`` replace the core ``weights`` and ``optimisation`` components
(``trainer.state``); their ``gather`` is the collective every rank joins before rank 0 writes.
"""

from __future__ import annotations

from typing import Any

from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from trainer.checkpoints import optimizer_param_names
from trainer.state import Optimisation, Weights

TrainingRun = Any
_GATHER = StateDictOptions(full_state_dict=True, cpu_offload=True)  # full tensors, on rank 0 only, in host memory


def optimizer_state_by_index(by_name: dict[str, Any], names: list[list[str]]) -> dict[str, Any]:
    """A full optimizer state keyed by parameter name (``get_optimizer_state_dict``) in ``Optimizer.state_dict``'s
    own layout: parameters numbered in the optimizer's order, group by group (``names``: each group's names)."""
    index = {name: i for i, name in enumerate(n for group in names for n in group)}
    groups = []
    for group, group_names in zip(by_name["param_groups"], names, strict=True):
        if list(group["params"]) != group_names:
            raise ValueError("the gathered optimizer groups do not list the parameters in the optimizer's order")
        groups.append({**group, "params": [index[name] for name in group_names]})
    state = {index[name]: value for name, value in by_name["state"].items()}
    return {"state": dict(sorted(state.items())), "param_groups": groups}


def optimizer_state_by_name(by_index: dict[str, Any], names: list[list[str]]) -> dict[str, Any]:
    """The inverse: a saved ``Optimizer.state_dict`` keyed by this optimizer's parameter names (the plan checked
    that the saved names are these, ``trainer.plan_start.optimizer_state_refusal``)."""
    flat = [n for group in names for n in group]
    groups = []
    for group, group_names in zip(by_index["param_groups"], names, strict=True):
        if len(group["params"]) != len(group_names):
            raise ValueError("the saved optimizer groups do not fit this optimizer's")
        groups.append({**group, "params": list(group_names)})
    state = {flat[int(i)]: value for i, value in by_index["state"].items()}
    return {"state": state, "param_groups": groups}


class ShardedWeights(Weights):
    """The model in the IndexTTS layout, gathered from the shards (every rank joins; rank 0 keeps it)."""

    def __init__(self, run: TrainingRun) -> None:
        super().__init__(run)
        self._full: dict[str, Any] | None = None

    def gather(self) -> None:
        self._full = get_model_state_dict(self.run.model, options=_GATHER)

    def state_dict(self) -> dict[str, Any]:
        assert self._full is not None, "gather() on every rank before a save"
        full, self._full = self._full, None
        generation = self.run.plan.generation
        assert generation is not None  # the plan that built the run named it
        return {"model_state": full, "model_config": generation.model.saved_config(self.run.model),
                "base_vocab_size": self.run.start.base_vocab_size}


class ShardedOptimisation(Optimisation):
    """The optimizer state gathered from the shards into ``Optimizer.state_dict``'s layout; on resume each rank
    takes its shard of the saved full state (any number of processes saved it)."""

    def __init__(self, run: TrainingRun) -> None:
        super().__init__(run)
        self._full: dict[str, Any] | None = None

    def gather(self) -> None:
        self._full = get_optimizer_state_dict(self.run.model, self.run.optimizer, options=_GATHER)

    def state_dict(self) -> dict[str, Any]:
        assert self._full is not None, "gather() on every rank before a save"
        by_name, self._full = self._full, None
        run = self.run
        names = optimizer_param_names(run.model, run.optimizer)
        return {"optimizer_state": optimizer_state_by_index(by_name, names),
                "scheduler_state": run.scheduler.state_dict(),
                "scaler_state": run.scaler.state_dict() if run.scaler is not None else None,
                "optimizer_param_names": names}

    def load_optimizer(self, saved: dict[str, Any]) -> None:
        run = self.run
        by_name = optimizer_state_by_name(saved, optimizer_param_names(run.model, run.optimizer))
        set_optimizer_state_dict(run.model, run.optimizer, by_name, options=StateDictOptions(full_state_dict=True))
        # The groups' settings as saved, as Optimizer.load_state_dict keeps them (the call above gives lists for
        # tuples such as betas): a resumed run saves the same layout as an uninterrupted one.
        for group, saved_group in zip(run.optimizer.param_groups, saved["param_groups"], strict=True):
            group.update({key: value for key, value in saved_group.items() if key != "params"})
