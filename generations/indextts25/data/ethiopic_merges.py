"""Ethiopic merges for IndexTTS-2.5's byte-level BPE: learn, save, load, and write an upstream table.

The 2.5 table has no Ethiopic merges, so Amharic costs about 2.3 tokens per character. ``learn_merges``
continues byte-pair training on an Amharic corpus on top of the base ranks: the corpus is tokenised by the
base table (each line as the model sees it, after ``"<|am|>"``: a leading space and the inference-side
character map), the most frequent adjacent pair becomes a new token, and so on. Rules:

- a new token must contain the start of an Ethiopic letter (UTF-8 ``E1 88``..``E1 8D``: U+1200-U+137F).
  UTF-8 never starts a character inside another, so such a token can only match Ethiopic text: text without
  Ethiopic letters (English, Chinese...) tokenises exactly as with the base table, and every base id is kept;
- new tokens are ranked after every base rank, in merge order. Encoding is tiktoken's own (lowest rank
  first), and learning re-runs exactly that merge rule on every word a new token touches, so what was
  counted is what tiktoken produces;
- ties between equally frequent pairs go to the smaller (left id, right id): the result is deterministic.

Saved as JSON (``save_merges``): the base table's sha256, the added tokens in order with their bytes (base64),
text where they are whole characters, and their decomposition into base ids (``base_ids``: the base table's
tokens for the same bytes, whose embeddings a new row starts from). ``write_upstream_table`` writes the
``.tiktoken`` file stock upstream inference reads (added ranks right after the base ranks).
"""

from __future__ import annotations

import base64
import heapq
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import regex

from data_tools.fileio import atomic_write_bytes, atomic_write_text, sha256_file
from generations.indextts25.data.tiktoken_table import (
    BASE_RANK_COUNT,
    BASE_TEXT_ROWS,
    SPLIT_PATTERN,
    TableError,
    TiktokenTable,
    base_bpe,
    inference_text,
    merge_parts,
    read_table,
)

FORMAT = "indextts25-ethiopic-merges/1"
_ETHIOPIC_START = re.compile(rb"\xe1[\x88-\x8d]")
_SPLIT = regex.compile(SPLIT_PATTERN)


def is_ethiopic_token(token: bytes) -> bool:
    return _ETHIOPIC_START.search(token) is not None


@dataclass
class Merges:
    """Added tokens in merge order, on top of the base table ``base_sha256``."""

    tokens: list[bytes]
    base_sha256: str = ""
    counts: list[int] = field(default_factory=list)  # corpus frequency of each merge when it was made
    corpus: str = ""
    corpus_tokens: int = 0  # tokens of the Ethiopic words of the corpus after the last merge (a self-check)

    def to_json(self, tokenizer: TiktokenTable) -> dict:
        added = []
        for i, token in enumerate(self.tokens):
            try:
                text = token.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            added.append({"id": BASE_TEXT_ROWS + i, "upstream_rank": BASE_RANK_COUNT + i,
                          "bytes": base64.b64encode(token).decode("ascii"), "text": text,
                          "base_ids": tokenizer.base_ids_of(token),
                          "count": self.counts[i] if i < len(self.counts) else None})
        return {"format": FORMAT, "base_table_sha256": self.base_sha256, "base_ranks": BASE_RANK_COUNT,
                "first_added_id": BASE_TEXT_ROWS, "n_added": len(self.tokens), "corpus": self.corpus,
                "added": added}


def learn_merges(tokenizer: TiktokenTable, lines: Iterable[str], n_merges: int, *, language: str = "am",
                 min_count: int = 2, log: Callable[[str], None] | None = None) -> Merges:
    """Learn up to ``n_merges`` Ethiopic merges from ``lines`` (raw text, one utterance each)."""
    if tokenizer.added:
        raise TableError("learn merges on the base table (this one already has added tokens)")
    ranks = dict(tokenizer.base_ranks)
    words = ethiopic_words(lines, language)
    token_of = {rank: token for token, rank in ranks.items()}
    parts: list[list[int]] = []
    weight: list[int] = []
    for word, count in sorted(words.items()):
        parts.append(base_bpe(word.encode("utf-8"), ranks))
        weight.append(count)

    # Pairs are keyed by the bytes they merge into: tiktoken merges by bytes, whichever two tokens hold them.
    pair_count: Counter[bytes] = Counter()
    where: defaultdict[bytes, set[int]] = defaultdict(set)

    def account(index: int, sign: int) -> list[bytes]:
        seq = parts[index]
        touched = []
        for left, right in pairwise(seq):
            merged = token_of[left] + token_of[right]
            if is_ethiopic_token(merged):
                pair_count[merged] += sign * weight[index]
                if sign > 0:
                    where[merged].add(index)
                touched.append(merged)
        return touched

    for index in range(len(parts)):
        account(index, +1)
    heap = [(-count, merged) for merged, count in pair_count.items()]
    heapq.heapify(heap)

    added: list[bytes] = []
    counts: list[int] = []
    while len(added) < n_merges and heap:
        negative, token = heapq.heappop(heap)
        if pair_count.get(token, 0) != -negative:
            continue  # a stale entry: the pair's count changed since it was pushed
        if -negative < min_count:
            break
        new_id = BASE_TEXT_ROWS + len(added)
        ranks[token] = new_id
        token_of[new_id] = token
        added.append(token)
        counts.append(-negative)
        changed: set[bytes] = set()
        for index in sorted(where.pop(token, ())):
            changed.update(account(index, -1))
            parts[index] = _merge_on(parts[index], ranks, token_of)
            changed.update(account(index, +1))
        pair_count.pop(token, None)
        for other in changed:
            count = pair_count.get(other, 0)
            if count > 0 and other not in ranks:
                heapq.heappush(heap, (-count, other))
            else:
                pair_count.pop(other, None)
        if log is not None and len(added) % 500 == 0:
            log(f"{len(added)} merges (the last seen {counts[-1]} times)")
    corpus_tokens = sum(len(seq) * count for seq, count in zip(parts, weight, strict=True))
    return Merges(added, tokenizer.sha256, counts, corpus_tokens=corpus_tokens)


