"""Training state as components: each piece says what it saves and how it restores (torchtitan's Stateful idea).

A checkpoint is assembled from the components of a run: ``checkpoint_fields(run)`` merges what every
component saves, and ``restore_components(run, ckpt)`` hands each component its part back. Adding a piece
of state is one class and one ``register_component`` call; nothing else changes:

- the core components (weights, optimisation set, position, RNG streams, run record, metrics window, frozen
  rows) fill the checkpoint format's own fields (``trainer.checkpoints.build_checkpoint``);
- any other registered component is stored under ``extra["state"][name]`` and handed back on resume.

Components that save nothing say so (the metrics window restarts after a resume; the frozen rows are
restored from the weights, see ``trainer.vocab.BaseRowFreezer``), so what is and is not in a checkpoint is
written down in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from networks.lora import base_state_dict
from trainer.checkpoints import capture_rng_state, optimizer_param_names, restore_rng_state
from trainer.errors import UsageError
from trainer.plan_start import optimizer_state_refusal
from trainer.schedule import set_peak_lr

TrainingRun = Any  # trainer.run.TrainingRun (not imported: it imports this module)

EXTRA_STATE = "state"  # extra["state"][name]: the state of components outside the core format


class Stateful(Protocol):
    """What a component saves (``state_dict``) and how it restores (``load_state_dict``); the ``core`` ones
    return checkpoint-format fields, the others any plain data (tensors, numbers, strings, lists, dicts)."""

    name: str
    core: bool

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None: ...


ComponentFactory = Callable[[TrainingRun], Stateful]
_REGISTERED: dict[str, ComponentFactory] = {}


def register_component(name: str, factory: ComponentFactory) -> None:
    """Add a component to every run built from now on (``factory(run)`` makes it when the run starts)."""
    _REGISTERED[name] = factory


def unregister_component(name: str) -> None:
    _REGISTERED.pop(name, None)


# ----- the core components ----------------------------------------------------------------------------------


class Weights:
    """The model in the IndexTTS layout, its config and the base vocabulary size (restored by the run plan)."""

    name, core = "weights", True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        run = self.run
        # The stock layout: LoRA factors (if any) are the ``lora adapters`` component's (trainer.lora_setup).
        generation = run.plan.generation
        assert generation is not None  # the plan that built the run named it
        return {"model_state": base_state_dict(run.model), "model_config": generation.model.saved_config(run.model),
                "base_vocab_size": run.start.base_vocab_size}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        notes.append("model weights")  # loaded with the model (trainer.run.TrainingRun.build_model)


class Optimisation:
    """Optimizer, scheduler and grad scaler: saved together and restored together or not at all."""

    name, core = "optimisation", True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        run = self.run
        return {"optimizer_state": run.optimizer.state_dict(), "scheduler_state": run.scheduler.state_dict(),
                "scaler_state": run.scaler.state_dict() if run.scaler is not None else None,
                "optimizer_param_names": optimizer_param_names(run.model, run.optimizer)}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        from trainer import steps

        run = self.run
        if ckpt.get("optimizer") is None:
            notes.append("no optimizer state in the checkpoint: optimizer, scheduler and grad scaler start fresh")
            return
        # The plan refused this already (trainer.plan_start.check_resume, on a meta model); the same rule guards
        # the real one.
        where = str(run.plan.resume.path) if run.plan.resume is not None else "the checkpoint"
        refusal = optimizer_state_refusal(ckpt, optimizer_param_names(run.model, run.optimizer), where)
        if refusal:
            raise UsageError(refusal)
        self.load_optimizer(ckpt["optimizer"])
        run.scheduler.load_state_dict(ckpt["scheduler"])
        languages = getattr(run, "languages", None)  # --lang-lr-mult as this run says (trainer.run_languages)
        if languages is not None:
            steps.refresh_lr_mults(run.optimizer, run.model, languages.lr_mults())
        set_peak_lr(run.scheduler, run.opts.learning_rate)
        steps.apply_hparams(run.optimizer, run.opts.weight_decay)
        parts = "optimizer + scheduler"
        if run.scaler is not None and ckpt.get("scaler") is not None:
            run.scaler.load_state_dict(ckpt["scaler"])
            parts += " + grad scaler"
        elif run.scaler is not None:
            parts += " (grad scaler starts fresh: the checkpoint was not trained with fp16)"
        elif ckpt.get("scaler") is not None:
            parts += " (the checkpoint's fp16 grad scaler is not used with --amp " + run.opts.amp + ")"
        notes.append(parts)


    def load_optimizer(self, saved: dict[str, Any]) -> None:
        """The saved ``Optimizer.state_dict`` into the run's optimizer (a sharded run takes its shard of it)."""
        self.run.optimizer.load_state_dict(saved)


class Position:
    """Step, epoch, position in the epoch, the sampler's state and samples seen, and the losses so far."""

    name, core = "position", True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        state = self.run.state
        return {"epoch": state.epoch, "position": state.position, "step": state.step,
                "sampler_state": self.run.sampler.state_dict(state.epoch, state.position, state.samples_seen),
                "last_losses": state.last_losses, "last_val_loss": state.last_val_loss,
                "best_val_loss": state.best_val_loss}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        point, state = self.run.plan.resume_point, self.run.state
        assert point is not None  # the plan derived where this run continues (trainer.sampler.resume_position)
        state.step, state.epoch, state.position = int(ckpt["step"]), point.epoch, point.position
        state.samples_seen = point.samples_seen
        state.last_val_loss, state.best_val_loss = ckpt.get("last_val_loss"), ckpt.get("best_val_loss")
        state.last_losses = ckpt.get("last_losses")
        notes.append(f"step {state.step}, epoch {state.epoch}, position {state.position} (sampler)")


