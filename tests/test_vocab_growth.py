"""Growing the text vocabulary by meaning, and base rows that stay bitwise frozen while new rows train."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from torch import nn

from data_tools.text_tokenizer import TextTokenizer
from data_tools.tokenizer import extend_tokenizer, train_tokenizer
from data_tools.tokenizer.spm_model import load_model_proto, save_model_proto
from trainer.vocab import (
    INIT_DECOMPOSITION,
    INIT_MEAN,
    INIT_PARTIAL,
    TEXT_TENSORS,
    BaseRowFreezer,
    VocabError,
    bitwise_equal,
    grow_text_vocab,
)

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
DIM = 8


@dataclass(frozen=True)
class Tokenizers:
    base: Path
    extended: Path
    base_size: int
    size: int


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> Tokenizers:
    work = tmp_path_factory.mktemp("vocab")
    base = train_tokenizer([CORPUS / "english_train.txt"], work / "en", 300, "bpe", "en")
    new = train_tokenizer([CORPUS / "amharic_train.txt"], work / "am", 500, "bpe", "am")
    extended = work / "ext.model"
    extend_tokenizer(base, new, extended, complete_scripts=False)
    return Tokenizers(base, extended, 300, len(load_model_proto(extended).pieces))


def base_state(rows: int, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "text_embedding.weight": torch.randn(rows, DIM, generator=gen),
        "other.weight": torch.randn(3, 3, generator=gen),
        "text_head.weight": torch.randn(rows, DIM, generator=gen),
        "text_head.bias": torch.randn(rows, generator=gen),
    }


def gpt_cfg(number_text_tokens: int) -> dict:
    return {"number_text_tokens": number_text_tokens, "types": 1, "model_dim": DIM}


def test_base_rows_copied_and_extra_row_moved(tokenizers: Tokenizers) -> None:
    n, m = tokenizers.base_size, tokenizers.size
    state = base_state(n + 1)
    before = {k: v.clone() for k, v in state.items()}
    result = grow_text_vocab(state, gpt_cfg(n), TextTokenizer(tokenizers.extended), TextTokenizer(tokenizers.base))
    assert result.gpt_cfg["number_text_tokens"] == m and result.base_vocab_size == n and result.new_rows == m - n
    for key in TEXT_TENSORS:
        grown = result.state_dict[key]
        assert grown.shape[0] == m + 1 and grown.dtype == state[key].dtype
        assert bitwise_equal(grown[:n], state[key][:n])
        assert bitwise_equal(grown[m], state[key][n]), "the extra row sits at the new extra position"
        assert not torch.equal(grown[n], state[key][n]), "the extra row is not copied into the first new piece"
        assert bitwise_equal(state[key], before[key]), "the input state dict is not modified"
    assert result.state_dict["other.weight"] is state["other.weight"]
    assert (result.base_vocab_size, result.new_vocab_size) == (n, m)  # base rows 0..n-1, the extra row at m
    assert sum(result.init_counts.values()) == m - n
    assert any("extra row moved" in line for line in result.report_lines)


def test_new_rows_start_from_their_base_decomposition(tokenizers: Tokenizers, tmp_path: Path) -> None:
    base_sp = spm.SentencePieceProcessor(model_file=str(tokenizers.base))
    n = tokenizers.base_size
    # Three hand-made pieces, one per initialisation kind.
    known_pair = ["▁THE", "▁OF"]
    assert all(base_sp.PieceToId(p) != base_sp.unk_id() for p in known_pair)
    proto = load_model_proto(tokenizers.base)
    lowest = min(p.score for p in proto.pieces)
    for offset, text in enumerate(["▁THE▁OF", "▁ሰላ", "ሰላም"]):
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = text, lowest - 1 - offset, 1
    for ch in "ሰላም":
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = ch, lowest - 10, 1
    ext_path = save_model_proto(proto, tmp_path / "hand.model")
    state = base_state(n + 1, seed=3)
    result = grow_text_vocab(state, gpt_cfg(n), TextTokenizer(ext_path), TextTokenizer(tokenizers.base))
    assert result.init_counts == {INIT_DECOMPOSITION: 1, INIT_PARTIAL: 1, INIT_MEAN: 4}  # + 3 characters
    space = base_sp.PieceToId("▁")
    ids = [base_sp.PieceToId(p) for p in known_pair]
    assert base_sp.EncodeAsIds("THE OF") == ids  # the decomposition the base itself produces
    for key in TEXT_TENSORS:
        rows = state[key][:n].double()
        overall = rows.mean(0)
        grown = result.state_dict[key]
        torch.testing.assert_close(grown[n], rows[ids].mean(0).float(), rtol=0, atol=1e-6)
        torch.testing.assert_close(grown[n + 1], ((rows[space] + overall) / 2).float(), rtol=0, atol=1e-6)
        torch.testing.assert_close(grown[n + 2], overall.float(), rtol=0, atol=1e-6)


def test_without_base_tokenizer_the_truncated_extension_is_the_base(tokenizers: Tokenizers) -> None:
    n = tokenizers.base_size
    state = base_state(n + 1)
    with_base = grow_text_vocab(state, gpt_cfg(n), tokenizers.extended, tokenizers.base)
    without = grow_text_vocab(state, gpt_cfg(n), tokenizers.extended)
    for key in TEXT_TENSORS:
        assert bitwise_equal(with_base.state_dict[key], without.state_dict[key])
    assert any("not given" in line for line in without.report_lines)


def test_moved_base_ids_are_refused_with_advice(tokenizers: Tokenizers, tmp_path: Path) -> None:
    proto = load_model_proto(tokenizers.extended)
    a, b = proto.pieces[20], proto.pieces[21]
    (a.piece, a.score), (b.piece, b.score) = (b.piece, b.score), (a.piece, a.score)
    moved = save_model_proto(proto, tmp_path / "moved.model")
    n = tokenizers.base_size
    with pytest.raises(VocabError, match=r"id 20 -> id 21.*data_tools\.tokenizer extend"):
        grow_text_vocab(base_state(n + 1), gpt_cfg(n), moved, tokenizers.base)


def test_shrinking_and_mismatched_shapes_are_refused(tokenizers: Tokenizers) -> None:
    big = tokenizers.size + 5
    with pytest.raises(VocabError, match="shrinking"):
        grow_text_vocab(base_state(big + 1), gpt_cfg(big), tokenizers.extended)
    n = tokenizers.base_size
    with pytest.raises(VocabError, match="rows"):
        grow_text_vocab(base_state(n + 7), gpt_cfg(n), tokenizers.extended)
    with pytest.raises(VocabError, match="not the checkpoint's tokenizer"):
        grow_text_vocab(base_state(n), gpt_cfg(n - 1), tokenizers.extended, tokenizers.base)


def test_special_piece_after_the_base_is_refused_without_base_tokenizer(tokenizers: Tokenizers,
                                                                         tmp_path: Path) -> None:
    proto = load_model_proto(tokenizers.extended)
    proto.pieces[tokenizers.base_size + 3].type = 3  # CONTROL: not a plain appended piece
    odd = save_model_proto(proto, tmp_path / "odd.model")
    n = tokenizers.base_size
    with pytest.raises(VocabError, match="special piece"):
        grow_text_vocab(base_state(n + 1), gpt_cfg(n), odd)


def test_same_size_is_no_growth(tokenizers: Tokenizers) -> None:
    n = tokenizers.base_size
    state = base_state(n + 1)
    result = grow_text_vocab(state, gpt_cfg(n), tokenizers.base, tokenizers.base)
    assert result.new_rows == 0 and result.state_dict["text_embedding.weight"] is state["text_embedding.weight"]


# ---------------------------------------------------------------------------------------------- freezing


class TinyTextModel(nn.Module):
    """Just enough of the GPT's text path: embedding -> mixing layer -> head (same parameter names)."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.text_embedding = nn.Embedding(rows, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.text_head = nn.Linear(DIM, rows)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text_head(torch.tanh(self.mix(self.text_embedding(ids))))


