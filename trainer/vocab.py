"""Growing the text vocabulary of a base GPT, and keeping its base rows frozen while the new ones train.

Row layout (upstream): ``text_embedding.weight``, ``text_head.weight`` and ``text_head.bias`` have
``number_text_tokens + 1`` rows: one per tokenizer piece, then one extra row that no piece uses.

``grow_text_vocab`` builds the tensors for a larger (extended) tokenizer *by meaning*:

- base piece ``p`` keeps its row: row ``base.id(p)`` -> row ``extended.id(p)`` (the ids must be equal: an
  extension appends, it never moves a base id; a tokenizer that moved them is refused);
- the base's extra row moves to the new extra position (``new number_text_tokens``), not into the
  first new piece;
- a new piece's row starts as the mean of the base rows of its decomposition under the base tokenizer
  (the pieces the base splits its text into). Tokens the base does not know (``<unk>``) contribute the
  mean of all base rows; a piece with no known base token starts at the mean of all base rows.

``BaseRowFreezer`` keeps chosen rows of the three tensors bitwise equal to a reference: it zeroes their
gradients (so they add nothing to the clipped gradient norm and AdamW keeps zero moments for them) and,
after every optimizer step, copies the reference back, which undoes weight decay, AMP rounding or
anything else that touched them. See its docstring for where the reference comes from on resume.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from data_tools.tokenizer.spm_model import (
    BYTE,
    CONTROL,
    TEXT_PIECE_TYPES,
    UNKNOWN,
    ModelProto,
    model_type_name,
    parse_model_proto,
    surface_processor,
    surface_text,
    truncated,
)

TEXT_TENSORS = ("text_embedding.weight", "text_head.weight", "text_head.bias")

INIT_DECOMPOSITION = "decomposition"  # every token of the piece's base decomposition is a known base piece
INIT_PARTIAL = "partial"  # some tokens known, the unknown ones count as the mean of all base rows
INIT_MEAN = "mean"  # no known base token: the mean of all base rows

# Base pieces whose rows carry meaning for a decomposition (byte-fallback pieces included).
_ROW_PIECE_TYPES = TEXT_PIECE_TYPES | {BYTE}


class VocabError(TokenizerError):
    """The tokenizer and the base checkpoint cannot be combined; the message says why and what to do."""


@dataclass
class GrowResult:
    state_dict: dict[str, torch.Tensor]
    gpt_cfg: dict[str, Any]  # the base gpt config with number_text_tokens = the tokenizer's size
    base_vocab_size: int  # the base model's number_text_tokens
    new_rows: int  # rows added for new pieces (0: no growth)
    report_lines: list[str] = field(default_factory=list)
    init_counts: dict[str, int] = field(default_factory=dict)

    @property
    def new_vocab_size(self) -> int:
        return int(self.gpt_cfg["number_text_tokens"])


def _proto_of(tokenizer: TextTokenizer | str | Path) -> tuple[ModelProto, str]:
    if isinstance(tokenizer, (str, Path)):
        tokenizer = TextTokenizer(tokenizer)
    proto = parse_model_proto(tokenizer.sp.serialized_model_proto(), str(getattr(tokenizer, "path", "tokenizer")))
    return proto, str(getattr(tokenizer, "path", "tokenizer"))


def _text_tensors(state_dict: Mapping[str, torch.Tensor], rows: int) -> dict[str, torch.Tensor]:
    tensors = {}
    for key in TEXT_TENSORS:
        tensor = state_dict.get(key)
        if tensor is None:
            raise VocabError(f"the base checkpoint has no {key}: not an IndexTTS GPT state dict")
        if tensor.shape[0] != rows:
            raise VocabError(f"base {key} has {tensor.shape[0]} rows but gpt.number_text_tokens + 1 = {rows}; "
                             "use the config.yaml that came with the checkpoint")
        tensors[key] = tensor
    return tensors


def _check_same_base(ext: ModelProto, base: ModelProto, ext_name: str, base_name: str) -> list[str]:
    """Refuse a tokenizer whose first pieces are not the base's; return notes for softer differences."""
    n = len(base.pieces)
    moved = [i for i in range(n) if ext.pieces[i].piece != base.pieces[i].piece]
    if moved:
        where = {p.piece: i for i, p in enumerate(ext.pieces)}
        examples = []
        for i in moved[:3]:
            piece = base.pieces[i].piece
            now = where.get(piece)
            examples.append(f"{piece!r} id {i} -> " + (f"id {now}" if now is not None else "missing"))
        raise VocabError(
            f"{ext_name} is not an extension of the base tokenizer {base_name}: {len(moved)} of its first {n} "
            f"pieces differ ({'; '.join(examples)}). Base rows would lose their meaning; build the tokenizer with "
            f"`python -m data_tools.tokenizer extend --base {base_name} ...`, which keeps every base id")
    notes = []
    changed = [i for i in range(n) if ext.pieces[i].score != base.pieces[i].score
               or ext.pieces[i].type != base.pieces[i].type]
    if changed:
        notes.append(f"note: {len(changed)} base pieces have a different score or type in {ext_name}; base-language "
                     "text may encode differently (run `python -m data_tools.tokenizer verify`)")
    return notes


