"""The S2Mel training loop: full fine-tuning or LoRA on the DiT, exact resume, background checkpoint saves.

One step: the next clips of the epoch's permutation -> their prompts (own first frames, or another clip of the
speaker: ``trainer.s2mel.cross_prompt``) and prompt lengths, t, z and the class draw from the run's
own generator -> semantic input (+ ``gpt_layer(latent)`` for v2) -> length regulation to each mel's length
(default "split": prompt region and rest in two calls, as inference) -> :func:`flow_matching_loss` in train mode (WaveNet dropout draws from torch's global RNG) -> backward,
gradient clipping, AdamW.

Exact resume: a checkpoint holds the trainable weights, the optimizer, (epoch, position), the run generator's
state and every global RNG state; restoring them continues the run bit for bit on CPU.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from networks.s2mel import S2Mel
from trainer.checkpoints.rng import capture_rng_state, restore_rng_state
from trainer.checkpoints.store import CheckpointManager
from trainer.checkpoints.writer import BackgroundWriter, WriteResult, snapshot
from trainer.metrics import truncate_after_step
from trainer.s2mel.batches import S2MelBatch, S2MelClip, collate, draw_prompt_lens, epoch_order
from trainer.s2mel.checkpoint import FORMAT_NAME, FORMAT_VERSION, PART, select_s2mel_resume
from trainer.s2mel.cross_prompt import (
    draw_partners,
    partner_table,
    prompted_items,
    resolve_prompt_mode,
    resume_refusal,
)
from trainer.s2mel.forward import (
    FlowDraws,
    draw_flow_noise,
    flow_matching_loss,
    regulate,
    regulate_split,
)
from trainer.s2mel.lora import (
    adapter_state_dict,
    attach_lora,
    load_adapter_state,
)
from trainer.s2mel.train_settings import S2MelRunError, S2MelTrainSettings
from trainer.signals import killed_during_save, simulated_disk_full


def unused_parameter_names(model: S2Mel, *, uses_gpt_layer: bool) -> list[str]:
    """Parameters that never get a gradient on the training path (README_indextts2_audio.md 10.1)."""
    depth = len(model.cfm.estimator.transformer.layers)
    names = [f"cfm.estimator.transformer.layers.{i}.skip_in_linear." for i in range(depth // 2 + 1)]
    names += [
        "cfm.estimator.x_embedder.",
        "cfm.estimator.cond_embedder.",
        "cfm.estimator.content_mask_embedder.",
        "length_regulator.embedding.",
        "length_regulator.mask_token",
    ]
    if not uses_gpt_layer:
        names.append("gpt_layer.")
    return [n for n, _ in model.named_parameters() if any(n.startswith(prefix) for prefix in names)]


@dataclass
class StepReport:
    step: int
    epoch: int
    loss: float
    grad_norm: float


class S2MelTrainer:
    """Owns one S2Mel run: model (wrapped for LoRA when asked), optimizer, position and generators."""

    def __init__(
        self,
        model: S2Mel,
        clips: Sequence[S2MelClip],
        settings: S2MelTrainSettings,
        output_dir: str | Path,
        *,
        base: dict[str, str] | None = None,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        speakers: Sequence[str | None] | None = None,
    ) -> None:
        if not clips:
            raise S2MelRunError("no clips to train the S2Mel on")
        self.settings = settings
        speakers = list(speakers) if speakers is not None else [None] * len(clips)
        try:  # "own" or "cross" (settings.prompt "auto": cross where a speaker has several clips)
            self.prompt_mode = resolve_prompt_mode(settings.prompt, speakers)
        except ValueError as exc:
            raise S2MelRunError(str(exc)) from None
        self.partners = partner_table(speakers)
        self.last_prompts: list[tuple[int, int]] = []  # the last step's (target, prompt) clip indices
        self.clips = clips  # a list, or PreparedClips that builds each clip when a batch needs it
        self.output_dir = Path(output_dir)
        self.base = dict(base or {})
        self.device = torch.device(device)
        # torchrun: every rank a share of each global batch (trainer.s2mel.data_parallel); rank 0 writes
        self.rank, self.world_size = int(rank), int(world_size)
        self.is_main = self.rank == 0
        self.uses_gpt_layer = model.gpt_layer is not None and clips[0].gpt_latent is not None
        torch.manual_seed(settings.seed)  # LoRA's init draws; a resume restores the saved state after it
        if settings.mode == "lora":
            attach_lora(model, settings.lora)
        else:
            for parameter in model.parameters():
                parameter.requires_grad_(True)
        unused = set(unused_parameter_names(model, uses_gpt_layer=self.uses_gpt_layer))
        for name, parameter in model.named_parameters():
            if name in unused:
                parameter.requires_grad_(False)
        self.model = model.to(self.device)
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.trainable, lr=settings.learning_rate, weight_decay=settings.weight_decay
        )
        self.generator = torch.Generator().manual_seed(settings.seed)
        self.step_count = 0
        self.epoch = 0
        self.position = 0
        self.last_loss = math.nan
        self.manager = CheckpointManager(self.output_dir, settings.keep_checkpoints)
        self.writer = BackgroundWriter(self.manager, write_context=_fault_injection)
        self.notes: list[str] = []
        # Run-level state that rides in the checkpoints (state_dict / load_state_dict(saved, notes)): the guard.
        self.components: dict[str, Any] = {}

    # -- state -------------------------------------------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        s = self.settings
        model = self.model
        ckpt: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "part": PART,
            "mode": s.mode,
            "base": self.base,
            "settings": s.record(),
            "prompt_mode": self.prompt_mode,
            "uses_gpt_layer": self.uses_gpt_layer,
            "optimizer": self.optimizer.state_dict(),
            "step": self.step_count,
            "epoch": self.epoch,
            "position": self.position,
            "draw_rng": self.generator.get_state(),
            "rng": capture_rng_state(),
            "loss": None if math.isnan(self.last_loss) else self.last_loss,
        }
        if self.components:
            ckpt["components"] = {name: part.state_dict() for name, part in self.components.items()}
        if s.mode == "full":
            ckpt["net"] = model.net_state_dict()
        else:
            ckpt["adapter"] = adapter_state_dict(model)
            ckpt["lora"] = s.record()["lora"]
            ckpt["regulator"] = model.length_regulator.state_dict() if s.lora.train_regulator else None
        return ckpt

    def restore(self, ckpt: dict[str, Any], where: str) -> None:
        if ckpt.get("mode") != self.settings.mode:
            raise S2MelRunError(
                f"{where} is a {ckpt.get('mode')} S2Mel run; this run is {self.settings.mode}"
            )
        refusal = resume_refusal(ckpt, self.prompt_mode, where)
        if refusal:
            raise S2MelRunError(refusal)
        if self.settings.mode == "full":
            self.model.load_net(ckpt["net"], where)
        else:
            saved = {"dora": False, **(ckpt.get("lora") or {})}  # records from before DoRA: plain LoRA
            if saved != self.settings.record()["lora"]:
                raise S2MelRunError(f"{where}: its LoRA settings {ckpt.get('lora')} differ from this run's")
            load_adapter_state(self.model, ckpt["adapter"], where)
            if ckpt.get("regulator") is not None:
                self.model.length_regulator.load_state_dict(ckpt["regulator"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.step_count, self.epoch, self.position = (
            int(ckpt["step"]),
            int(ckpt["epoch"]),
            int(ckpt["position"]),
        )
        self.generator.set_state(ckpt["draw_rng"])
        self.notes.extend(restore_rng_state(ckpt["rng"]))
        self.last_loss = math.nan if ckpt.get("loss") is None else float(ckpt["loss"])
        saved = ckpt.get("components") or {}
        for name, part in self.components.items():
            if name in saved:
                part.load_state_dict(saved[name], self.notes)

    def resume_if_any(self) -> Path | None:
        """Continue from the output folder's newest usable checkpoint (None: a fresh start)."""
        if self.is_main:
            self.manager.clean_stale_temp_files()  # a save killed mid-write leaves its temp file
        choice = select_s2mel_resume(self.output_dir)
        if choice is None:
            if self.is_main:  # as a GPT run: a fresh start drops what an attempt killed before its first save left
                (self.output_dir / "metrics.jsonl").unlink(missing_ok=True)
            return None
        path, ckpt, notes = choice
        self.notes.extend(notes)
        self.restore(ckpt, str(path))
        if self.is_main:  # the lines of steps the resumed run redoes (a kill after the last save left them)
            truncate_after_step(self.output_dir / "metrics.jsonl", self.step_count)
        return path

    # -- one step ----------------------------------------------------------------------------------------------

    def next_indices(self) -> list[int]:
        order = epoch_order(len(self.clips), self.settings.seed, self.epoch)
        chosen = order[self.position : self.position + self.settings.batch_size]
        self.position += len(chosen)
        if self.position >= len(order):
            self.epoch, self.position = self.epoch + 1, 0
        return chosen

    def prompted_batch(self, indices: list[int]) -> S2MelBatch:
        """The step's batch with its prompts; every draw from the run generator, in a fixed order."""
        targets = [self.clips[i] for i in indices]
        if self.prompt_mode == "own":
            self.last_prompts = [(i, i) for i in indices]
            x_lens = torch.tensor([c.frames for c in targets])
            return collate(targets, draw_prompt_lens(x_lens, self.settings.prompt_fraction, self.generator))
        partners = draw_partners(indices, self.partners, self.generator)
        self.last_prompts = list(zip(indices, partners, strict=True))
        items = prompted_items(targets, [self.clips[i] for i in partners], self.settings.prompt_fraction,
                               self.generator)
        return collate(items.clips, items.prompt_lens, items.prompt_semantic_lens)

    def semantic_input(self, batch: S2MelBatch) -> torch.Tensor:
        if self.uses_gpt_layer:
            assert self.model.gpt_layer is not None and batch.gpt_latent is not None
            return batch.code_embedding + self.model.gpt_layer(batch.gpt_latent)
        return batch.code_embedding

    def regulated(self, batch: S2MelBatch) -> torch.Tensor:
        regulator, s = self.model.length_regulator, self.settings
        target = self.semantic_input(batch)
        if s.regulation == "split":
            prompt = batch.prompt_semantic if batch.prompt_semantic is not None else batch.code_embedding
            return regulate_split(
                regulator, prompt, target, batch.semantic_lens, batch.prompt_lens, batch.x_lens,
                batch.prompt_semantic_lens,
            )
        return regulate(
            regulator, target, batch.semantic_lens, batch.x_lens, per_item=s.regulation == "per_item"
        )

    def batch_loss(self, batch: S2MelBatch, draws: FlowDraws) -> torch.Tensor:
        mu = self.regulated(batch)
        s = self.settings
        return flow_matching_loss(
            self.model,
            batch.x1,
            batch.x_lens,
            batch.prompt_lens,
            mu,
            batch.style,
            draws,
            loss_type=s.loss_type,
            class_dropout_prob=s.class_dropout_prob,
        ).loss

    def train_step(self) -> StepReport:
        self.model.train()
        batch = self.prompted_batch(self.next_indices()).to(self.device)
        draws = draw_flow_noise(batch.x1, self.generator)
        if self.world_size > 1:
            loss = self._data_parallel_backward(batch, draws)
        else:
            loss = self.batch_loss(batch, draws)
            loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, self.settings.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        self.last_loss = float(loss.detach())
        return StepReport(self.step_count, self.epoch, self.last_loss, float(grad_norm))

    def _data_parallel_backward(self, batch: S2MelBatch, draws: FlowDraws) -> torch.Tensor:
        """This rank's share of the global batch's mean loss, backpropagated; gradients summed over the ranks."""
        from trainer.s2mel import data_parallel as dp

        dp.seed_step(self.settings.seed, self.step_count, self.rank)
        size = int(batch.x1.shape[0])
        items = dp.rank_items(size, self.rank, self.world_size)
        if items:
            mine, my_draws = dp.select_items(batch, draws, items)
            s = self.settings
            share = flow_matching_loss(self.model, mine.x1, mine.x_lens, mine.prompt_lens, self.regulated(mine),
                                       mine.style, my_draws, loss_type=s.loss_type,
                                       class_dropout_prob=s.class_dropout_prob).loss_items.sum() / size
            share.backward()
        else:
            share = torch.zeros((), device=self.device)
        dp.sum_gradients(self.trainable)
        return torch.tensor(dp.summed(share))

    @torch.no_grad()
    def validation_loss(self, clips: Sequence[S2MelClip], seed: int = 0) -> float:
        """Loss on ``clips`` with fixed prompt lengths and draws (seeded), dropout off, conditioning kept.

        Train mode stays on (upstream's eval mode drops the conditioning); only the Dropout modules are put in
        eval, and the global RNG is left untouched, so calling this never changes the run's course.
        """
        self.model.train()
        dropouts = [m for m in self.model.modules() if isinstance(m, nn.Dropout)]
        for module in dropouts:
            module.eval()
        try:
            generator = torch.Generator().manual_seed(seed)
            total = 0.0
            for start in range(0, len(clips), self.settings.batch_size):
                chunk = list(clips[start : start + self.settings.batch_size])
                x_lens = torch.tensor([c.frames for c in chunk])
                prompt_lens = draw_prompt_lens(x_lens, self.settings.prompt_fraction, generator)
                batch = collate(chunk, prompt_lens).to(self.device)
                draws = draw_flow_noise(batch.x1, generator)
                draws = FlowDraws(draws.t, draws.z, class_draw=1.0)
                total += float(self.batch_loss(batch, draws)) * len(chunk)
            return total / len(clips)
        finally:
            for module in dropouts:
                module.train()

    # -- the run -----------------------------------------------------------------------------------------------

    def save(self) -> WriteResult | None:
        """Snapshot now, write in the background; returns the previous write's outcome if one was pending (rank 0
        alone writes)."""
        if not self.is_main:
            return None
        return self.writer.submit(snapshot(self.checkpoint()), self.step_count, is_best=False)

    def run(
        self,
        *,
        until_step: int | None = None,
        on_step: Callable[[StepReport], None] | None = None,
        on_save: Callable[[S2MelTrainer], None] | None = None,
    ) -> list[StepReport]:
        """Train to ``max_steps`` (or ``until_step``), saving every ``save_interval`` steps and at the end."""
        last = min(self.settings.max_steps, until_step or self.settings.max_steps)
        reports: list[StepReport] = []
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            metrics = (stack.enter_context(open(self.output_dir / "metrics.jsonl", "a", encoding="utf-8"))
                       if self.is_main else None)
            while self.step_count < last:
                report = self.train_step()
                reports.append(report)
                if metrics is not None:
                    metrics.write(json.dumps({"event": "train", "part": PART, **asdict(report)}) + "\n")
                    metrics.flush()  # a killed run keeps the lines of the steps it did
                if on_step is not None:
                    on_step(report)
                if (
                    self.step_count % self.settings.save_interval == 0
                    or self.step_count == self.settings.max_steps
                ):
                    self._raise_on_failed(self.save())
                    if on_save is not None:
                        on_save(self)
        self._raise_on_failed(self.writer.wait())
        return reports

    @staticmethod
    def _raise_on_failed(result: WriteResult | None) -> None:
        if result is not None and result.error is not None:
            raise S2MelRunError(result.error)


def _fault_injection(step: int) -> ExitStack:
    """The GPT trainer's save hooks (``trainer.signals``), so S2Mel saves are tested the same way: a write that
    fails as on a full disk, or a kill in the middle of the write; inert unless STUDIO_TEST_HOOKS=1 names them."""
    stack = ExitStack()
    stack.enter_context(simulated_disk_full(step))
    stack.enter_context(killed_during_save(step))
    return stack


def trainable_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every trainable tensor by name (for comparing runs bit for bit)."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