def grown_model(tokenizers: Tokenizers) -> tuple[TinyTextModel, dict[str, torch.Tensor], list[int]]:
    n = tokenizers.base_size
    base = base_state(n + 1, seed=5)
    result = grow_text_vocab(base, gpt_cfg(n), tokenizers.extended, tokenizers.base)
    model = TinyTextModel(tokenizers.size + 1)
    state = model.state_dict()
    state.update({k: v.clone() for k, v in result.state_dict.items() if k in TEXT_TENSORS})
    model.load_state_dict(state)
    return model, result.state_dict, [*range(result.base_vocab_size), result.new_vocab_size]


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, freezer: BaseRowFreezer | None, steps: int,
                vocab: int, seed: int, amp: torch.dtype | None = None) -> None:
    """A training loop shaped like the trainer's: autocast, optional fp16 grad scaler, clipping, step."""
    gen = torch.Generator().manual_seed(seed)
    scaler = torch.amp.GradScaler("cpu") if amp == torch.float16 else None
    for _ in range(steps):
        ids = torch.randint(0, vocab, (4, 12), generator=gen)
        with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
            logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        if freezer is not None:
            freezer.after_optimizer_step()


def _frozen_rows_equal(model: nn.Module, reference: dict[str, torch.Tensor], rows: list[int]) -> bool:
    params = dict(model.named_parameters())
    index = torch.tensor(rows)
    return all(bitwise_equal(params[k].detach()[index], reference[k][index]) for k in TEXT_TENSORS)


