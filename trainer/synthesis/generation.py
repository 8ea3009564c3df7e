"""Autoregressive code generation for the IndexTTS GPTs, with a KV cache, in plain PyTorch.

One loop for v1.5, v2 and 2.5: they differ only in the conditioning block in front of the text (v1.5: 32 speaker
latents; v2: 32 latents + emotion vector, then the two speed rows, ``UnifiedVoiceV2.build_conds``; 2.5: the
3-row ``[speaker + emotion, 0, 0]`` block), which the caller passes as ``conds``, and, for 2.5, the language
row added on every text position (``langs``: the prefix is then the model's own ``generation_prefix``).

Facts: shared/reference/fixtures_indextts15_infer/FIXTURES.md ("inference_speech"). The GPT's own
sub-modules and weights are used as they are (``model.gpt.h[i]``, ``ln_f``, ``final_norm``, ``mel_head``,
the embeddings); the step-by-step driving with a cache is ``CachedDecoder`` (cached_decoder.py), and this
module chooses the codes it is fed.

Public API:

- ``DecodeSettings``: greedy / beam / sample, beams, temperature, top-k, top-p, repetition penalty,
  length penalty, seed, max codes. ``sample`` with ``num_beams > 1`` is beam sampling (upstream's own
  default); ``beam`` is upstream's beam search with sampling off (num_beams 3, repetition penalty 10,
  length penalty 0), the deterministic setting the fixtures check.
- ``prefix_embeddings(model, conds, text_ids, langs=None)``: the generation prefix (left-padded zero vectors,
  conditioning latents, wrapped text, mel start) and its key mask.
- ``generate_codes(model, conds, text_ids, settings, use_cache=True, generator=None, langs=None)``: raw codes
  (B, n) as upstream's ``inference_speech`` returns them (the stop id kept, finished rows filled with
  stop). Sampling draws only from ``generator`` (a private ``torch.Generator``), never from the global
  RNG streams.
- ``remove_long_silence(codes)``: infer.py's post-processing -> (codes, lengths).

Position detail kept from upstream: the k-th fed code (k >= 1) gets mel position row k+1, so row 1 is
never used during generation (0, 2, 3, ...), while the latent forward uses 0, 1, 2, ....
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from networks.unified_voice import UnifiedVoice
from trainer.synthesis.cached_decoder import CachedDecoder

DecodeMode = Literal["greedy", "beam", "sample"]
DECODE_MODES: tuple[str, ...] = ("greedy", "beam", "sample")
StepObserver = Callable[[int, Tensor], None]
NEG_INF_SCORE = -1.0e9  # upstream's "never choose this beam" score
SILENT_CODE = 52
SILENCE_TOTAL_LIMIT = 30
SILENCE_RUN_KEEP = 10


@dataclass(frozen=True)
class DecodeSettings:
    """How codes are chosen. Defaults: upstream infer.py's values with sampling off (deterministic)."""

    mode: DecodeMode = "beam"
    num_beams: int = 3  # beam and sample modes; sample with 1 beam is plain multinomial sampling
    temperature: float = 1.0  # sample mode only
    top_k: int = 30  # sample mode only; 0 = off
    top_p: float = 0.8  # sample mode only; 1.0 = off
    repetition_penalty: float = 10.0  # 1.0 = off
    length_penalty: float = 0.0  # beam hypotheses: score / generated_length ** length_penalty
    seed: int = 0  # sample mode only
    max_codes: int | None = None  # None: the model's max_mel_tokens

    def problems(self) -> list[str]:
        """What is wrong with these settings (empty when usable)."""
        out: list[str] = []
        if self.mode not in DECODE_MODES:
            out.append(f"decode mode must be one of {', '.join(DECODE_MODES)}, got {self.mode!r}")
        if self.num_beams < 1:
            out.append(f"num_beams must be >= 1, got {self.num_beams}")
        if not self.temperature > 0:
            out.append(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            out.append(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            out.append(f"top_p must be in (0, 1], got {self.top_p}")
        if not self.repetition_penalty > 0:
            out.append(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.max_codes is not None and self.max_codes < 1:
            out.append(f"max_codes must be >= 1, got {self.max_codes}")
        return out

    @property
    def beams(self) -> int:
        return 1 if self.mode == "greedy" else self.num_beams


@dataclass
class Generated:
    codes: Tensor  # (B, n) int64, stop id kept, rows padded with stop
    steps: int  # decoding steps run
    sequence_scores: Tensor | None  # (B,) beam modes: summed processed log-probs of the returned hypotheses


def prefix_embeddings(model: UnifiedVoice, conds: Tensor, text_ids: Tensor,
                      langs: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(B, P, D) prefix embeddings and (B, P) bool key mask, P = n_cond + L + 3.

    Per row: every start/stop text id is removed, the rest wrapped in one start and one stop, embedded
    with positions from 0; the row is ``[zeros x pad][conds][text]`` left-padded to n_cond + L + 2, then
    the mel start embedding (position row 0) follows. ``conds`` may have batch 1 (shared).
    ``langs`` (B,) language indices: an IndexTTS-2.5 GPT, whose ``generation_prefix`` builds the same rows
    with its language row on every text position.
    """
    batch, width = text_ids.shape
    if conds.size(0) == 1 and batch > 1:
        conds = conds.expand(batch, -1, -1)
    dim = model.model_dim
    device = conds.device
    start_mel = model.mel_embedding.weight[model.start_mel_token] + model.mel_pos_embedding.emb.weight[0]
    if langs is not None:
        language_prefix = getattr(model, "generation_prefix", None)
        if language_prefix is None:
            raise ValueError(f"langs given, but a {type(model).__name__} has no language rows (IndexTTS-2.5 only)")
        built = language_prefix(conds, text_ids, langs)
        embeds = built.inputs_embeds
        embeds = torch.cat((embeds, start_mel.to(embeds.dtype).expand(batch, 1, dim)), dim=1)
        return embeds, built.attention_mask.bool()
    start, stop = model.start_text_token, model.stop_text_token
    text_pos = model.text_pos_embedding.emb.weight
    rows: list[Tensor] = []
    pads: list[int] = []
    for row in range(batch):
        ids = text_ids[row].to(device=device, dtype=torch.long)
        ids = ids[(ids != start) & (ids != stop)]
        wrapped = torch.cat((ids.new_tensor([start]), ids, ids.new_tensor([stop])))
        text = model.text_embedding(wrapped) + text_pos[: wrapped.numel()]
        pad = width - ids.numel()
        pads.append(pad)
        rows.append(torch.cat((conds.new_zeros(pad, dim), conds[row], text.to(conds.dtype)), dim=0))
    embeds = torch.cat((torch.stack(rows), start_mel.to(conds.dtype).expand(batch, 1, dim)), dim=1)
    positions = torch.arange(embeds.size(1), device=device).unsqueeze(0)
    mask = positions >= torch.tensor(pads, device=device).unsqueeze(1)
    return embeds, mask


# ----- logits processing (upstream's order: repetition penalty, then temperature, top-k, top-p) ---------


def apply_repetition_penalty(scores: Tensor, seen: Tensor, penalty: float) -> Tensor:
    """Each id present in the row's sequence: s * p if s < 0 else s / p (repeats do not compound)."""
    if penalty == 1.0:
        return scores
    penalised = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen, penalised, scores)


def apply_top_k(scores: Tensor, top_k: int, min_keep: int) -> Tensor:
    top_k = min(max(top_k, min_keep), scores.size(-1))
    threshold = torch.topk(scores, top_k, dim=-1).values[..., -1:]
    return scores.masked_fill(scores < threshold, float("-inf"))


def apply_top_p(scores: Tensor, top_p: float, min_keep: int) -> Tensor:
    """Drop the low tail whose total probability is at most 1 - top_p (always keeping ``min_keep``)."""
    sorted_scores, order = torch.sort(scores, dim=-1, descending=False)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - top_p)
    remove_sorted[..., -min_keep:] = False
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return scores.masked_fill(remove, float("-inf"))


def warp_for_sampling(scores: Tensor, settings: DecodeSettings, min_keep: int) -> Tensor:
    if settings.temperature != 1.0:
        scores = scores / settings.temperature
    if settings.top_k:
        scores = apply_top_k(scores, settings.top_k, min_keep)
    if settings.top_p < 1.0:
        scores = apply_top_p(scores, settings.top_p, min_keep)
    return scores


# ----- the decoding loops -------------------------------------------------------------------------------


def max_codes_for(model: UnifiedVoice, settings: DecodeSettings) -> int:
    """At most this many codes (stop included) are generated: ``max_codes`` capped by max_mel_tokens."""
    limit = int(model.gpt_config["max_mel_tokens"])
    return limit if settings.max_codes is None else min(int(settings.max_codes), limit)


def _initial_seen(rows: int, model: UnifiedVoice, device: torch.device) -> Tensor:
    # The placeholder prompt ids upstream hands to generate: all 1 except the mel start id.
    seen = torch.zeros(rows, model.mel_vocab_size, dtype=torch.bool, device=device)
    seen[:, 1] = True
    seen[:, model.start_mel_token] = True
    return seen


@torch.no_grad()
def generate_codes(
    model: UnifiedVoice,
    conds: Tensor,
    text_ids: Tensor,
    settings: DecodeSettings,
    *,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
    observe: StepObserver | None = None,
    langs: Tensor | None = None,
) -> Generated:
    """Generate codes for a batch of texts (B, L) (padded with the stop id) from conditioning (1 or B, n, D).

    ``langs`` (B,) int64: the language indices of an IndexTTS-2.5 GPT (see ``prefix_embeddings``).

    The model should be in eval mode (``Synthesizer`` takes care of that). Sampling needs ``generator``;
    one is made from ``settings.seed`` when none is given. ``observe(step, scores)`` sees each step's scores
    where the choice is made: one beam, the processed scores (B, V) (after the repetition penalty, before
    sampling warps); beams, the accumulated candidate scores (B, beams * V).
    """
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(problems))
    if settings.mode == "sample" and generator is None:
        generator = torch.Generator(device=conds.device).manual_seed(int(settings.seed))
    prefix, key_mask = prefix_embeddings(model, conds, text_ids, langs)
    max_new = max_codes_for(model, settings)
    decoder = CachedDecoder(model, use_cache=use_cache)
    if settings.beams == 1:
        return _greedy_or_sample(model, decoder, prefix, key_mask, settings, max_new, generator, observe)
    return _beam_search(model, decoder, prefix, key_mask, settings, max_new, generator, observe)


def _greedy_or_sample(model: UnifiedVoice, decoder: CachedDecoder, prefix: Tensor, key_mask: Tensor,
                      settings: DecodeSettings, max_new: int, generator: torch.Generator | None,
                      observe: StepObserver | None = None) -> Generated:
    batch, device, stop = prefix.size(0), prefix.device, model.stop_mel_token
    rows = torch.arange(batch, device=device)
    seen = _initial_seen(batch, model, device)
    out = torch.full((batch, max_new), stop, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    logits = decoder.start(prefix, key_mask, prefix.size(1) + max_new)
    steps = 0
    for step in range(max_new):
        scores = apply_repetition_penalty(logits, seen, settings.repetition_penalty)
        if observe is not None:
            observe(step, scores)
        if settings.mode == "sample":
            probs = warp_for_sampling(scores, settings, min_keep=1).softmax(dim=-1)
            tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        else:
            tokens = scores.argmax(dim=-1)
        tokens = torch.where(finished, torch.full_like(tokens, stop), tokens)
        out[:, step] = tokens
        seen[rows, tokens] = True
        finished |= tokens == stop
        steps = step + 1
        if bool(finished.all()) or steps == max_new:
            break
        logits = decoder.step(tokens, step + 2)
    return Generated(codes=out[:, :steps], steps=steps, sequence_scores=None)


def _choose_candidates(scores: Tensor, count: int, sample: bool,
                       generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """The ``count`` candidates of each row (B, K*V): best ones, or drawn without replacement."""
    if not sample:
        return torch.topk(scores, count, dim=-1)
    # Gumbel-top-k: the same law as successive multinomial draws without replacement, in log space (no
    # underflow when beams' scores are far apart); then best first, as upstream sorts its draws.
    uniform = torch.rand(scores.shape, generator=generator, device=scores.device).clamp_(min=1e-20)
    drawn = torch.topk(scores - torch.log(-torch.log(uniform)), count, dim=-1).indices
    chosen = scores.gather(1, drawn)
    chosen, order = torch.sort(chosen, dim=-1, descending=True)
    return chosen, drawn.gather(1, order)


def _beam_search(model: UnifiedVoice, decoder: CachedDecoder, prefix: Tensor, key_mask: Tensor,
                 settings: DecodeSettings, max_new: int, generator: torch.Generator | None,
                 observe: StepObserver | None = None) -> Generated:
    """Upstream's vectorised beam search (optionally beam sampling): see FIXTURES.md "Beam search"."""
    batch, device, stop = prefix.size(0), prefix.device, model.stop_mel_token
    beams, vocab = settings.num_beams, model.mel_vocab_size
    sample = settings.mode == "sample"
    rows = batch * beams
    keep = 2 * beams
    prefix = prefix.repeat_interleave(beams, dim=0)
    key_mask = key_mask.repeat_interleave(beams, dim=0)
    seen = _initial_seen(rows, model, device)
    running_scores = torch.zeros(batch, beams, device=device)
    if not sample:
        running_scores[:, 1:] = NEG_INF_SCORE  # identical beams at first: only beam 0 may expand
    running_tokens = torch.full((batch, beams, max_new), stop, dtype=torch.long, device=device)
    pool_tokens = running_tokens.clone()
    pool_lengths = torch.zeros(batch, beams, dtype=torch.long, device=device)
    pool_scores = torch.full((batch, beams), NEG_INF_SCORE, device=device)
    pool_finished = torch.zeros(batch, beams, dtype=torch.bool, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    top_beams = torch.arange(keep, device=device) < beams
    row_base = (torch.arange(batch, device=device) * beams).unsqueeze(1)
    logits = decoder.start(prefix, key_mask, prefix.size(1) + max_new)
    steps = 0
    for step in range(max_new):
        log_probs = apply_repetition_penalty(F.log_softmax(logits, dim=-1), seen, settings.repetition_penalty)
        if sample:
            log_probs = warp_for_sampling(log_probs, settings, min_keep=2)
        accumulated = (log_probs + running_scores.view(rows, 1)).view(batch, beams * vocab)
        if observe is not None:
            observe(step, accumulated)
        cand_scores, cand_index = _choose_candidates(accumulated, keep, sample, generator)
        cand_beam = cand_index // vocab
        cand_token = cand_index % vocab
        cand_tokens = running_tokens.gather(1, cand_beam.unsqueeze(2).expand(-1, -1, max_new)).clone()
        cand_tokens[:, :, step] = cand_token
        last_step = step + 1 == max_new
        hits = (cand_token == stop) | last_step

        # Running beams for the next step: the best candidates that did not finish.
        running_choice = cand_scores + hits.float() * NEG_INF_SCORE
        next_index = torch.topk(running_choice, beams, dim=-1).indices
        running_scores = running_choice.gather(1, next_index)
        running_tokens = cand_tokens.gather(1, next_index.unsqueeze(2).expand(-1, -1, max_new))
        source_rows = (row_base + cand_beam.gather(1, next_index)).view(rows)
        new_tokens = cand_token.gather(1, next_index).view(rows)

        # Finished hypotheses: only finishing candidates among the best `beams` of the step may enter the pool.
        just_finished = hits & top_beams & ~done.unsqueeze(1)
        finished_scores = cand_scores / float(step + 1) ** settings.length_penalty
        finished_scores = finished_scores + (~just_finished).float() * NEG_INF_SCORE
        merged_scores = torch.cat((pool_scores, finished_scores), dim=1)
        merged_tokens = torch.cat((pool_tokens, cand_tokens), dim=1)
        merged_lengths = torch.cat((pool_lengths, torch.full_like(cand_token, step + 1)), dim=1)
        merged_finished = torch.cat((pool_finished, just_finished), dim=1)
        pool_index = torch.topk(merged_scores, beams, dim=-1).indices
        pool_scores = merged_scores.gather(1, pool_index)
        pool_tokens = merged_tokens.gather(1, pool_index.unsqueeze(2).expand(-1, -1, max_new))
        pool_lengths = merged_lengths.gather(1, pool_index)
        pool_finished = merged_finished.gather(1, pool_index)

        steps = step + 1
        best_running = running_scores[:, :1] / float(step + 1) ** settings.length_penalty
        worst_finished = torch.where(pool_finished, pool_scores.min(dim=1, keepdim=True).values,
                                     torch.full_like(pool_scores, NEG_INF_SCORE))
        can_improve = (best_running > worst_finished).any(dim=1)
        done |= ~can_improve | hits.all(dim=1)
        if last_step or bool(done.all()):
            break
        seen = seen.index_select(0, source_rows)
        seen[torch.arange(rows, device=device), new_tokens] = True
        decoder.reorder(source_rows)
        logits = decoder.step(new_tokens, step + 2)
    lengths = pool_lengths[:, 0]
    width = int(lengths.max())
    codes = pool_tokens[:, 0, :width].clone()
    codes[torch.arange(width, device=device).unsqueeze(0) >= lengths.unsqueeze(1)] = stop
    return Generated(codes=codes, steps=steps, sequence_scores=pool_scores[:, 0].clone())


# ----- infer.py's post-processing ----------------------------------------------------------------------


def remove_long_silence(codes: Tensor, stop: int = 8193, silent: int = SILENT_CODE,
                        limit: int = SILENCE_TOTAL_LIMIT) -> tuple[Tensor, Tensor]:
    """infer.py's ``remove_long_silence``: (B, W) raw codes -> (codes, lengths int64).

    Per row the length is the index of the first stop id (or W). When the row holds more than ``limit``
    silent codes in total (anywhere, not a run length), it is rebuilt from the positions before that
    length keeping every other code and the first 10 of each run of silent codes. If any row was
    rebuilt, rows are padded with stop to a common width. Finally the width is clipped to the longest.
    """
    lengths: list[int] = []
    rows: list[Tensor] = []
    rebuilt = False
    for row in codes:
        hits = (row == stop).nonzero()
        length = int(hits[0, 0]) if hits.numel() else row.numel()
        if int((row == silent).sum()) > limit:
            kept: list[int] = []
            run = 0
            for value in row[:length].tolist():
                if value != silent:
                    kept.append(value)
                    run = 0
                elif run < SILENCE_RUN_KEEP:
                    kept.append(value)
                    run += 1
            rows.append(torch.tensor(kept, dtype=codes.dtype, device=codes.device))
            length = len(kept)
            rebuilt = True
        else:
            rows.append(row[:length])
        lengths.append(length)
    if rebuilt:
        if len(rows) > 1:
            codes = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=stop)
        else:
            codes = rows[0].unsqueeze(0)
    longest = max(lengths) if lengths else 0
    if longest < codes.size(1):
        codes = codes[:, :longest]
    return codes, torch.tensor(lengths, dtype=torch.long)
