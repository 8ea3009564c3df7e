"""Verify an extended tokenizer against its base: a report of checks, each passed, failed or skipped.

Hard checks (a failure makes ``ok`` false and the CLI exit non-zero):

- ``sizes``: the extended model is at least as large as the base.
- ``base_pieces_unchanged``: ids 0..base-1 have the base's piece strings, scores (bitwise) and types.
- ``encoding_settings_unchanged``: normaliser, model type and whitespace handling equal the base's.
- ``reachability``: every appended piece is produced by encoding its own surface text (exact
  whitespace, no dummy prefix). A piece that fails this can never be produced in any context, so its
  embedding row would never train.
- ``new_language_unknown_rate``: unknown tokens on the new-language samples, at most ``max_unk_rate``.
- ``base_language_identical``: base-language samples encode to exactly the base's ids. Lines where the
  base itself produced unknown tokens and the extension encodes them better are counted, not failed.
- ``manifest_max_text_tokens``: the longest text of a manifest fits ``max_text_tokens``.

Soft checks (``warn`` never fails the run): share of new ids on new-language text, round trip,
appended scores below the base's (BPE), Ethiopic syllabary coverage, and ``training_coverage``: the appended
pieces the training manifest never encodes to (their rows never train) and the script's letters it never has
(``data_tools.tokenizer.coverage``); ``info`` rows carry metrics
(tokens per word against the base). A check that cannot run says ``skipped`` and why; none is claimed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sentencepiece as spm

from data_tools.text import normalize_text, script_letters, scripts_in
from data_tools.tokenizer.coverage import token_coverage
from data_tools.tokenizer.extend import unreachable_pieces
from data_tools.tokenizer.spm_model import (
    ModelProto,
    TokenizerToolError,
    load_model_proto,
    model_type_name,
    processor_from_proto,
    same_piece,
)
from data_tools.tokenizer.train import iter_corpus_lines

PASS, FAIL, WARN, INFO, SKIPPED = "pass", "fail", "warn", "info", "skipped"
MIN_NEW_ID_SHARE = 0.5
EXAMPLES = 5


@dataclass
class Check:
    name: str
    status: str
    hard: bool
    message: str
    value: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass
class VerifyReport:
    tokenizer: str
    base: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(check.failed for check in self.checks)

    @property
    def failed_checks(self) -> list[str]:
        return [check.name for check in self.checks if check.failed]

    def check(self, name: str) -> Check:
        for item in self.checks:
            if item.name == name:
                return item
        raise KeyError(name)

    def to_json(self) -> str:
        return json.dumps({"tokenizer": self.tokenizer, "base": self.base, "ok": self.ok,
                           "failed": self.failed_checks, "checks": [asdict(c) for c in self.checks]},
                          ensure_ascii=False, indent=2)

    def table(self) -> str:
        width = max(len(check.name) for check in self.checks) if self.checks else 10
        lines = [f"{'check':<{width}}  {'result':<8}  detail", f"{'-' * width}  {'-' * 8}  {'-' * 40}"]
        for check in self.checks:
            result = check.status.upper() if check.status in (PASS, FAIL, WARN) else check.status
            lines.append(f"{check.name:<{width}}  {result:<8}  {check.message}")
        hard = [c for c in self.checks if c.hard]
        ran = sum(1 for c in hard if c.status != SKIPPED)
        skipped = sum(1 for c in hard if c.status == SKIPPED)
        if self.ok:
            verdict = f"verdict: OK ({ran} hard checks passed, {skipped} skipped)"
        else:
            verdict = f"verdict: FAILED ({', '.join(self.failed_checks)})"
        return "\n".join([*lines, verdict])


@dataclass
class _Model:
    proto: ModelProto
    sp: spm.SentencePieceProcessor

    @property
    def size(self) -> int:
        return len(self.proto.pieces)

    def encode(self, text: str) -> list[int]:
        return list(self.sp.EncodeAsIds(text))


def _model(path: Path) -> _Model:
    proto = load_model_proto(path)
    return _Model(proto, processor_from_proto(proto))


def read_samples(path: Path, limit: int | None = None) -> list[str]:
    """Non-empty lines of a text file, or the ``text`` fields of a JSONL manifest."""
    samples: list[str] = []
    for raw, _language, _line in iter_corpus_lines(Path(path)):
        if raw.strip():
            samples.append(raw)
            if limit is not None and len(samples) >= limit:
                break
    return samples


def verify_tokenizer(
    extended: Path,
    base: Path | None,
    samples_new: Sequence[str] = (),
    samples_base: Sequence[str] = (),
    manifest: Path | None = None,
    max_text_tokens: int | None = None,
    *,
    language: str | None = None,
    base_language: str | None = None,
    max_unk_rate: float = 0.0,
) -> VerifyReport:
    """Run every check that the inputs allow; raises TokenizerToolError only for unreadable inputs."""
    ext = _model(Path(extended))
    ref = _model(Path(base)) if base is not None else None
    report = VerifyReport(tokenizer=str(extended), base=str(base) if base is not None else None)
    add = report.checks.append
    no_base = "skipped (no base tokenizer given)"

    add(_check_sizes(ext, ref))
    base_ok = ref is not None and ext.size >= ref.size
    not_base_ok = no_base if ref is None else "skipped (the tokenizer is smaller than the base; see sizes)"
    add(_check_base_pieces(ext, ref) if base_ok else _skip("base_pieces_unchanged", True, not_base_ok))
    add(_check_settings(ext, ref) if ref is not None else _skip("encoding_settings_unchanged", True, no_base))
    add(_check_reachability(ext, ref) if base_ok else _skip("reachability", True, not_base_ok))
    if ref is not None and model_type_name(ref.proto) == "bpe" and base_ok:
        add(_check_bpe_scores(ext, ref))

    new_texts = [t for t in (normalize_text(s, language) for s in samples_new) if t]
    if new_texts:
        add(_check_unknown(ext, new_texts, max_unk_rate))
        if ref is not None:
            add(_check_new_id_share(ext, ref, new_texts))
        else:
            add(_skip("new_language_new_id_share", False, no_base))
        add(_check_round_trip(ext, new_texts))
        add(_check_tokens_per_word(ext, ref, new_texts))
    else:
        why = "skipped (no new-language sample text given)"
        for name, hard in (("new_language_unknown_rate", True), ("new_language_new_id_share", False),
                           ("new_language_round_trip", False), ("new_language_tokens_per_word", False)):
            add(_skip(name, hard, why))

    base_texts = [t for t in (normalize_text(s, base_language) for s in samples_base) if t]
    if ref is None:
        add(_skip("base_language_identical", True, no_base))
    elif not base_texts:
        add(_skip("base_language_identical", True, "skipped (no base-language sample text given)"))
    else:
        add(_check_base_identical(ext, ref, base_texts))

    add(_check_ethiopic_coverage(ext, new_texts))
    add(_check_manifest(ext, manifest, max_text_tokens, language))
    add(_check_training_coverage(ext, ref if base_ok else None, manifest, language))
    return report


def _skip(name: str, hard: bool, why: str) -> Check:
    return Check(name, SKIPPED, hard, why)


def _check_sizes(ext: _Model, ref: _Model | None) -> Check:
    if ref is None:
        return Check("sizes", INFO, True, f"{ext.size} pieces (no base to compare)", {"size": ext.size})
    value = {"size": ext.size, "base_size": ref.size, "appended": ext.size - ref.size}
    if ext.size < ref.size:
        return Check("sizes", FAIL, True, f"{ext.size} pieces is smaller than the base's {ref.size}", value)
    return Check("sizes", PASS, True, f"{ext.size} pieces = {ref.size} base + {ext.size - ref.size} appended", value)


def _check_base_pieces(ext: _Model, ref: _Model) -> Check:
    bad = [i for i in range(ref.size) if not same_piece(ext.proto.pieces[i], ref.proto.pieces[i])]
    if not bad:
        return Check("base_pieces_unchanged", PASS, True,
                     f"ids 0-{ref.size - 1}: strings, scores and types identical to the base")
    examples = [
        f"id {i}: base {ref.proto.pieces[i].piece!r} ({ref.proto.pieces[i].score:g}) "
        f"here {ext.proto.pieces[i].piece!r} ({ext.proto.pieces[i].score:g})"
        for i in bad[:EXAMPLES]
    ]
    return Check("base_pieces_unchanged", FAIL, True,
                 f"{len(bad)} base ids changed: " + "; ".join(examples), {"changed_ids": bad[:100]})


def _check_settings(ext: _Model, ref: _Model) -> Check:
    diffs = []
    if ext.proto.normalizer_spec.SerializeToString() != ref.proto.normalizer_spec.SerializeToString():
        diffs.append("normalizer_spec")
    if ext.proto.denormalizer_spec.SerializeToString() != ref.proto.denormalizer_spec.SerializeToString():
        diffs.append("denormalizer_spec")
    for key in ("model_type", "treat_whitespace_as_suffix", "byte_fallback", "unk_surface"):
        if getattr(ext.proto.trainer_spec, key) != getattr(ref.proto.trainer_spec, key):
            diffs.append(f"trainer_spec.{key}")
    if diffs:
        return Check("encoding_settings_unchanged", FAIL, True,
                     "differs from the base: " + ", ".join(diffs), {"differences": diffs})
    return Check("encoding_settings_unchanged", PASS, True, "normaliser, model type and whitespace handling as in the base")


def _check_reachability(ext: _Model, ref: _Model) -> Check:
    missing = unreachable_pieces(ext.proto, ref.size)
    appended = ext.size - ref.size
    if not missing:
        return Check("reachability", PASS, True,
                     f"all {appended} appended pieces are produced by encoding their own text", {"unreachable": 0})
    examples = [f"{piece!r} -> {' '.join(parts)}" for _, piece, parts in missing[:EXAMPLES]]
    return Check("reachability", FAIL, True,
                 f"{len(missing)} of {appended} appended pieces can never be produced: " + "; ".join(examples),
                 {"unreachable": len(missing), "pieces": [piece for _, piece, _ in missing[:100]]})


def _check_bpe_scores(ext: _Model, ref: _Model) -> Check:
    lowest = min(piece.score for piece in ref.proto.pieces)
    above = [p.piece for p in ext.proto.pieces[ref.size:] if not p.score < lowest]
    if above:
        return Check("appended_scores_below_base", WARN, False,
                     f"{len(above)} appended pieces score >= the base's lowest ({lowest:g}): their merges can "
                     f"pre-empt base merges", {"above": len(above)})
    return Check("appended_scores_below_base", PASS, False,
                 f"every appended piece scores below the base's lowest ({lowest:g}): base merges keep priority")


def _check_unknown(ext: _Model, texts: list[str], max_rate: float) -> Check:
    unk = ext.sp.unk_id()
    total = 0
    unknown = 0
    chars: Counter[str] = Counter()
    for text in texts:
        ids = ext.encode(text)
        total += len(ids)
        if unk in ids:
            unknown += ids.count(unk)
            chars.update(ch for ch in text if ext.sp.PieceToId(ch) == unk and not ch.isspace())
    rate = unknown / total if total else 0.0
    value = {"unknown_tokens": unknown, "tokens": total, "rate": rate,
             "unknown_characters": dict(chars.most_common(20))}
    message = f"{unknown} unknown of {total} tokens ({rate:.4%}) on {len(texts)} lines"
    if chars:
        message += "; unknown characters: " + " ".join(f"{ch!r}x{n}" for ch, n in chars.most_common(10))
    return Check("new_language_unknown_rate", FAIL if rate > max_rate else PASS, True, message, value)


def _check_new_id_share(ext: _Model, ref: _Model, texts: list[str]) -> Check:
    ids = [i for text in texts for i in ext.encode(text)]
    share = sum(1 for i in ids if i >= ref.size) / len(ids) if ids else 0.0
    status = PASS if share >= MIN_NEW_ID_SHARE else WARN
    return Check("new_language_new_id_share", status, False,
                 f"{share:.1%} of the ids are appended pieces (>= {ref.size})", {"share": share})


def _check_round_trip(ext: _Model, texts: list[str]) -> Check:
    bad = [text for text in texts if " ".join(ext.sp.DecodeIds(ext.encode(text)).split()) != " ".join(text.split())]
    rate = 1 - len(bad) / len(texts)
    message = f"{len(texts) - len(bad)} of {len(texts)} lines decode back to their normalised text"
    if bad:
        message += "; e.g. " + " | ".join(repr(t) for t in bad[:3])
    return Check("new_language_round_trip", PASS if not bad else WARN, False, message,
                 {"rate": rate, "failed_examples": bad[:EXAMPLES]})


def _check_tokens_per_word(ext: _Model, ref: _Model | None, texts: list[str]) -> Check:
    words = sum(len(text.split()) for text in texts)
    ext_tokens = sum(len(ext.encode(text)) for text in texts)
    value: dict[str, Any] = {"extended": ext_tokens / words if words else 0.0}
    message = f"{value['extended']:.2f} tokens/word"
    if ref is not None:
        base_ids = [ref.encode(text) for text in texts]
        base_tokens = sum(len(ids) for ids in base_ids)
        unk = ref.sp.unk_id()
        base_unknown = sum(ids.count(unk) for ids in base_ids)
        value["base"] = base_tokens / words if words else 0.0
        value["base_unknown_share"] = base_unknown / base_tokens if base_tokens else 0.0
        message += (f" (base: {value['base']:.2f}, of which {value['base_unknown_share']:.0%} unknown tokens; "
                    "the base folds runs of unknown characters into one token)")
    return Check("new_language_tokens_per_word", INFO, False, message, value)


def _check_base_identical(ext: _Model, ref: _Model, texts: list[str]) -> Check:
    unk = ref.sp.unk_id()
    changed: list[str] = []
    improved = 0
    for text in texts:
        base_ids = ref.encode(text)
        if base_ids == ext.encode(text):
            continue
        if unk in base_ids:
            improved += 1
        else:
            changed.append(text)
    value = {"lines": len(texts), "changed": len(changed), "improved_base_unknowns": improved}
    note = f"; {improved} lines with characters unknown to the base now encode without them" if improved else ""
    if changed:
        return Check("base_language_identical", FAIL, True,
                     f"{len(changed)} of {len(texts)} base-language lines encode differently from the base, e.g. "
                     + " | ".join(repr(t) for t in changed[:3]) + note, {**value, "examples": changed[:EXAMPLES]})
    return Check("base_language_identical", PASS, True,
                 f"{len(texts) - improved} of {len(texts)} lines encode to exactly the base's ids{note}", value)


def _check_ethiopic_coverage(ext: _Model, texts: list[str]) -> Check:
    letters = script_letters("ethiopic")
    pieces = {p.piece for p in ext.proto.pieces}
    if "ethiopic" not in scripts_in("".join(texts)) and not any(ch in pieces for ch in letters):
        return _skip("ethiopic_coverage", False, "skipped (no Ethiopic text in the samples or pieces)")
    missing = [ch for ch in letters if ch not in pieces]
    covered = len(letters) - len(missing)
    value = {"covered": covered, "syllabary": len(letters), "missing": "".join(missing)}
    message = f"{covered} of {len(letters)} Ethiopic syllables are pieces"
    if missing:
        message += f"; missing: {''.join(missing[:30])}" + ("..." if len(missing) > 30 else "")
    return Check("ethiopic_coverage", PASS if not missing else WARN, False, message, value)


def _check_training_coverage(ext: _Model, ref: _Model | None, manifest: Path | None, language: str | None) -> Check:
    """Soft: the appended pieces and the script's letters the training manifest never has."""
    name = "training_coverage"
    if manifest is None:
        return _skip(name, False, "skipped (no --manifest given)")
    texts = (normalize_text(raw, language or line_language) for raw, line_language, _ in iter_corpus_lines(manifest))
    found = token_coverage(texts, ext.encode, [p.piece for p in ext.proto.pieces], ref.size if ref else None)
    status = WARN if found.untrained or found.unseen_letters else PASS
    return Check(name, status, False, found.message(), found.to_json())