def _check_layout_without_base(ext: ModelProto, base_n: int, ext_name: str) -> list[str]:
    """Without the base tokenizer, check that nothing contradicts "the first base_n pieces are the base's"."""
    special_after = [i for i in range(base_n, len(ext.pieces)) if ext.pieces[i].type in (CONTROL, UNKNOWN)]
    if special_after:
        i = special_after[0]
        raise VocabError(
            f"{ext_name} has the special piece {ext.pieces[i].piece!r} at id {i}, after the base's {base_n} pieces: "
            "it does not look like a base tokenizer with appended pieces; give the base tokenizer "
            "(config dataset.bpe_model) so the rows can be mapped, or extend the base with "
            "`python -m data_tools.tokenizer extend`")
    notes = [f"the base tokenizer was not given: its {base_n} pieces are taken to be the first {base_n} of "
             f"{ext_name} (nothing contradicts it)"]
    lowest = min(p.score for p in ext.pieces[:base_n])
    if model_type_name(ext) == "bpe" and any(p.score >= lowest for p in ext.pieces[base_n:]):
        notes.append("note: some appended BPE pieces score above the base's lowest; this tokenizer was not made "
                     "by `data_tools.tokenizer extend` and may encode base-language text differently")
    return notes


def _decomposition_rows(ext: ModelProto, base: ModelProto, base_n: int, new_n: int
                        ) -> list[tuple[list[int], int, str]]:
    """Per new piece: (known base ids of its decomposition, number of unknown tokens, init kind)."""
    surface = surface_processor(base)
    unk = surface.unk_id()
    out = []
    for index in range(base_n, new_n):
        piece = ext.pieces[index]
        if piece.type not in TEXT_PIECE_TYPES:
            out.append(([], 0, INIT_MEAN))
            continue
        ids = surface.EncodeAsIds(surface_text(piece.piece))
        known = [i for i in ids if i != unk and base.pieces[i].type in _ROW_PIECE_TYPES]
        unknown = len(ids) - len(known)
        kind = INIT_MEAN if not known else (INIT_PARTIAL if unknown else INIT_DECOMPOSITION)
        out.append((known, unknown, kind))
    return out


