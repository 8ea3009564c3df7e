"""The Test tab marks text that uses pieces the picked model's run never trained, before it is spoken.

An extended tokenizer's appended pieces are new rows of the GPT's text embedding; a row that no training text
encodes to keeps its initial value, and the model speaks noise where a text needs it. For a checkpoint of a run
(its folder holds ``train_config.yaml``), the run's manifests say which rows trained and the checkpoint's
``base_vocab_size`` which rows are appended (``data_tools.tokenizer.coverage``, as the Tokenizer tab's verify).
That is the SentencePiece rule, the default; a generation whose registry entry reads the run's tokenizer file
(``reads_tokenizer``) and gives ``ui.coverage_marks`` marks its runs itself (IndexTTS-2.5: the merges its
table appended that never trained, and the letters its data never had). The rules are
``data_tools.tokenizer.coverage``'s, as the pre-flight's count. A base model or an export is not marked: nothing says what it trained on.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

from data_tools.manifest import parse_manifest_spec
from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from data_tools.tokenizer.coverage import appended_ids, marked_chunks, trained_appended
from generations.registry import GENERATIONS
from webui.plots import badge_html
from webui.testing.file_stamp import Stamp, stamp_of
from webui.testing.listen import ListenError, resolve_model
from webui.testing.listen_models import BASE_PREFIX, TRAIN_CONFIG, read_yaml

SHOWN = 12  # marked pieces listed by name
Marks = tuple[list[str], list[int], list[str]]  # (the text's chunks, the marked ones' positions, their names)


@lru_cache(maxsize=16)
def _base_size(stamp: Stamp) -> int | None:
    """The checkpoint's ``base_vocab_size`` (None: it records none, or it cannot be read)."""
    import pickle

    import torch

    try:
        ckpt = torch.load(stamp[0], map_location="cpu", weights_only=True, mmap=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError):
        return None
    value = ckpt.get("base_vocab_size") if isinstance(ckpt, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _manifests(run: Path) -> list[tuple[Path, str | None]] | None:
    options = read_yaml(run / TRAIN_CONFIG)
    if options is None:
        return None
    found = []
    listed = options.get("train_manifest") or []  # replayed languages included: their rows train too
    for spec in listed if isinstance(listed, list) else [listed]:
        parsed = parse_manifest_spec(str(spec))
        found.append((parsed.path if parsed.path.is_absolute() else run / parsed.path, parsed.language))
    return found


def _texts(manifests: tuple[tuple[Stamp, str | None], ...]) -> Iterator[tuple[str, str | None]]:
    from data_tools.tokenizer.train import TokenizerToolError, iter_corpus_lines

    for (path, _, _), language in manifests:
        try:
            for raw, line_language, _ in iter_corpus_lines(Path(path)):
                yield raw, line_language or language
        except TokenizerToolError:
            continue


@lru_cache(maxsize=8)
def _tokenizer(stamp: Stamp) -> TextTokenizer:
    """The tokenizer file as it is now (loaded once per version: the text box asks on every keystroke)."""
    return TextTokenizer(stamp[0])


@lru_cache(maxsize=8)
def _trained(tokenizer: Stamp, manifests: tuple[tuple[Stamp, str | None], ...]) -> frozenset[int]:
    model = _tokenizer(tokenizer)
    return trained_appended((model.encode_normalized(model.normalize(raw, language))
                             for raw, language in _texts(manifests)), range(model.vocab_size))


def untrained_marks(checkpoint: Path, tokenizer: Path | None, text: str) -> tuple[str, list[str]] | None:
    """(the text as the model reads it, with the untrained pieces (and, where its generation's rule says so, the
    letters its data never had) in <mark>; their names), or None when the model's run says nothing (not a run's
    checkpoint, no base size) or nothing is marked."""
    run = checkpoint.parent
    options = read_yaml(run / TRAIN_CONFIG) if (run / TRAIN_CONFIG).is_file() else None
    manifests = _manifests(run) if options is not None else None
    checkpoint_stamp, tokenizer_stamp = stamp_of(checkpoint), stamp_of(tokenizer) if tokenizer else None
    if not manifests or checkpoint_stamp is None or tokenizer_stamp is None or not text.strip():
        return None
    base_size = _base_size(checkpoint_stamp)
    stamps = tuple((stamp, language) for stamp, language in ((stamp_of(p), lang) for p, lang in manifests) if stamp)
    if base_size is None or not stamps:
        return None
    own_marks = _coverage_marks(tokenizer_stamp[0])
    found = (own_marks(options or {}, tokenizer_stamp, base_size, stamps, text) if own_marks is not None
             else _marks_sentencepiece(tokenizer_stamp, base_size, stamps, text))
    if found is None:
        return None
    chunks, marked, names = found
    shown = "".join(f"<mark>{html.escape(chunk)}</mark>" if index in marked else html.escape(chunk)
                    for index, chunk in enumerate(chunks)).replace("\u2581", " ")
    return shown.strip(), names


def _coverage_marks(tokenizer: str) -> Callable[..., Marks | None] | None:
    """The coverage rule of the generation that reads this tokenizer file (None: the SentencePiece default)."""
    owner = next((entry for entry in GENERATIONS if entry.reads_tokenizer(tokenizer)), None)
    return owner.ui.coverage_marks if owner is not None and owner.ui is not None else None


def _marks_sentencepiece(tokenizer: Stamp, base_size: int, manifests: tuple[tuple[Stamp, str | None], ...],
                         text: str) -> Marks | None:
    try:
        model = _tokenizer(tokenizer)
        trained = _trained(tokenizer, manifests)
    except (TokenizerError, OSError, ValueError):
        return None
    ids, pieces = model.encode(text), model.pieces(text)
    if len(ids) != len(pieces):
        return None
    marked = marked_chunks([(piece, [i]) for piece, i in zip(pieces, ids)], appended_ids(base_size, model.vocab_size),
                           trained)
    return (pieces, marked, [pieces[index].replace("\u2581", "") for index in marked]) if marked else None


def coverage_html(workspace: Path, picks: dict[str, str | None], vocoder: str | None, text: str) -> str:
    """One warning per side whose run never trained some of this text's pieces ('' when none)."""
    parts = []
    for side, key in picks.items():
        if not (key or "").strip() or str(key).startswith(BASE_PREFIX):
            continue
        try:
            spec = resolve_model(str(key), workspace, vocoder)
        except ListenError:
            continue
        found = untrained_marks(spec.checkpoint, spec.tokenizer, text)
        if found is None:
            continue
        shown, names = found
        listed = " ".join(names[:SHOWN]) + (" ..." if len(names) > SHOWN else "")
        parts.append(f'<div class="test-untrained" data-side="{side}" data-untrained="{len(names)}">'
                     + badge_html("UNTRAINED PIECES", f"Model {side}: {len(names)} piece(s) of this text never occur "
                                  f"in its run's training data, so their rows never trained and may sound like noise: "
                                  f"{listed}", "warn")
                     + f'<div class="test-untrained-text">{shown}</div></div>')
    return "".join(parts)
