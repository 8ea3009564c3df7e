"""The IndexTTS-2.5 language row (issue 23 item 5), at the model and optimizer level.

``--lang-init-from en`` copies en's ``lang_embedding`` row over the run's language row; afterwards only that row
changes (every other row bitwise, whatever AdamW and weight decay do, also with other languages in the batch),
and ``--lang-lr-mult`` gives the table its own learning rate, kept across a scheduler restore.
"""

from __future__ import annotations

import pytest
import torch

from generations.indextts25.data.tiktoken_table import language_index
from generations.registry import by_id
from networks.gpt_v25 import build_gpt_v25
from tests.test_gpt_v25 import tiny_batch, tiny_gpt
from trainer.language_row import (
    LANG_TABLE,
    freeze_other_language_rows,
    init_language_row,
    lang_lr_mults,
    language_row_refusal,
    run_language,
)
from trainer.lora_setup import adapt_model
from trainer.schedule import build_scheduler, set_peak_lr
from trainer.steps import build_optimizer

OPTS = {"train_manifest": ["am.jsonl::am@2", "en.jsonl::en@1"], "lang_init_from": "en", "lang_lr_mult": 5.0}


def model_25():
    torch.manual_seed(0)
    return build_gpt_v25(tiny_gpt())


def train_steps(model, optimizer, freezer, scheduler, steps=3):
    batch = tiny_batch()  # langs [am, en]: both rows get gradients
    for _ in range(steps):
        out = model(**batch)
        (out.loss_text + out.loss_mel).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        freezer.after_optimizer_step()
        scheduler.step()


def test_only_the_target_row_changes_and_trains_at_its_own_rate():
    model = model_25()
    table = model.get_parameter(LANG_TABLE)
    before = table.detach().clone()
    am, en = language_index("am"), language_index("en")
    assert run_language(OPTS) == "am" and am == 75
    line = init_language_row(model, "en", "am")
    assert "row 75" in line and torch.equal(table[am], before[en])
    copied = table.detach().clone()
    freezer = freeze_other_language_rows(model, "am")
    mults = lang_lr_mults(model, OPTS)
    assert mults == {LANG_TABLE: 5.0}
    optimizer = build_optimizer(model, 1e-2, 0.1, torch.device("cpu"), mults)
    lang_group = next(g for g in optimizer.param_groups if "lr_mult" in g)
    assert lang_group["params"] == [table] and lang_group["weight_decay"] == 0.0
    scheduler = build_scheduler(optimizer, 0, 10)
    assert lang_group["lr"] == 5 * optimizer.param_groups[0]["lr"]
    train_steps(model, optimizer, freezer, scheduler)
    after = table.detach()
    changed = [row for row in range(after.shape[0]) if not torch.equal(after[row], copied[row])]
    assert changed == [am]  # en is in the batch too, yet its row (and every other) is bitwise frozen
    set_peak_lr(scheduler, 2e-2)  # a resume with another --learning-rate keeps the table's multiple
    assert lang_group["lr"] == pytest.approx(5 * optimizer.param_groups[0]["lr"])
    assert lang_group["initial_lr"] == pytest.approx(1e-1)


def test_with_lora_the_language_row_still_trains_alone():
    model = model_25()
    opts = {**OPTS, "lora": True, "lora_rank": 2, "lora_alpha": 2.0, "lora_train_heads": False,
            "lora_train_embeddings": False, "lora_train_lang_row": True}
    adaptation = adapt_model(model, opts)
    assert adaptation.trainable > 0 and not model.text_embedding.weight.requires_grad
    table = model.get_parameter(LANG_TABLE)
    init_language_row(model, "en", "am")
    copied = table.detach().clone()
    freezer = freeze_other_language_rows(model, "am")
    optimizer = build_optimizer(model, 1e-2, 0.0, torch.device("cpu"), lang_lr_mults(model, opts))
    train_steps(model, optimizer, freezer, build_scheduler(optimizer, 0, 10))
    changed = [row for row in range(table.shape[0]) if not torch.equal(table[row], copied[row])]
    assert changed == [language_index("am")]


def test_refusals():
    assert language_row_refusal({"lang_init_from": "", "lang_lr_mult": 1.0}, by_id("1.5")) is None
    assert "IndexTTS-2.5" in language_row_refusal(OPTS, by_id("2"))
    assert "IndexTTS-2.5" in language_row_refusal({"lang_lr_mult": 2.0}, by_id("1.5"))
    assert language_row_refusal(OPTS, by_id("2.5")) is None
    assert "not a language code" in language_row_refusal({**OPTS, "lang_init_from": "xx"}, by_id("2.5"))
    assert "PATH::lang" in language_row_refusal({**OPTS, "train_manifest": ["am.jsonl"]}, by_id("2.5"))
    assert "own language" in language_row_refusal({**OPTS, "lang_init_from": "am"}, by_id("2.5"))