def grow_text_vocab(state_dict: Mapping[str, torch.Tensor], base_gpt_cfg: Mapping[str, Any],
                    tokenizer: TextTokenizer | str | Path,
                    base_tokenizer: TextTokenizer | str | Path | None = None) -> GrowResult:
    """Text embedding/head of ``state_dict`` grown to ``tokenizer``'s size, rows copied by meaning.

    ``state_dict`` is not modified; the result shares every other tensor with it. Raises VocabError
    (one-line reason and advice) for a smaller tokenizer, moved base ids or a state dict that does not
    match ``base_gpt_cfg``.
    """
    if int(base_gpt_cfg.get("types", 1)) != 1:
        raise VocabError(f"gpt.types = {base_gpt_cfg.get('types')} is not supported (IndexTTS uses 1)")
    base_n = int(base_gpt_cfg["number_text_tokens"])
    tensors = _text_tensors(state_dict, base_n + 1)
    ext, ext_name = _proto_of(tokenizer)
    new_n = len(ext.pieces)
    if new_n < base_n:
        raise VocabError(
            f"{ext_name} has {new_n} pieces but the base model has {base_n} text tokens: shrinking the vocabulary "
            "would drop trained rows; use the base tokenizer or an extension of it "
            "(`python -m data_tools.tokenizer extend`)")
    notes: list[str]
    if base_tokenizer is not None:
        base, base_name = _proto_of(base_tokenizer)
        if len(base.pieces) != base_n:
            raise VocabError(f"base tokenizer {base_name} has {len(base.pieces)} pieces but the base model has "
                             f"{base_n} text tokens: it is not the checkpoint's tokenizer")
        notes = _check_same_base(ext, base, ext_name, base_name)
    else:
        notes = _check_layout_without_base(ext, base_n, ext_name) if new_n > base_n else []
        base = truncated(ext, base_n)
    gpt_cfg = copy.deepcopy(dict(base_gpt_cfg))
    gpt_cfg["number_text_tokens"] = new_n
    if new_n == base_n:
        return GrowResult(dict(state_dict), gpt_cfg, base_n, 0,
                          [f"text vocabulary unchanged: {base_n} pieces", *notes], {})

    plan = _decomposition_rows(ext, base, base_n, new_n)
    grown = {key: _grow_tensor(tensor, base_n, new_n, plan) for key, tensor in tensors.items()}
    out = dict(state_dict)
    out.update(grown)
    counts = {kind: sum(1 for _, _, k in plan if k == kind) for kind in (INIT_DECOMPOSITION, INIT_PARTIAL, INIT_MEAN)}
    lines = [
        f"text vocabulary grown {base_n} -> {new_n} pieces (rows {base_n + 1} -> {new_n + 1})",
        f"base rows 0..{base_n - 1} copied unchanged; the extra row moved {base_n} -> {new_n}",
        f"{new_n - base_n} new rows initialised: {counts[INIT_DECOMPOSITION]} from the mean of their base "
        f"decomposition, {counts[INIT_PARTIAL]} from a decomposition with unknown tokens (counted as the mean of "
        f"all base rows), {counts[INIT_MEAN]} from the mean of all base rows",
        *notes,
    ]
    return GrowResult(out, gpt_cfg, base_n, new_n - base_n, lines, counts)


def _grow_tensor(tensor: torch.Tensor, base_n: int, new_n: int, plan: list[tuple[list[int], int, str]]) -> torch.Tensor:
    source = tensor.detach()
    base_rows = source[:base_n].to(torch.float64)
    overall = base_rows.mean(dim=0)
    grown = torch.empty((new_n + 1, *source.shape[1:]), dtype=source.dtype, device=source.device)
    grown[:base_n] = source[:base_n]
    grown[new_n] = source[base_n]
    for offset, (known, unknown, _kind) in enumerate(plan):
        if known:
            total = base_rows[torch.tensor(known, dtype=torch.long, device=source.device)].sum(dim=0)
            value = (total + unknown * overall) / (len(known) + unknown)
        else:
            value = overall
        grown[base_n + offset] = value.to(source.dtype)
    return grown


