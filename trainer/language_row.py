"""The IndexTTS-2.5 language row of a run (issue 23 item 5).

``--lang-init-from CODE`` copies the trained ``lang_embedding`` row of ``CODE`` (e.g. ``en``) over the row of
the run's language (the language of the first ``--train-manifest``, ``PATH::am``) at a fresh start (never on a
resume: the row has trained since). From then on only that row changes: every other row of the table is held
bitwise by the frozen-rows machinery (``trainer.vocab.BaseRowFreezer`` on ``lang_embedding.weight``: their
gradient is zeroed and their values restored after each optimizer step). ``--lang-lr-mult`` gives the table its
own optimizer group whose learning rate is that multiple of the run's (``trainer.steps.parameter_groups``).

The 2.5 GPT is ``networks.gpt_v25.UnifiedVoiceV25``; these helpers need only a model with ``lang_embedding``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from data_tools.manifest import parse_manifest_spec
from generations.indextts25.data.tiktoken_table import LANGUAGE_CODES, language_index
from trainer.run_options import RunOptions, as_run_options
from trainer.vocab import BaseRowFreezer

LANG_TABLE = "lang_embedding.weight"


def run_language(opts: RunOptions | Mapping[str, Any]) -> str | None:
    """The run's language: the ``::lang`` of the first ``--train-manifest`` (None when it has none)."""
    opts = as_run_options(opts)
    manifests = list(opts.train_manifest or [])
    if not manifests:
        return None
    language = parse_manifest_spec(manifests[0]).language
    return language.strip().lower() if language else None


def language_row_refusal(opts: RunOptions | Mapping[str, Any], generation: Any) -> str | None:
    """Why ``--lang-init-from`` / ``--lang-lr-mult`` cannot apply to this run (None: they can or are unused);
    ``generation``: the run's registry entry (None: not known), whose GPT has a language table or not."""
    opts = as_run_options(opts)
    code = str(opts.lang_init_from or "").strip().lower()
    mult = float(opts.lang_lr_mult)
    if not code and mult == 1.0:
        return None
    what = "--lang-init-from" if code else "--lang-lr-mult"
    if generation is None or not generation.model.language_table:
        name = generation.name if generation is not None else "unknown"
        return (f"{what} applies to IndexTTS-2.5 GPTs (their per-language table); --config describes an "
                f"{name} GPT")
    if not code:
        return None
    if code not in LANGUAGE_CODES:
        return f"--lang-init-from {code}: not a language code of the IndexTTS-2.5 table (e.g. en, zh, am)"
    target = run_language(opts)
    if target is None:
        return ("--lang-init-from needs the run's language: give the first --train-manifest as PATH::lang "
                "(e.g. train.jsonl::am)")
    if target not in LANGUAGE_CODES:
        return f"the run's language {target} (first --train-manifest) is not a language code of the 2.5 table"
    if target == code:
        return f"--lang-init-from {code} is the run's own language: nothing to copy"
    return None


@torch.no_grad()
def init_language_row(model: nn.Module, source: str, target: str) -> str:
    """Copy ``source``'s row of ``lang_embedding`` over ``target``'s; returns the log line."""
    table = model.get_parameter(LANG_TABLE)
    src, dst = language_index(source), language_index(target)
    table[dst].copy_(table[src])
    return f"language row {target} (row {dst}) initialised from {source} (row {src})"


def freeze_other_language_rows(model: nn.Module, target: str) -> BaseRowFreezer:
    """Every ``lang_embedding`` row but ``target``'s held bitwise (call ``after_optimizer_step`` each step)."""
    rows = model.get_parameter(LANG_TABLE).shape[0]
    keep = language_index(target)
    return BaseRowFreezer(model, [row for row in range(rows) if row != keep], tensors=(LANG_TABLE,))


def lang_lr_mults(model: nn.Module, opts: RunOptions | Mapping[str, Any]) -> dict[str, float]:
    """The optimizer's per-parameter learning-rate multipliers: the language table's, when not 1."""
    opts = as_run_options(opts)
    mult = float(opts.lang_lr_mult)
    names = {name for name, _ in model.named_parameters()}
    return {LANG_TABLE: mult} if mult != 1.0 and LANG_TABLE in names else {}