def ethiopic_words(lines: Iterable[str], language: str = "am") -> Counter[str]:
    """Pre-tokens holding Ethiopic letters, counted, as the tokenizer splits ``"<|am|> " + line``."""
    words: Counter[str] = Counter()
    for line in lines:
        text = " " + inference_text(line, language)
        words.update(piece for piece in _SPLIT.findall(text) if _ETHIOPIC_START.search(piece.encode("utf-8")))
    return words


def added_token_base_ids(tokenizer: TiktokenTable) -> dict[int, list[int]]:
    """For each added token id, the base ids of the same bytes: the rows a new embedding row starts from."""
    return {tokenizer.first_added_id + i: tokenizer.base_ids_of(token) for i, token in enumerate(tokenizer.added)}


def _merge_on(seq: list[int], ranks: dict[bytes, int], token_of: dict[int, bytes]) -> list[int]:
    """Continue tiktoken's merge rule (lowest rank first, leftmost on ties) from ``seq``."""
    return merge_parts([token_of[i] for i in seq], ranks)


def save_merges(merges: Merges, tokenizer: TiktokenTable, path: str | Path) -> None:
    data = merges.to_json(tokenizer)
    added = data.pop("added")
    head = json.dumps(data, ensure_ascii=False, indent=1)[:-2]  # without the closing "\n}"
    rows = ",\n".join("  " + json.dumps(entry, ensure_ascii=False) for entry in added)  # one token a line
    atomic_write_text(Path(path), f'{head},\n "added": [\n{rows}\n ]\n}}\n')


def load_merges(path: str | Path, base_table: str | Path | None = None) -> list[bytes]:
    """The added tokens of a merges JSON, in order; checks the base table's sha256 when ``base_table`` is given."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TableError(f"cannot read Ethiopic merges {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TableError(f"{path}: not an Ethiopic merges file (format {FORMAT!r})")
    if base_table is not None and data.get("base_table_sha256"):
        actual = sha256_file(base_table)
        if actual != data["base_table_sha256"]:
            raise TableError(f"{path}: learned on another base table (sha256 {data['base_table_sha256'][:12]}, "
                             f"{base_table} is {actual[:12]})")
    tokens = []
    for i, entry in enumerate(data.get("added", [])):
        try:
            token = base64.b64decode(entry["bytes"], validate=True)
        except (KeyError, TypeError, ValueError):
            raise TableError(f"{path}: added token {i} has no valid 'bytes'") from None
        if not is_ethiopic_token(token):
            raise TableError(f"{path}: added token {i} holds no Ethiopic letter start")
        tokens.append(token)
    return tokens


def load_extended(base_table: str | Path, merges_json: str | Path | None) -> TiktokenTable:
    """The 2.5 tokenizer, with the merges of ``merges_json`` when given."""
    added = load_merges(merges_json, base_table) if merges_json is not None else []
    return TiktokenTable.load(base_table, added)


def write_upstream_table(tokenizer: TiktokenTable, path: str | Path) -> None:
    """The ``.tiktoken`` file stock inference reads: base lines unchanged, then the added ranks from 58836.

    Upstream numbers the special tokens after the file's ranks, so they move up by the number of added
    tokens; the GPT's text rows must be re-ordered to match (``TiktokenTable.upstream_id_order``).
    """
    if tokenizer.source is None:
        raise TableError("the base table's file is needed to write an upstream table")
    base = tokenizer.source.read_bytes()
    if not base.endswith(b"\n"):
        base += b"\n"
    lines = [base64.b64encode(token) + b" " + str(BASE_RANK_COUNT + i).encode("ascii")
             for i, token in enumerate(tokenizer.added)]
    atomic_write_bytes(Path(path), base + b"".join(line + b"\n" for line in lines))


def check_upstream_table(path: str | Path) -> int:
    """Number of added ranks in an upstream-layout table (checks it reads as one)."""
    ranks = read_table(path)
    return len(ranks) - BASE_RANK_COUNT