RESEED_STEP_STRIDE = 1_000_003  # (seed, rank, step) -> a seed no other (rank, step) of the run gives


class RngStreams:
    """Python, numpy and torch (CPU and CUDA) random streams of every rank.

    ``rng_state`` is rank 0's (what single-process tools read); under torchrun ``rng_state["ranks"]`` holds
    every rank's, gathered before each save (``gather``, a collective every rank joins: it is also the barrier
    before rank 0 writes). On resume with the same number of processes each rank gets its own streams back;
    with a different number every rank re-seeds from (seed, rank, step): the run continues, not bitwise exactly
    (the sampler's resume line says so, as the world size is part of its state).
    """

    name, core = "rng", True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run
        self._ranks: list[dict[str, Any]] | None = None

    def gather(self) -> None:
        from trainer.distributed import gather_objects

        if self.run.ctx.enabled:
            self._ranks = gather_objects(self.run.ctx, capture_rng_state())

    def state_dict(self) -> dict[str, Any]:
        if self._ranks is None:
            return {"rng_state": capture_rng_state()}
        ranks, self._ranks = self._ranks, None
        return {"rng_state": {**ranks[0], "ranks": ranks}}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        import random

        import numpy as np
        import torch

        run, rng = self.run, ckpt.get("rng")
        seed, rank, world = run.opts.seed, run.ctx.rank, run.ctx.world_size
        if rng is None:
            torch.manual_seed(seed + rank)
            return
        ranks = rng.get("ranks")
        saved_world = len(ranks) if ranks else int((ckpt.get("sampler") or {}).get("world_size") or 1)
        if saved_world != world:
            reseed = seed + rank + RESEED_STEP_STRIDE * run.state.step
            random.seed(reseed)
            np.random.seed(reseed % 2**32)
            torch.manual_seed(reseed)
            notes.append(f"RNG re-seeded from (seed, rank, step): saved by {saved_world} process(es), now {world}")
            return
        mine = ranks[rank] if ranks else rng
        notes.append("RNG (python, numpy, torch cpu" + (", cuda" if mine.get("torch_cuda") else "") + ")"
                     + (f", each of {world} ranks its own" if ranks else ""))
        for note in restore_rng_state(mine):
            run.say(f"note: {note}")
        if not ranks and rank > 0:  # an older multi-process checkpoint held rank 0's streams only
            torch.manual_seed(seed + rank + RESEED_STEP_STRIDE * run.state.step)


class RunRecord:
    """What the run was made of (manifests, tokenizer, hyper-parameters): checked on resume by the run plan."""

    name, core = "run record", True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        expectation = self.run.plan.expectation
        assert expectation is not None
        return {"manifests": expectation.manifests, "tokenizer": expectation.tokenizer,
                "hparams": expectation.hparams}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        """Validated against this run's options by the plan (trainer.checkpoints.validate_checkpoint)."""


class NothingSaved:
    """A component whose state is deliberately not in checkpoints (the reason is its docstring)."""

    core = True

    def __init__(self, run: TrainingRun) -> None:
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, ckpt: dict[str, Any], notes: list[str]) -> None:
        return None


class MetricsWindow(NothingSaved):
    """The losses since the last log line: a resumed run starts a new window (metrics.jsonl keeps the history)."""

    name = "metrics window"


class FrozenRows(NothingSaved):
    """The frozen base rows: restored after every step from the weights the run started with, which on resume
    are the checkpoint's (bitwise the base checkpoint's rows): nothing extra to store."""

    name = "frozen rows"


CORE_COMPONENTS: tuple[ComponentFactory, ...] = (Weights, Optimisation, Position, RngStreams, RunRecord,
                                                 MetricsWindow, FrozenRows)


def components_of(run: TrainingRun) -> list[Stateful]:
    return [factory(run) for factory in CORE_COMPONENTS] + [factory(run) for factory in _REGISTERED.values()]


def gather_components(components: list[Stateful]) -> None:
    """On every rank before a save: components whose state lives on every rank collect it (a collective)."""
    for component in components:
        gather = getattr(component, "gather", None)
        if gather is not None:
            gather()


def checkpoint_fields(components: list[Stateful]) -> dict[str, Any]:
    """``build_checkpoint``'s keyword arguments, assembled from every component."""
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for component in components:
        state = component.state_dict()
        if component.core:
            overlap = set(fields) & set(state)
            if overlap:
                raise ValueError(f"component {component.name} saves {sorted(overlap)}, already saved by another")
            fields.update(state)
        else:
            extra[component.name] = state
    if extra:
        fields["extra"] = {EXTRA_STATE: extra}
    return fields


def restore_components(components: list[Stateful], ckpt: dict[str, Any]) -> list[str]:
    """Hand every component its part of ``ckpt``; returns what was restored, for the log."""
    notes: list[str] = []
    saved_extra = ((ckpt.get("extra") or {}).get(EXTRA_STATE) or {}) if isinstance(ckpt.get("extra"), dict) else {}
    for component in components:
        if component.core:
            component.load_state_dict(ckpt, notes)
        elif component.name in saved_extra:
            component.load_state_dict(saved_extra[component.name], notes)
        else:
            notes.append(f"{component.name}: not in the checkpoint, starts fresh")
    return notes
