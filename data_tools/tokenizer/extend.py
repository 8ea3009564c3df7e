"""Extend a base SentencePiece model with a new language's pieces, without moving a single base id.

The rules, and why:

- Base pieces are copied as they are (string, score, type, id) with the base's normaliser and settings,
  so the base model's embedding rows keep their meaning.
- A new piece is appended only if it contains a character the base has no piece for (a "new
  character"). Text written only in the base's characters can then never contain a new piece, so it
  encodes to exactly the base's ids: new pieces made of base characters (e.g. Latin markup in an
  Amharic corpus) would let BPE merge further than the base does and change English encodings.
  ``allow_base_character_pieces=True`` lifts the rule (and verify then has to prove the identity).
- Every new character of the new model is added as a single-character piece, and by default the whole
  repertoire of a script the new pieces use (the Ethiopic syllabary), so the new language has no unknowns.
- BPE base: appended pieces keep the new model's merge order and get scores strictly below the base's
  lowest, so every base merge still wins over every new one. Unigram base: a unigram new model keeps its
  own log-probabilities; a BPE new model gets scores that favour the fewest pieces.
- Reachability: a piece is kept only if encoding its own surface (the base's normaliser rules, exact
  whitespace, no dummy prefix) yields that piece; an unreachable piece can never be produced in any
  context, so dropping it changes no encoding. This also drops pieces the base's normaliser rewrites
  (e.g. "…" under NFKC), whose rows would never train. The check uses SentencePiece itself, and repeats until nothing is dropped, refilling up to
  ``target_size`` from the remaining candidates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from data_tools.text import script_repertoire, scripts_in
from data_tools.tokenizer.spm_model import (
    NORMAL,
    USER_DEFINED,
    ModelProto,
    TokenizerToolError,
    load_model_proto,
    model_type_name,
    save_model_proto,
    surface_processor,
    surface_text,
    text_characters,
    write_vocab_file,
)

MAX_ROUNDS = 50


@dataclass
class ExtendReport:
    base: str
    new: str
    out: str
    base_model_type: str
    new_model_type: str
    base_size: int
    new_model_pieces: int
    final_size: int
    appended: int
    appended_characters: int
    appended_multi_char: int
    skipped_existing: int
    skipped_base_characters: int
    dropped_unreachable: list[str] = field(default_factory=list)
    completed_scripts: list[str] = field(default_factory=list)
    target_size: int | None = None
    candidates_unused: int = 0
    rounds: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def target_reached(self) -> bool:
        return self.target_size is None or self.final_size >= self.target_size

    def to_json(self) -> str:
        data = asdict(self)
        data["target_reached"] = self.target_reached
        return json.dumps(data, ensure_ascii=False, indent=2)

    def summary_lines(self) -> list[str]:
        lines = [
            f"base {self.base} ({self.base_model_type}, {self.base_size} pieces) + new pieces from {self.new} "
            f"({self.new_model_type}, {self.new_model_pieces} pieces)",
            f"extended model: {self.final_size} pieces = {self.base_size} base (ids 0-{self.base_size - 1} unchanged)"
            f" + {self.appended} appended ({self.appended_characters} single characters, "
            f"{self.appended_multi_char} longer pieces) -> {self.out}",
            f"skipped: {self.skipped_existing} already in the base, {self.skipped_base_characters} made only of "
            f"base characters (would change base-language encodings)",
        ]
        if self.completed_scripts:
            lines.append(f"completed script repertoire: {', '.join(self.completed_scripts)}")
        if self.dropped_unreachable:
            shown = " ".join(self.dropped_unreachable[:10])
            more = f" (+{len(self.dropped_unreachable) - 10} more)" if len(self.dropped_unreachable) > 10 else ""
            lines.append(f"dropped {len(self.dropped_unreachable)} unreachable pieces: {shown}{more}")
        if self.target_size is not None:
            state = "reached" if self.target_reached else f"NOT reached ({self.final_size})"
            lines.append(f"target size {self.target_size}: {state}; {self.candidates_unused} candidates left unused")
        lines.extend(self.notes)
        return lines


@dataclass
class _Candidate:
    piece: str
    score: float
    type: int

    @property
    def is_char(self) -> bool:
        return len(self.piece) == 1


def extend_tokenizer(
    base: Path,
    new: Path,
    out: Path,
    target_size: int | None = None,
    *,
    complete_scripts: bool = True,
    extra_characters: Iterable[str] = (),
    allow_base_character_pieces: bool = False,
    log: Callable[[str], None] | None = None,
) -> ExtendReport:
    """Write ``out``: ``base`` plus the new pieces of ``new`` (all, or up to ``target_size`` pieces in total).

    ``extra_characters`` (e.g. every character of the corpus) are added as single-character pieces too.
    Raises TokenizerToolError with a one-line reason. Also writes ``out`` with suffix ``.vocab``.
    """
    base_proto = load_model_proto(base)
    new_proto = load_model_proto(new)
    base_type = model_type_name(base_proto)
    new_type = model_type_name(new_proto)
    if base_type not in ("bpe", "unigram"):
        raise TokenizerToolError(f"{base}: only BPE and unigram base models can be extended, this one is {base_type}")
    _check_compatible(base_proto, new_proto, Path(base), Path(new))
    base_size = len(base_proto.pieces)
    if target_size is not None and target_size <= base_size:
        raise TokenizerToolError(f"--target-size {target_size} must exceed the base's {base_size} pieces")

    base_strings = {piece.piece for piece in base_proto.pieces}
    base_chars = text_characters(base_proto)
    report = ExtendReport(
        base=str(base), new=str(new), out=str(out), base_model_type=base_type, new_model_type=new_type,
        base_size=base_size, new_model_pieces=len(new_proto.pieces), final_size=base_size, appended=0,
        appended_characters=0, appended_multi_char=0, skipped_existing=0, skipped_base_characters=0,
        target_size=target_size,
    )

    ordered = sorted(
        (p for p in new_proto.pieces if p.type in (NORMAL, USER_DEFINED)),
        key=lambda p: -p.score,  # stable: equal scores keep the new model's order
    )
    multi: list[_Candidate] = []
    chars: dict[str, _Candidate] = {}
    for piece in ordered:
        if piece.piece in base_strings:
            report.skipped_existing += 1
            continue
        if not allow_base_character_pieces and not (set(piece.piece) - base_chars):
            report.skipped_base_characters += 1
            continue
        candidate = _Candidate(piece.piece, piece.score, piece.type)
        if candidate.is_char:
            chars[candidate.piece] = candidate
        else:
            multi.append(candidate)

    # Every new character is a piece: those in longer pieces, the caller's extras, whole scripts.
    wanted_chars: list[str] = []
    for candidate in multi:
        wanted_chars.extend(candidate.piece)
    wanted_chars.extend(extra_characters)
    if complete_scripts:
        new_chars = {ch for ch in text_characters(new_proto) if ch not in base_chars}
        for script in sorted(scripts_in("".join(new_chars))):
            repertoire = script_repertoire(script)
            if repertoire:
                report.completed_scripts.append(f"{script} (+{len(set(repertoire) - base_chars - set(chars))})")
                wanted_chars.extend(repertoire)
    char_floor = min((c.score for c in chars.values()), default=0.0)
    for ch in wanted_chars:
        if ch not in base_chars and ch not in chars and not ch.isspace():
            chars[ch] = _Candidate(ch, char_floor - 1.0, NORMAL)
    forced = list(chars.values())

    budget = None if target_size is None else target_size - base_size
    if budget is not None and budget < len(forced):
        raise TokenizerToolError(
            f"--target-size {target_size} leaves room for {budget} new pieces, but the new language needs "
            f"{len(forced)} single-character pieces alone; use at least {base_size + len(forced)}")

    selected = _select(multi, forced, base_proto, new_type, budget, report)
    final = _build(base_proto, selected, new_type)
    save_model_proto(final, out)
    write_vocab_file(final, Path(out).with_suffix(".vocab"))

    report.final_size = len(final.pieces)
    report.appended = len(selected)
    report.appended_characters = sum(1 for c in selected if c.is_char)
    report.appended_multi_char = report.appended - report.appended_characters
    if budget is not None and report.appended < budget:
        report.notes.append(
            f"note: only {report.appended} reachable new pieces exist; train the new model with a larger vocab "
            f"to reach --target-size {target_size}")
    for line in report.summary_lines():
        (log or (lambda _l: None))(line)
    return report


def _check_compatible(base: ModelProto, new: ModelProto, base_path: Path, new_path: Path) -> None:
    if base.trainer_spec.treat_whitespace_as_suffix != new.trainer_spec.treat_whitespace_as_suffix:
        raise TokenizerToolError(
            f"{new_path}: treat_whitespace_as_suffix differs from the base {base_path}; retrain the new model "
            "with the base's setting")
    if base.normalizer_spec.add_dummy_prefix != new.normalizer_spec.add_dummy_prefix:
        raise TokenizerToolError(
            f"{new_path}: add_dummy_prefix differs from the base {base_path}; its word-initial pieces would "
            "never match; retrain the new model with the base's setting")


def _select(multi: list[_Candidate], forced: list[_Candidate], base: ModelProto, new_type: str,
            budget: int | None, report: ExtendReport) -> list[_Candidate]:
    """Pick the appended pieces: all forced characters, then the longer pieces in order, minus the
    unreachable ones, refilled from the remaining candidates until the selection is stable."""
    queue = list(multi)
    chosen: list[_Candidate] = []
    forced = list(forced)

    def selection() -> list[_Candidate]:
        return _in_candidate_order(chosen, multi) + forced

    def drop_unreachable() -> bool:
        nonlocal chosen, forced
        current = selection()
        unreachable = _unreachable(_build(base, current, new_type), len(base.pieces), current)
        chosen = [c for c in chosen if c.piece not in unreachable]
        forced = [c for c in forced if c.piece not in unreachable]
        report.dropped_unreachable.extend(c.piece for c in current if c.piece in unreachable)
        return bool(unreachable)

    for round_no in range(1, MAX_ROUNDS + 1):
        report.rounds = round_no
        while queue and (budget is None or len(chosen) + len(forced) < budget):
            chosen.append(queue.pop(0))
        if not drop_unreachable():
            break
    else:
        # Out of rounds: what is left is reachable (dropping an unreachable piece changes no encoding).
        drop_unreachable()
        report.notes.append(f"note: reachability did not settle in {MAX_ROUNDS} rounds; stopped filling")
    report.candidates_unused = len(queue)
    return selection()


def _in_candidate_order(chosen: list[_Candidate], multi: list[_Candidate]) -> list[_Candidate]:
    keep = {c.piece for c in chosen}
    return [c for c in multi if c.piece in keep]


def _scores(base: ModelProto, selection: Sequence[_Candidate], new_type: str) -> list[float]:
    base_type = model_type_name(base)
    lowest = min(piece.score for piece in base.pieces)
    if base_type == "bpe":
        # Merge priority follows the order; strictly below every base score so base merges always win.
        return [lowest - 1.0 - index for index in range(len(selection))]
    if new_type == "unigram":
        return [c.score for c in selection]
    # Unigram base, BPE-ranked pieces: near-equal scores below the base's, so the fewest pieces win.
    n = max(1, len(selection))
    return [lowest - 1.0 - index / (n + 1) for index in range(len(selection))]


def _build(base: ModelProto, selection: Sequence[_Candidate], new_type: str) -> ModelProto:
    out = ModelProto()
    out.CopyFrom(base)
    for candidate, score in zip(selection, _scores(base, selection, new_type)):
        piece = out.pieces.add()
        piece.piece = candidate.piece
        piece.score = score
        piece.type = candidate.type
    out.trainer_spec.vocab_size = len(out.pieces)
    return out


def _unreachable(proto: ModelProto, base_size: int, selection: Sequence[_Candidate]) -> set[str]:
    processor = surface_processor(proto)
    missing: set[str] = set()
    for offset, candidate in enumerate(selection):
        if processor.EncodeAsIds(surface_text(candidate.piece)) != [base_size + offset]:
            missing.add(candidate.piece)
    return missing


def unreachable_pieces(proto: ModelProto, first_id: int) -> list[tuple[int, str, list[str]]]:
    """``(id, piece, what its own surface encodes to)`` for every piece from ``first_id`` on that encoding
    its own surface does not produce (verify's reachability check)."""
    processor = surface_processor(proto)
    out: list[tuple[int, str, list[str]]] = []
    for index in range(first_id, len(proto.pieces)):
        piece = proto.pieces[index]
        if piece.type not in (NORMAL, USER_DEFINED):
            continue
        ids = processor.EncodeAsIds(surface_text(piece.piece))
        if ids != [index]:
            out.append((index, piece.piece, [processor.IdToPiece(i) for i in ids]))
    return out