def _check_manifest(ext: _Model, manifest: Path | None, max_text_tokens: int | None,
                    language: str | None) -> Check:
    name = "manifest_max_text_tokens"
    if manifest is None:
        return _skip(name, True, "skipped (no --manifest given)")
    longest = (0, "", 0)
    over: list[tuple[int, int]] = []
    lines = 0
    for raw, line_language, lineno in iter_corpus_lines(Path(manifest)):
        length = len(ext.encode(normalize_text(raw, language or line_language)))
        lines += 1
        if length > longest[0]:
            longest = (length, raw, lineno)
        if max_text_tokens is not None and length > max_text_tokens:
            over.append((lineno, length))
    value = {"entries": lines, "longest": longest[0], "longest_line": longest[2], "limit": max_text_tokens,
             "over_limit": len(over)}
    where = f"{manifest}:{longest[2]}"
    if max_text_tokens is None:
        return Check(name, SKIPPED, True,
                     f"skipped (no max_text_tokens: give --config or --max-text-tokens); longest text is "
                     f"{longest[0]} tokens at {where}", value)
    if over:
        lines_shown = ", ".join(f"{manifest}:{n} ({length})" for n, length in over[:EXAMPLES])
        return Check(name, FAIL, True,
                     f"{len(over)} of {lines} texts exceed max_text_tokens {max_text_tokens}: {lines_shown}", value)
    return Check(name, PASS, True,
                 f"longest of {lines} texts is {longest[0]} tokens ({where}) <= max_text_tokens {max_text_tokens}",
                 value)


__all__ = ["Check", "TokenizerToolError", "VerifyReport", "read_samples", "verify_tokenizer"]
