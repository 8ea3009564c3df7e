"""The Test tab marks text that uses pieces the picked model's run never trained (issue 38, token coverage)."""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
import torch
import yaml

from webui.testing import text_coverage
from webui.testing.model_spec import ModelSpec


def _run(tmp_path: Path, demo_workspace, texts: list[str]) -> tuple[Path, int]:
    """A run folder whose training manifest holds ``texts``, with a checkpoint that records the base size."""
    run = tmp_path / "runs" / "amharic"
    run.mkdir(parents=True)
    manifest = tmp_path / "train.jsonl"
    manifest.write_text("".join(json.dumps({"id": str(i), "text": t, "language": "am"}, ensure_ascii=False) + "\n"
                                for i, t in enumerate(texts)), encoding="utf-8")
    (run / "train_config.yaml").write_text(yaml.safe_dump({"train_manifest": [f"{manifest}::am"]}), encoding="utf-8")
    base_size = spm.SentencePieceProcessor(model_file=str(demo_workspace.base_tokenizer)).vocab_size()
    torch.save({"base_vocab_size": base_size, "step": 2}, run / "model_step2.pth")
    return run / "model_step2.pth", base_size


def test_pieces_the_run_never_trained_are_marked_and_trained_text_is_not(demo_workspace, tmp_path: Path) -> None:
    tokenizer = demo_workspace.extended_tokenizer
    trained_text, new_word = "ሰላም", "ኢትዮጵያ"
    checkpoint, base_size = _run(tmp_path, demo_workspace, [trained_text])
    model = spm.SentencePieceProcessor(model_file=str(tokenizer))
    appended_in_new = [p for p in model.EncodeAsIds(new_word) if p >= base_size]
    assert appended_in_new, "the word must need appended pieces for this test to mean anything"

    assert text_coverage.untrained_marks(checkpoint, tokenizer, trained_text) is None
    shown, names = text_coverage.untrained_marks(checkpoint, tokenizer, f"{trained_text} {new_word}")
    untrained_ids = {p for p in appended_in_new if p not in set(model.EncodeAsIds(trained_text))}
    assert len(names) == len([p for p in model.EncodeAsIds(f"{trained_text} {new_word}") if p in untrained_ids])
    assert "<mark>" in shown and all(f"<mark>{name}" in shown.replace("<mark> ", "<mark>") for name in names)

    # Trained on the word too: nothing left to mark.
    retrained, _ = _run(tmp_path / "second", demo_workspace, [trained_text, new_word])
    assert text_coverage.untrained_marks(retrained, tokenizer, f"{trained_text} {new_word}") is None


def test_the_test_tab_line_names_the_side_and_stays_quiet_without_a_run(demo_workspace, tmp_path: Path,
                                                                         monkeypatch) -> None:
    checkpoint, _ = _run(tmp_path, demo_workspace, ["ሰላም"])

    def resolve(key: str, workspace: Path, vocoder: str | None) -> ModelSpec:
        return ModelSpec(label=key, checkpoint=Path(key), config=demo_workspace.config,
                         tokenizer=demo_workspace.extended_tokenizer, vocoder=None, version="1.5")

    monkeypatch.setattr(text_coverage, "resolve_model", resolve)
    line = text_coverage.coverage_html(demo_workspace.root, {"A": str(demo_workspace.base_checkpoint),
                                                              "B": str(checkpoint)}, None, "ሰላም ኢትዮጵያ")
    assert 'data-side="B"' in line and 'data-side="A"' not in line and "UNTRAINED PIECES" in line
    assert text_coverage.coverage_html(demo_workspace.root, {"A": None, "B": str(checkpoint)}, None, "ሰላም") == ""


def test_the_test_tab_reads_the_text_again_whenever_it_or_a_model_changes(demo_workspace) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.testing import tab_testing

    with gr.Blocks() as blocks:
        tab_testing.build(StudioContext.create(demo_workspace.root))
    by_id = {block._id: block for block in blocks.blocks.values()}
    marks = next(b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "test-text-coverage")
    triggers = {(by_id[t[0]].elem_id, t[1]) for dep in blocks.fns.values()
                if marks._id in {o._id for o in dep.outputs} for t in dep.targets}
    assert {("test-text", "change"), ("test-model-a", "change"), ("test-model-b", "change")} <= triggers
