"""The Test tab's token coverage for IndexTTS-2.5 runs (byte-level tiktoken table, ``--text-scheme``): the entry's
``ui.coverage_marks``, which ``webui.testing.text_coverage`` calls for a run whose tokenizer this generation reads.

The run's own tokenizer (its ``train_config.yaml``: table, scheme, merges, opened as the trainer opens it) encodes
the run's training texts (a paired manifest's ``target_text``, or ``text``) and the text to speak, as a 2.5 model
reads them (``"<|am|> "`` prefix, normalisation, the scheme). Two things are marked, with the rules of
``data_tools.tokenizer.coverage`` that the pre-flight counts with: the merges the run appended whose rows no
training text reaches, and the letters of the text's script (Ethiopic) that no training text has. A text is shown
in whole characters: a letter whose UTF-8 bytes span several byte-level tokens is one chunk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from data_tools.text import detect_language, language_normalize
from data_tools.tokenizer.coverage import (
    appended_ids,
    byte_chunks,
    marked_chunks,
    seen_characters,
    trained_appended,
    unseen_letters,
)
from webui.testing.file_stamp import Stamp, stamp_of


def manifest_texts(path: Path, language: str | None) -> Iterator[tuple[str, str]]:
    """(text, language) of each readable line of a manifest (``target_text``, else ``text``); bad lines skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        text = entry.get("target_text", entry.get("text"))
        code = entry.get("language") if isinstance(entry.get("language"), str) else language
        if isinstance(text, str) and text.strip() and code:
            yield text, code


@lru_cache(maxsize=4)
def _tokenizer(table: Stamp, scheme: str, merges: Stamp | None) -> Any:
    """The run's tokenizer (opened once per version of its files: the text box asks on every keystroke)."""
    from generations.indextts25.model import open_tokenizer

    return open_tokenizer({"tokenizer": table[0], "text_scheme": scheme, "text_merges": merges[0] if merges else ""})


@lru_cache(maxsize=8)
def _coverage(table: Stamp, scheme: str, merges: Stamp | None, base_size: int,
              manifests: tuple[tuple[Stamp, str | None], ...]) -> tuple[range, frozenset[int], frozenset[str]]:
    """(appended ids, the ones the run's texts reach, the characters its texts hold)."""
    tokenizer = _tokenizer(table, scheme, merges)
    texts = [(text, language) for (path, _, _), spec_language in manifests
             for text, language in manifest_texts(Path(path), spec_language)]
    appended = appended_ids(base_size, tokenizer.number_text_tokens, tokenizer.spare_text_rows)
    trained = trained_appended((tokenizer.encode(text, language) for text, language in texts), appended)
    seen = seen_characters(language_normalize(text, language) for text, language in texts)
    return appended, trained, seen


def untrained_marks(options: dict[str, Any], table: Stamp, base_size: int,
                    manifests: tuple[tuple[Stamp, str | None], ...], text: str
                    ) -> tuple[list[str], list[int], list[str]] | None:
    """(the text's chunks, the marked ones' positions, their names) or None when nothing is marked or the run's
    tokenizer cannot be opened. ``options``: the run's ``train_config.yaml`` (its scheme and merges file);
    ``table``: its text table."""
    from generations.indextts25.data.tiktoken_table import TableError
    from trainer.errors import UsageError

    merges_path = str(options.get("text_merges") or "").strip()
    merges = stamp_of(Path(merges_path)) if merges_path else None
    if merges_path and merges is None:
        return None
    language = detect_language(text)
    if language is None:
        return None
    scheme = str(options.get("text_scheme") or "merges")
    try:
        tokenizer = _tokenizer(table, scheme, merges)
        appended, trained, seen = _coverage(table, scheme, merges, base_size, manifests)
    except (UsageError, TableError, OSError, ValueError):
        return None
    encoded = tokenizer.tokenizer.encode_for_language(tokenizer.model_text(text, language), language)
    chunks = byte_chunks(encoded.ids[encoded.prefix_length:], tokenizer.tokenizer.token_bytes)
    untrained = marked_chunks(chunks, appended, trained)
    unseen = unseen_letters(language_normalize(text, language), seen)  # translit: shown in Latin, named here
    names = list(dict.fromkeys([chunks[index][0].strip() for index in untrained] + unseen))
    if not names:
        return None
    marked = sorted({*untrained, *marked_chunks(chunks, appended, trained, unseen)})
    return [shown for shown, _ids in chunks], marked, names
