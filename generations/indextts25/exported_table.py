"""The text scheme and tokenizer of an IndexTTS-2.5 export folder, whose gpt.pth records no scheme.

An export (``generations.indextts25.export``) writes the table upstream reads: for the ``merges`` scheme the base
ranks then the added ones (ranks from 58836, in merge order), for ``translit`` the stock table with
``amharic_translit.py`` beside it. Such a folder tells its scheme by those files, and its extended table holds the
merges itself, so the studio speaks a moved export without the run's merges JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TRANSLIT_MODULE = "amharic_translit.py"  # what a translit export carries beside its table


def extended_ranks(table: Path) -> tuple[dict[bytes, int], list[bytes]] | None:
    """(base ranks, added tokens in rank order) of an exported extended table; None for a base-sized table."""
    from generations.indextts25.data.tiktoken_table import BASE_RANK_COUNT, read_table

    ranks = read_table(table)
    if len(ranks) <= BASE_RANK_COUNT:
        return None
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    base = {token: rank for token, rank in ordered if rank < BASE_RANK_COUNT}
    return base, [token for token, rank in ordered if rank >= BASE_RANK_COUNT]


def folder_scheme(folder: Path, table: Path) -> str | None:
    """The scheme an export folder's files say (``merges``: an extended table; ``translit``: the transliteration
    module beside the table); None when they say none."""
    from generations.indextts25.data.tiktoken_table import TableError

    try:
        if extended_ranks(table) is not None:
            return "merges"
    except (TableError, OSError):
        return None
    return "translit" if (folder / TRANSLIT_MODULE).is_file() else None


def exported_tokenizer(table: Path) -> Any | None:
    """The ``merges`` tokenizer an extended exported table holds (its added ranks are the merges, in order);
    None for a base-sized table."""
    from generations.indextts25.data.text_table import TextTable
    from generations.indextts25.data.tiktoken_table import TiktokenTable

    found = extended_ranks(table)
    if found is None:
        return None
    tokenizer = object.__new__(TextTable)  # its constructor reads a base table and a merges JSON
    tokenizer.scheme, tokenizer.table, tokenizer.merges, tokenizer.normalize = "merges", Path(table), None, True
    tokenizer.tokenizer = TiktokenTable(found[0], found[1], source=Path(table))
    return tokenizer
