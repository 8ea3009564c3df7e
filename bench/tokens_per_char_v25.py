"""IndexTTS-2.5 text cost of Amharic: tokens per character for the bytes, merges and translit schemes.

    .venv/bin/python bench/tokens_per_char_v25.py [--corpus FILE] [--merges 500 1000 2000 4000] [--heldout-every 10]

The corpus (default: ``../shared/corpora/amharic_libreoffice_ui.txt``, else the demo's Amharic corpus) is
split by line number: every ``--heldout-every``-th line is held out. Side by side, through the one front-end
(``generations.indextts25.data.text_table``: studio normalisation, scheme, inference's character map, ``<|am|>``):

- ``bytes``: the stock 2.5 table (Amharic as UTF-8 bytes);
- ``merges``: Ethiopic merges learned on the other lines (for each ``--merges`` size), counted on the held-out
  lines; and the committed default merges file (``tokenizers/indextts25/ethiopic_merges_am.json``) on the
  whole corpus (which it was learned from);
- ``translit``: the reversible Latin transliteration with the stock table.

Tokens exclude the ``<|am|>`` prefix; characters are those of the corpus lines as written. The English corpus
beside it is encoded with the stock table and with the merges: the ids must be identical (they are printed).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import headline
from data_tools.text import language_normalize
from generations.indextts25.data.ethiopic_merges import learn_merges, save_merges
from generations.indextts25.data.text_table import DEFAULT_MERGES, DEFAULT_TABLE, TextTable
from generations.indextts25.data.tiktoken_table import TiktokenTable

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "corpora" / "amharic_libreoffice_ui.txt"
DEMO_CORPUS = REPO / "demo" / "assets" / "amharic_corpus.txt"


def read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SHARED_CORPUS if SHARED_CORPUS.is_file() else DEMO_CORPUS)
    parser.add_argument("--english", type=Path, default=SHARED_CORPUS.parent / "english_libreoffice_ui.txt")
    parser.add_argument("--merges", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--heldout-every", type=int, default=10)
    args = parser.parse_args()

    lines = read_lines(args.corpus)
    heldout = lines[::args.heldout_every]
    training = [line for i, line in enumerate(lines) if i % args.heldout_every]
    print(f"corpus {args.corpus} : {len(lines)} lines, {sum(map(len, lines)):,} characters; "
          f"held out {len(heldout)} lines")

    rows: list[tuple[str, str, float]] = []
    bytes_scheme = TextTable(DEFAULT_TABLE, "bytes")
    translit = TextTable(DEFAULT_TABLE, "translit")
    for name, texts in (("all", lines), ("held-out", heldout)):
        rows.append(("bytes", name, bytes_scheme.tokens_per_char(texts)))
        rows.append(("translit", name, translit.tokens_per_char(texts)))

    base = TiktokenTable.load(DEFAULT_TABLE)
    start = time.perf_counter()
    learned = learn_merges(base, [language_normalize(line, "am") for line in training], max(args.merges))
    learn_s = time.perf_counter() - start
    by_size: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="tpc25-") as tmp:
        for size in sorted(args.merges):
            path = Path(tmp) / f"merges_{size}.json"
            learned_prefix = type(learned)(learned.tokens[:size], learned.base_sha256, learned.counts[:size])
            save_merges(learned_prefix, base, path)
            scheme = TextTable(DEFAULT_TABLE, "merges", path)
            by_size[size] = scheme.tokens_per_char(heldout)
            rows.append((f"merges {len(learned_prefix.tokens)} (learned on the rest)", "held-out", by_size[size]))
            if size == max(args.merges):
                english_same = _english_unchanged(args.english, bytes_scheme, scheme)
    default = TextTable(DEFAULT_TABLE, "merges", DEFAULT_MERGES)
    rows.append((f"merges {default.added_tokens} (committed default)", "all", default.tokens_per_char(lines)))

    width = max(len(row[0]) for row in rows)
    print(f"{'scheme'.ljust(width)}  lines     tokens/char")
    for scheme_name, subset, value in rows:
        print(f"{scheme_name.ljust(width)}  {subset.ljust(8)}  {value:.3f}")
    print(f"learning {max(args.merges)} merges on {len(training)} lines took {learn_s:.1f} s; "
          f"English ids unchanged with merges: {english_same}")

    held = {name: value for name, subset, value in rows if subset == "held-out"}
    bytes_tpc, translit_tpc = held["bytes"], held["translit"]
    merges_size = 2000 if 2000 in by_size else max(by_size)
    merges_tpc = by_size[merges_size]
    best = min((("bytes", bytes_tpc), ("merges", merges_tpc), ("translit", translit_tpc)), key=lambda kv: kv[1])
    note = f"held-out {len(heldout)} lines of {args.corpus.name}"
    headline("tokens_per_char_v25", "Amharic tokens/char, bytes (stock 2.5 table)", bytes_tpc, "tok/char", note=note)
    headline("tokens_per_char_v25", f"Amharic tokens/char, {merges_size} Ethiopic merges", merges_tpc, "tok/char",
             note=note)
    headline("tokens_per_char_v25", "Amharic tokens/char, Latin transliteration", translit_tpc, "tok/char",
             note=note)
    headline("tokens_per_char_v25", "bytes / best scheme", bytes_tpc / best[1], "x", note=f"best: {best[0]}")
    return 0 if english_same else 1


def _english_unchanged(path: Path, stock: TextTable, extended: TextTable) -> bool | str:
    if not path.is_file():
        return "not checked (no English corpus)"
    return all(stock.encode(line, "en") == extended.encode(line, "en") for line in read_lines(path))


if __name__ == "__main__":
    raise SystemExit(main())
