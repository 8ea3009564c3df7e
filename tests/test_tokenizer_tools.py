"""Tokenizer tools: train through the front-end, extend without moving base ids, verify that proves it.

A small English base (the stand-in for IndexTTS's bpe.model) is extended with pieces learned on the
Amharic slice, for a BPE and a unigram base; held-out lines of both languages check the promises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import sentencepiece as spm

from data_tools.text import normalize_text, script_repertoire
from data_tools.tokenizer import (
    ExtendReport,
    TokenizerToolError,
    extend_tokenizer,
    train_tokenizer,
    verify_tokenizer,
)
from data_tools.tokenizer.extend import unreachable_pieces
from data_tools.tokenizer.spm_model import (
    load_model_proto,
    same_piece,
    save_model_proto,
    surface_processor,
    surface_text,
)

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
BASE_VOCAB = 800
NEW_VOCAB = 1000


def _lines(name: str) -> list[str]:
    return [line for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Extended:
    model_type: str
    base: Path
    new: Path
    extended: Path
    report: ExtendReport

    def processors(self) -> tuple[spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
        return (spm.SentencePieceProcessor(model_file=str(self.base)),
                spm.SentencePieceProcessor(model_file=str(self.extended)))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokenizers")


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def extended(request: pytest.FixtureRequest, workdir: Path) -> Extended:
    model_type = request.param
    base = train_tokenizer([CORPUS / "english_train.txt"], workdir / f"en_{model_type}", BASE_VOCAB,
                           model_type, "en", num_threads=1)
    new = train_tokenizer([CORPUS / "amharic_train.txt"], workdir / f"am_{model_type}", NEW_VOCAB,
                          model_type, "am", num_threads=1)
    corpus_chars = sorted({ch for line in _lines("amharic_train.txt") for ch in normalize_text(line, "am")})
    out = workdir / f"am_ext_{model_type}.model"
    report = extend_tokenizer(base, new, out, None, extra_characters=corpus_chars)
    return Extended(model_type, base, new, out, report)


def test_base_pieces_ids_scores_and_types_are_identical(extended: Extended) -> None:
    base = load_model_proto(extended.base)
    ext = load_model_proto(extended.extended)
    assert len(ext.pieces) == extended.report.final_size > len(base.pieces)
    assert all(same_piece(a, b) for a, b in zip(base.pieces, ext.pieces[: len(base.pieces)]))
    assert ext.normalizer_spec == base.normalizer_spec
    strings = [p.piece for p in ext.pieces]
    assert len(strings) == len(set(strings)), "no piece may appear twice"


def test_heldout_amharic_has_no_unknowns_and_mostly_new_ids(extended: Extended) -> None:
    _, ext = extended.processors()
    ids = [i for line in _lines("amharic_heldout.txt") for i in ext.EncodeAsIds(normalize_text(line, "am"))]
    assert ext.unk_id() not in ids
    new_share = sum(i >= BASE_VOCAB for i in ids) / len(ids)
    assert new_share > 0.7, new_share


def test_heldout_english_encodes_to_exactly_the_base_ids(extended: Extended) -> None:
    base, ext = extended.processors()
    lines = [normalize_text(line, "en") for line in _lines("english_heldout.txt")]
    assert len(lines) == 100
    different = [line for line in lines if base.EncodeAsIds(line) != ext.EncodeAsIds(line)]
    assert different == []


def test_every_appended_piece_is_reachable(extended: Extended) -> None:
    ext_proto = load_model_proto(extended.extended)
    assert unreachable_pieces(ext_proto, BASE_VOCAB) == []
    # Word-initial pieces come out of the real model (dummy prefix and all) for their own word.
    _, ext = extended.processors()
    initial = [i for i in range(BASE_VOCAB, len(ext_proto.pieces)) if ext_proto.pieces[i].piece.startswith("▁")]
    assert initial
    assert all(ext.EncodeAsIds(surface_text(ext_proto.pieces[i].piece).strip()) == [i] for i in initial)
    # And the corpus itself exercises most of the learned (multi-character) pieces.
    used = {i for line in _lines("amharic_train.txt") for i in ext.EncodeAsIds(normalize_text(line, "am"))}
    learned = [i for i in range(BASE_VOCAB, len(ext_proto.pieces)) if len(ext_proto.pieces[i].piece) > 1]
    assert sum(i in used for i in learned) / len(learned) > 0.9


def test_every_ethiopic_character_is_a_piece(extended: Extended) -> None:
    _, ext = extended.processors()
    assert all(ext.PieceToId(ch) != ext.unk_id() for ch in script_repertoire("ethiopic"))


def test_pieces_of_base_characters_only_are_not_appended(extended: Extended) -> None:
    base_proto = load_model_proto(extended.base)
    ext_proto = load_model_proto(extended.extended)
    base_chars = {ch for p in base_proto.pieces if p.type == 1 for ch in p.piece}
    appended = [p.piece for p in ext_proto.pieces[BASE_VOCAB:]]
    assert all(set(piece) - base_chars for piece in appended)
    assert extended.report.skipped_existing > 0
    assert extended.report.skipped_base_characters > 0  # the Amharic UI text has Latin markup


def test_bpe_appended_scores_are_below_the_base(extended: Extended) -> None:
    if extended.model_type != "bpe":
        pytest.skip("score ordering only matters for BPE merges")
    ext_proto = load_model_proto(extended.extended)
    lowest = min(p.score for p in ext_proto.pieces[:BASE_VOCAB])
    scores = [p.score for p in ext_proto.pieces[BASE_VOCAB:]]
    assert max(scores) < lowest
    assert scores == sorted(scores, reverse=True)  # the new model's merge order is kept


def test_verify_passes_on_the_extension(extended: Extended) -> None:
    report = verify_tokenizer(extended.extended, extended.base, _lines("amharic_heldout.txt"),
                              _lines("english_heldout.txt"), language="am", base_language="en")
    assert report.ok, report.table()
    statuses = {c.name: c.status for c in report.checks}
    for name in ("sizes", "base_pieces_unchanged", "encoding_settings_unchanged", "reachability",
                 "new_language_unknown_rate", "base_language_identical"):
        assert statuses[name] == "pass", report.table()
    assert statuses["manifest_max_text_tokens"] == "skipped"
    assert statuses["ethiopic_coverage"] == "pass"
    data = json.loads(report.to_json())
    assert data["ok"] is True and data["failed"] == []


@pytest.mark.parametrize(("base_type", "new_type"), [("bpe", "unigram"), ("unigram", "bpe")])
def test_mixed_model_types_stay_reachable_and_base_identical(workdir: Path, base_type: str, new_type: str) -> None:
    base = train_tokenizer([CORPUS / "english_train.txt"], workdir / f"mix_en_{base_type}", BASE_VOCAB,
                           base_type, "en", num_threads=1)
    new = train_tokenizer([CORPUS / "amharic_train.txt"], workdir / f"mix_am_{new_type}", NEW_VOCAB,
                          new_type, "am", num_threads=1)
    out = workdir / f"mix_{base_type}_{new_type}.model"
    extend_tokenizer(base, new, out)
    report = verify_tokenizer(out, base, _lines("amharic_heldout.txt"), _lines("english_heldout.txt"),
                              language="am", base_language="en")
    assert report.ok, report.table()


def test_target_size_caps_the_vocabulary_and_keeps_reachability(workdir: Path) -> None:
    base = workdir / "en_bpe.model"
    new = workdir / "am_bpe.model"
    if not base.exists() or not new.exists():
        base = train_tokenizer([CORPUS / "english_train.txt"], workdir / "en_bpe", BASE_VOCAB, "bpe", "en")
        new = train_tokenizer([CORPUS / "amharic_train.txt"], workdir / "am_bpe", NEW_VOCAB, "bpe", "am")
    out = workdir / "am_target.model"
    report = extend_tokenizer(base, new, out, target_size=1300)
    proto = load_model_proto(out)
    assert len(proto.pieces) == 1300 and report.target_reached
    assert unreachable_pieces(proto, BASE_VOCAB) == []
    assert all(proto.pieces[i].piece in {p.piece for p in proto.pieces} for i in range(BASE_VOCAB))
    with pytest.raises(TokenizerToolError, match="single-character pieces"):
        extend_tokenizer(base, new, workdir / "too_small.model", target_size=BASE_VOCAB + 10)


def test_training_goes_through_the_front_end(workdir: Path) -> None:
    manifest = workdir / "am_manifest.jsonl"
    lines = _lines("amharic_train.txt")[:400] + ["ዋጋው 1,000,000 ብር ነው? 2025 ዓ.ም::"] * 20
    manifest.write_text("\n".join(json.dumps({"id": f"u{i}", "text": t, "language": "am"}, ensure_ascii=False)
                                  for i, t in enumerate(lines)) + "\n", encoding="utf-8")
    model = train_tokenizer([manifest], workdir / "from_manifest", 400, "bpe", None)
    pieces = [p.piece for p in load_model_proto(model).pieces]
    assert not any(ch in "0123456789?," for piece in pieces for ch in piece)
    assert any("ሚሊዮን" in piece for piece in pieces)
    assert "።" in pieces and "፧" in pieces


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "data_tools.tokenizer", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_cli_train_extend_verify(workdir: Path) -> None:
    out = workdir / "cli"
    run = _cli("train", "--input", CORPUS / "english_train.txt", "--out", out / "en", "--vocab-size", "600",
               "--language", "en")
    assert run.returncode == 0, run.stderr
    assert "trained bpe tokenizer: 600 pieces" in run.stdout
    run = _cli("train", "--input", CORPUS / "amharic_train.txt", "--out", out / "am", "--vocab-size", "900",
               "--language", "am")
    assert run.returncode == 0, run.stderr
    run = _cli("extend", "--base", out / "en.model", "--new", out / "am.model", "--out", out / "ext.model",
               "--corpus", CORPUS / "amharic_train.txt", "--language", "am", "--json", out / "extend.json")
    assert run.returncode == 0, run.stderr
    assert "ids 0-599 unchanged" in run.stdout
    assert json.loads((out / "extend.json").read_text())["base_size"] == 600
    run = _cli("verify", "--tokenizer", out / "ext.model", "--base", out / "en.model",
               "--samples-new", CORPUS / "amharic_heldout.txt", "--samples-base", CORPUS / "english_heldout.txt",
               "--language", "am", "--base-language", "en", "--json", "-")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["ok"] is True


def _tampered_copies(ext: Extended, workdir: Path) -> tuple[Path, Path]:
    """Two broken extensions: one with two base ids swapped, one whose longer pieces lost their merges."""
    proto = load_model_proto(ext.extended)
    moved = type(proto)()
    moved.CopyFrom(proto)
    a, b = moved.pieces[10], moved.pieces[11]
    (a.piece, a.score), (b.piece, b.score) = (b.piece, b.score), (a.piece, a.score)
    moved_path = save_model_proto(moved, workdir / f"moved_{ext.model_type}.model")

    unreachable = type(proto)()
    unreachable.CopyFrom(proto)
    if ext.model_type == "bpe":  # without the two-character merge steps, longer pieces cannot be built
        keep = [p for i, p in enumerate(proto.pieces) if i < BASE_VOCAB or len(p.piece) != 2]
        del unreachable.pieces[:]
        unreachable.pieces.extend(keep)
    else:  # a unigram piece scoring far below its characters always loses to them
        for piece in unreachable.pieces[BASE_VOCAB:]:
            if len(piece.piece) > 1:
                piece.score = -1e4
    unreachable_path = save_model_proto(unreachable, workdir / f"unreachable_{ext.model_type}.model")
    return moved_path, unreachable_path


def test_verify_fails_and_names_the_check_on_moved_base_ids(extended: Extended, workdir: Path) -> None:
    moved, _ = _tampered_copies(extended, workdir)
    run = _cli("verify", "--tokenizer", moved, "--base", extended.base,
               "--samples-base", CORPUS / "english_heldout.txt", "--base-language", "en")
    assert run.returncode == 1, run.stdout
    assert "base_pieces_unchanged" in run.stdout and "FAILED" in run.stdout
    assert "id 10:" in run.stdout


def test_verify_fails_and_names_the_check_on_unreachable_pieces(extended: Extended, workdir: Path) -> None:
    _, unreachable = _tampered_copies(extended, workdir)
    surface = surface_processor(load_model_proto(unreachable))
    assert surface.GetPieceSize() > BASE_VOCAB
    run = _cli("verify", "--tokenizer", unreachable, "--base", extended.base, "--json", "-")
    assert run.returncode == 1
    data = json.loads(run.stdout)
    assert data["failed"] == ["reachability"]
    check = next(c for c in data["checks"] if c["name"] == "reachability")
    assert check["value"]["unreachable"] > 0


def test_verify_skips_what_it_cannot_check(extended: Extended) -> None:
    report = verify_tokenizer(extended.extended, extended.base)
    skipped = {c.name: c.message for c in report.checks if c.status == "skipped"}
    assert set(skipped) >= {"new_language_unknown_rate", "base_language_identical", "manifest_max_text_tokens"}
    assert all(message.startswith("skipped (") for message in skipped.values())
    assert report.ok
    assert "skipped" in report.table()


def test_verify_checks_manifest_lengths(extended: Extended, workdir: Path) -> None:
    manifest = workdir / "lengths.jsonl"
    texts = ["ሰላም", "ሰላም ለዓለም " * 40]
    manifest.write_text("\n".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False)
                                  for i, t in enumerate(texts)) + "\n", encoding="utf-8")
    failing = verify_tokenizer(extended.extended, extended.base, manifest=manifest, max_text_tokens=20)
    check = failing.check("manifest_max_text_tokens")
    assert check.status == "fail" and f"{manifest}:2" in check.message
    assert not failing.ok
    passing = verify_tokenizer(extended.extended, extended.base, manifest=manifest, max_text_tokens=1000)
    assert passing.check("manifest_max_text_tokens").status == "pass"
    unknown_limit = verify_tokenizer(extended.extended, extended.base, manifest=manifest)
    assert unknown_limit.check("manifest_max_text_tokens").status == "skipped"


def test_verify_names_the_appended_pieces_and_letters_the_training_data_never_has(extended: Extended,
                                                                                  workdir: Path) -> None:
    """Rows the data never trains (issue 38): a two-sentence manifest leaves most appended pieces and letters
    unused, and the check says which; a manifest of the whole corpus plus every letter trains more of them."""
    from data_tools.text import script_letters

    small = workdir / "coverage-small.jsonl"
    small.write_text("\n".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False)
                               for i, t in enumerate(["ሰላም ለዓለም", "ሰላም"])) + "\n", encoding="utf-8")
    check = verify_tokenizer(extended.extended, extended.base, manifest=small).check("training_coverage")
    appended = check.value["appended"]
    assert check.status == "warn" and not check.hard and appended > 0
    assert 0 < check.value["trained"] < appended and check.value["untrained"] == appended - check.value["trained"]
    assert "ሰ" not in check.value["unseen_letters"] and "ቀ" in check.value["unseen_letters"]
    assert f"{check.value['trained']} of {appended} appended pieces occur in the 2 training texts" in check.message

    letters = script_letters("ethiopic")
    full = workdir / "coverage-full.jsonl"
    lines = [*_lines("amharic_heldout.txt"), " ".join(letters)]
    full.write_text("\n".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False)
                              for i, t in enumerate(lines)) + "\n", encoding="utf-8")
    wide = verify_tokenizer(extended.extended, extended.base, manifest=full).check("training_coverage")
    assert wide.value["trained"] > check.value["trained"] and wide.value["unseen_letters"] == ""
    assert verify_tokenizer(extended.extended, extended.base).check("training_coverage").status == "skipped"


def test_verify_reports_base_unknowns_as_improvements_not_changes(extended: Extended) -> None:
    report = verify_tokenizer(extended.extended, extended.base, samples_base=["PAGE ሰ 1"], base_language="en")
    check = report.check("base_language_identical")
    assert check.status == "pass" and check.value["improved_base_unknowns"] == 1


@pytest.mark.parametrize("args", [
    ("extend", "--base", "missing.model", "--new", "missing.model", "--out", "x.model"),
    ("train", "--input", "missing.txt", "--out", "x", "--vocab-size", "100"),
    ("verify", "--tokenizer", "missing.model", "--base", "missing.model"),
    ("train", "--vocab-size", "100"),
])
def test_cli_bad_input_is_one_error_line_and_exit_2(args: tuple[str, ...]) -> None:
    run = _cli(*args)
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_pieces_the_base_normaliser_rewrites_are_dropped(workdir: Path) -> None:
    """An NFKC base (SentencePiece's default, as upstream models may use) never sees "…" or "ﬁ":
    pieces with them would be dead rows, so the extension drops them and verify still passes."""
    lines = [normalize_text(line, "en") for line in _lines("english_train.txt")]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(workdir / "nfkc"),
                                   vocab_size=BASE_VOCAB, model_type="bpe", character_coverage=1.0, minloglevel=2)
    assert load_model_proto(workdir / "nfkc.model").normalizer_spec.name == "nmt_nfkc"
    corpus = workdir / "am_nfkc.txt"
    corpus.write_text("\n".join(_lines("amharic_train.txt") + ["ሰላም… ﬁ ｆｕｌｌ"] * 5) + "\n", encoding="utf-8")
    new = train_tokenizer([corpus], workdir / "am_nfkc", NEW_VOCAB, "bpe", "am")
    out = workdir / "nfkc_ext.model"
    report = extend_tokenizer(workdir / "nfkc.model", new, out, extra_characters="…ﬁｆ")
    assert {"…", "ﬁ", "ｆ"} <= set(report.dropped_unreachable)
    pieces = {p.piece for p in load_model_proto(out).pieces}
    assert not pieces & {"…", "ﬁ", "ｆ"}
    check = verify_tokenizer(out, workdir / "nfkc.model", _lines("amharic_heldout.txt"), _lines("english_heldout.txt"),
                             language="am", base_language="en")
    assert check.ok, check.table()
