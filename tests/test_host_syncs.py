"""No device-to-host syncs in a training step (issue 12).

On a GPU every read of a tensor's value on the host (``.item()``, ``.tolist()``, ``bool(t)``, ``int(t)``,
``.cpu()``, ...) waits for the device to catch up. This CUDA-less stand-in runs the trainer's own step pieces
(micro-steps with accumulation, optimizer step with its non-finite guard, frozen rows, scheduler, metrics
window) on CPU with those methods patched to count calls: the count must be 0. Reads at log intervals
(``Window.summary``) are outside the step, and outside this count. With a GPU lent, the same step under
``torch.cuda.set_sync_debug_mode("error")`` is the stronger check.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from networks.unified_voice import build_model
from trainer import steps
from trainer.data import load_items, make_dataset
from trainer.model_source import from_base_checkpoint
from trainer.schedule import build_scheduler
from trainer.vocab import BaseRowFreezer

SYNCING_METHODS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu")


@contextlib.contextmanager
def count_host_reads(calls: list[str]):
    originals = {name: getattr(torch.Tensor, name) for name in SYNCING_METHODS}

    def counting(name):
        original = originals[name]

        def wrapper(self, *args, **kwargs):
            calls.append(name)
            return original(self, *args, **kwargs)

        return wrapper

    try:
        for name in SYNCING_METHODS:
            setattr(torch.Tensor, name, counting(name))
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def _setup(config: Path, base: Path, tokenizer_path: Path, manifest: Path):
    from data_tools.config import load_config
    from data_tools.text_tokenizer import TextTokenizer

    cfg = load_config(config)
    tokenizer = TextTokenizer(tokenizer_path)
    start = from_base_checkpoint(base, cfg["gpt"], config, cfg, tokenizer)
    model = build_model(start.gpt_config)
    model.load_state_dict(start.state_dict)
    gpt = start.gpt_config
    items, _ = load_items([manifest], tokenizer, int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]), gpt=gpt)
    dataset = make_dataset(items[:8], gpt, tokenizer.vocab_size)
    batches = [dataset.collate([dataset[i] for i in range(k, k + 4)]) for k in (0, 4)]
    freezer = BaseRowFreezer(model, base_rows=int(start.base_vocab_size), extra_row=int(gpt["number_text_tokens"]))
    return model, batches, freezer


def _cases(ws):
    v2 = DemoV2Paths.under(ws.root)
    return {
        "v1.5": (ws.config, ws.base_checkpoint, ws.extended_tokenizer, ws.train_manifest),
        "v2": (v2.config, v2.base_checkpoint, v2.extended_tokenizer, v2.train_manifest),
    }


@pytest.mark.parametrize("version", ["v1.5", "v2"])
@pytest.mark.parametrize("grad_clip", [1.0, 0.0])
def test_a_training_step_reads_nothing_back_from_the_device(demo_workspace, version, grad_clip):
    model, batches, freezer = _setup(*_cases(demo_workspace)[version])
    model.train()
    device = torch.device("cpu")
    optimizer = steps.build_optimizer(model, 1e-3, 0.01, device)
    scheduler = build_scheduler(optimizer, 10, 100)
    weights = steps.LossWeights(0.2, 0.8)
    window = steps.Window()
    calls: list[str] = []
    with count_host_reads(calls):
        for _step in range(2):  # the second step runs with optimizer state in place
            parts = [steps.micro_step(model, batch, device, "off", "masked", weights, 0.5, None,
                                     contextlib.nullcontext()) for batch in batches]
            losses = steps.sum_losses(parts)
            norm, nonfinite = steps.optimizer_step(model, optimizer, None, grad_clip, losses.loss)
            freezer.after_optimizer_step()
            scheduler.step()
            window.add(_step + 1, losses, norm, nonfinite, optimizer.param_groups[0]["lr"])
    assert calls == [], f"host reads in one training step: {sorted(set(calls))}"
    summary = window.summary(1)  # the log interval reads everything at once
    assert summary["nonfinite_steps"] == 0 and summary["loss"] > 0


def test_the_counter_sees_a_host_read():
    calls: list[str] = []
    with count_host_reads(calls):
        torch.ones(2).sum().item()
        bool(torch.ones(()) > 0)
    assert calls == ["item", "__bool__"]