@pytest.mark.parametrize(("amp", "optimizer_kwargs"), [
    (None, {"foreach": False}),
    (None, {"foreach": True}),
    (torch.bfloat16, {"fused": True}),
    (torch.float16, {"fused": True}),
], ids=["fp32", "fp32-foreach", "bf16-autocast-fused", "fp16-gradscaler-fused"])
def test_frozen_rows_stay_bitwise_equal_and_new_rows_move(tokenizers: Tokenizers, amp: torch.dtype | None,
                                                          optimizer_kwargs: dict) -> None:
    model, grown, frozen = grown_model(tokenizers)
    freezer = BaseRowFreezer(model, base_rows=tokenizers.base_size, extra_row=tokenizers.size)
    assert freezer.rows == frozen
    assert freezer.num_frozen_params == len(frozen) * (DIM + DIM + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, **optimizer_kwargs)
    train_steps(model, optimizer, freezer, 30, tokenizers.size, seed=1, amp=amp)
    assert _frozen_rows_equal(model, grown, frozen)
    assert freezer.mismatches() == []
    new = torch.arange(tokenizers.base_size, tokenizers.size)
    emb = model.text_embedding.weight.detach()
    moved_rows = (emb[new] != grown["text_embedding.weight"][new]).any(dim=1)
    assert moved_rows.float().mean() > 0.9
    assert (model.text_head.weight.detach()[new] != grown["text_head.weight"][new]).any(dim=1).all()