def frozen_text_rows(gpt_config: Mapping[str, Any], base_vocab_size: int, appends_text_rows: bool
                     ) -> tuple[int, int | None]:
    """(rows ``0..n-1``, extra row) a ``BaseRowFreezer`` keeps for a model grown from ``base_vocab_size``.

    IndexTTS-1.5/IndexTTS2 (``grow_text_vocab``): the base pieces' rows and the extra row, moved to the new
    ``number_text_tokens``. IndexTTS-2.5 (``generations.indextts25.model``): added rows come after the base table's spare row,
    so the base rows are ``0..base_vocab_size`` with the spare one included, and nothing moved. Which of the two
    a generation does, its entry says (``model.appends_text_rows``).
    """
    if appends_text_rows:
        return base_vocab_size + 1, None
    return base_vocab_size, int(gpt_config["number_text_tokens"])


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bytes (unlike ``torch.equal``, tells -0.0 from 0.0 and compares NaNs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a_bytes = a.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    b_bytes = b.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    return torch.equal(a_bytes, b_bytes)


def _find_parameters(model: nn.Module, keys: Sequence[str] = TEXT_TENSORS) -> dict[str, nn.Parameter]:
    found: dict[str, nn.Parameter] = {}
    for name, param in model.named_parameters():
        for key in keys:
            if name == key or name.endswith("." + key):
                if key in found:
                    raise ValueError(f"the model has more than one {key}")
                found[key] = param
    missing = [key for key in keys if key not in found]
    if missing:
        raise ValueError(f"the model has no {', '.join(missing)}")
    return found


class BaseRowFreezer:
    """Keep rows of ``text_embedding.weight``, ``text_head.weight`` and ``text_head.bias`` bitwise fixed.

    ``base_rows``: an int ``n`` (rows ``0..n-1``) or explicit row indices; ``extra_row``: one more row (the
    moved extra row, i.e. the new ``number_text_tokens``). Call ``after_optimizer_step()`` right after every
    ``optimizer.step()`` (also when a grad scaler skipped it).

    Where the reference comes from (the resume design): by default the rows of the model *as it is when
    the freezer is built*. The trainer builds it after loading weights: on a fresh run those are the grown
    base checkpoint's rows; on resume the checkpoint's, which are bitwise the base's because every saved
    step restored them. Nothing extra is stored in checkpoints. Pass ``reference`` (full tensors in the
    grown layout, e.g. ``GrowResult.state_dict`` of the base checkpoint) to pin them to the base
    checkpoint instead: rows of the model that differ from it are restored at once, and
    ``restored_at_start`` names the tensors that did (e.g. a run that trained without freezing).

    ``tensors``: other row tables to hold (e.g. ``("lang_embedding.weight",)``: all rows but the run's language,
    ``trainer.language_row``). A tensor that does not train (``requires_grad`` off, e.g. under LoRA) gets no
    gradient hook; its rows are still restored after each step.
    """

    def __init__(self, model: nn.Module, base_rows: int | Sequence[int], extra_row: int | None = None, *,
                 reference: Mapping[str, torch.Tensor] | None = None,
                 tensors: Sequence[str] = TEXT_TENSORS) -> None:
        self.params = _find_parameters(model, tensors)
        rows = list(range(base_rows)) if isinstance(base_rows, int) else [int(r) for r in base_rows]
        if extra_row is not None:
            rows.append(int(extra_row))
        self.rows = sorted(set(rows))
        size = self.params[tensors[0]].shape[0]
        if self.rows and not (self.rows[0] >= 0 and self.rows[-1] < size):
            raise ValueError(f"frozen rows must lie in 0..{size - 1}, got {self.rows[0]}..{self.rows[-1]}")
        self._index: dict[str, torch.Tensor] = {}
        self.reference: dict[str, torch.Tensor] = {}
        self.restored_at_start: list[str] = []
        self._hooks = []
        for key, param in self.params.items():
            index = torch.tensor(self.rows, dtype=torch.long, device=param.device)
            self._index[key] = index
            source = param.detach() if reference is None else reference[key].detach().to(param.device)
            self.reference[key] = source.index_select(0, index).to(param.dtype).clone()
            if param.requires_grad:
                self._hooks.append(param.register_hook(self._zero_rows_hook(key)))
        if reference is not None:
            self.restored_at_start = self.mismatches()
            self.after_optimizer_step()

    def _zero_rows_hook(self, key: str):
        def hook(grad: torch.Tensor) -> torch.Tensor:
            return grad.index_fill(0, self._index[key].to(grad.device), 0)

        return hook

    @property
    def num_frozen_params(self) -> int:
        return sum(ref.numel() for ref in self.reference.values())

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """Copy the reference rows back (bitwise), whatever the optimizer did to them."""
        for key, param in self.params.items():
            if self.reference[key].device != param.device:  # the model moved after the freezer was built
                self.reference[key] = self.reference[key].to(param.device)
                self._index[key] = self._index[key].to(param.device)
            param.index_copy_(0, self._index[key], self.reference[key])

    @torch.no_grad()
    def mismatches(self) -> list[str]:
        """Names of the tensors whose frozen rows are not bitwise equal to the reference."""
        return [key for key, param in self.params.items()
                if not bitwise_equal(param.detach().index_select(0, self._index[key].to(param.device)),
                                     self.reference[key])]

    def remove(self) -> None:
        """Detach the gradient hooks (the rows then train like any other)."""
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