def test_without_the_freezer_weight_decay_moves_the_base_rows(tokenizers: Tokenizers) -> None:
    """The control experiment: the same training does change base rows when nothing freezes them."""
    model, grown, frozen = grown_model(tokenizers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    train_steps(model, optimizer, None, 30, tokenizers.size, seed=1)
    assert not _frozen_rows_equal(model, grown, frozen)


def test_frozen_rows_get_zero_gradients(tokenizers: Tokenizers) -> None:
    model, _, frozen = grown_model(tokenizers)
    BaseRowFreezer(model, base_rows=tokenizers.base_size, extra_row=tokenizers.size)
    ids = torch.randint(0, tokenizers.size, (4, 12), generator=torch.Generator().manual_seed(0))
    model(ids).sum().backward()
    index = torch.tensor(frozen)
    for param in (model.text_embedding.weight, model.text_head.weight, model.text_head.bias):
        assert torch.count_nonzero(param.grad[index]) == 0
        assert torch.count_nonzero(param.grad) > 0


def test_frozen_rows_survive_a_resume(tokenizers: Tokenizers) -> None:
    model, grown, frozen = grown_model(tokenizers)
    freezer = BaseRowFreezer(model, base_rows=tokenizers.base_size, extra_row=tokenizers.size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    train_steps(model, optimizer, freezer, 15, tokenizers.size, seed=1)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    mid_new_rows = model.text_embedding.weight.detach()[tokenizers.base_size:tokenizers.size].clone()

    buffer.seek(0)
    ckpt = torch.load(buffer, weights_only=True)
    resumed = TinyTextModel(tokenizers.size + 1)
    resumed.load_state_dict(ckpt["model"])
    resumed_optimizer = torch.optim.AdamW(resumed.parameters(), lr=1e-2, weight_decay=0.1)
    resumed_optimizer.load_state_dict(ckpt["optimizer"])
    resumed_freezer = BaseRowFreezer(resumed, base_rows=tokenizers.base_size, extra_row=tokenizers.size)
    train_steps(resumed, resumed_optimizer, resumed_freezer, 15, tokenizers.size, seed=2)
    assert _frozen_rows_equal(resumed, grown, frozen)
    assert not torch.equal(resumed.text_embedding.weight.detach()[tokenizers.base_size:tokenizers.size], mid_new_rows)


def test_reference_from_the_base_restores_drifted_rows(tokenizers: Tokenizers) -> None:
    """A checkpoint trained without freezing, resumed with freezing pinned to the base checkpoint."""
    model, grown, frozen = grown_model(tokenizers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    train_steps(model, optimizer, None, 5, tokenizers.size, seed=1)
    freezer = BaseRowFreezer(model, tokenizers.base_size, tokenizers.size, reference=grown)
    assert set(freezer.restored_at_start) == set(TEXT_TENSORS)
    assert _frozen_rows_equal(model, grown, frozen)
    train_steps(model, optimizer, freezer, 5, tokenizers.size, seed=2)
    assert _frozen_rows_equal(model, grown, frozen)


def test_freezer_finds_wrapped_parameters_and_rejects_bad_rows(tokenizers: Tokenizers) -> None:
    model, _, _ = grown_model(tokenizers)
    wrapper = nn.Module()
    wrapper.module = model  # as DistributedDataParallel names them: module.text_embedding.weight
    freezer = BaseRowFreezer(wrapper, [0, 5, 7])
    assert freezer.rows == [0, 5, 7]
    freezer.remove()
    with pytest.raises(ValueError, match="frozen rows"):
        BaseRowFreezer(model, tokenizers.size + 5)
    with pytest.raises(ValueError, match="no text_embedding"):
        BaseRowFreezer(nn.Linear(2, 2), 1)


def test_bitwise_equal_tells_negative_zero_apart() -> None:
    assert bitwise_equal(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0]))
    assert not bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert not bitwise_equal(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))


def test_demo_checkpoint_grows_into_the_real_model(demo_workspace) -> None:
    """The demo's base GPT + extended tokenizer: grown weights load strictly into a model of the new size."""
    from data_tools.config import load_config
    from networks.unified_voice import build_model, load_gpt_state_dict

    config = load_config(demo_workspace.config)
    base = torch.load(demo_workspace.base_checkpoint, weights_only=True, map_location="cpu")["model"]
    result = grow_text_vocab(base, config["gpt"], TextTokenizer(demo_workspace.extended_tokenizer),
                             TextTokenizer(demo_workspace.base_tokenizer))
    n, m = result.base_vocab_size, result.new_vocab_size
    model = build_model(result.gpt_cfg)
    load_gpt_state_dict(model, result.state_dict)
    for key in TEXT_TENSORS:
        loaded = model.state_dict()[key]
        assert bitwise_equal(loaded[:n], base[key][:n]) and bitwise_equal(loaded[m], base[key][n])
