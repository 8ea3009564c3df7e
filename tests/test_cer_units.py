"""CER and WER are stored as fractions and shown to people in percent, everywhere (issue 36): the console's score
line, the model card's table, the recogniser floor, the S2Mel keep decision; the stored ``cer`` stays a fraction."""

from __future__ import annotations

import json
from pathlib import Path

from trainer.evaluation.report import evaluation_lines
from trainer.evaluation.results import (
    append_event,
    event_fields,
    metric_text,
    result_path,
    scores_line,
    write_result,
)
from trainer.s2mel.keep import VoiceScore, decide_adapter

RESULT = {"step": 4, "checkpoint": "model_step4.pth", "model": "checkpoint", "cer": 0.077, "wer": 0.2, "sim": 0.8125,
          "eval_set": "set", "intervals": {"cer": {"value": 0.077, "low": 0.061, "high": 0.094},
                                           "sim": {"value": 0.8125, "low": 0.79, "high": 0.83}},
          "second": {"language": "en", "cer": 0.031, "wer": 0.1, "sim": 0.9}}


def test_metric_text_shows_rates_in_percent_and_similarity_as_a_cosine() -> None:
    assert metric_text("cer", 0.077) == "7.7 %" and metric_text("wer", 1.25) == "125.0 %"
    assert metric_text("sim", 0.8125) == "0.812" and metric_text("cer", None) == "-"


def test_the_console_score_line_is_in_percent() -> None:
    assert scores_line(RESULT) == "CER 7.7 % · WER 20.0 % · SIM 0.812 · en CER 3.1 %"


def test_the_model_card_table_is_in_percent_like_its_difference_column(tmp_path: Path) -> None:
    write_result(result_path(tmp_path / "model_step4.pth"), RESULT)
    table = [line for line in evaluation_lines(tmp_path, 4) if line.startswith("| ")]
    assert table[0].startswith("| model | step | CER % | CER 95 % CI | WER % | SIM |"), table[0]
    cells = [cell.strip() for cell in table[2].strip("|").split("|")]
    assert cells[2:8] == ["7.7", "[6.1, 9.4]", "20.0", "0.812", "[0.790, 0.830]", "-"], cells
    assert cells[8] == "3.1"  # the second language's CER


def test_stored_rates_stay_fractions(tmp_path: Path) -> None:
    record = append_event(tmp_path, 4, 0, **event_fields(RESULT))
    stored = json.loads((tmp_path / "metrics.jsonl").read_text(encoding="utf-8"))
    assert stored["cer"] == record["cer"] == 0.077 and stored["second"]["cer"] == 0.031


def test_the_s2mel_keep_reason_is_in_percent() -> None:
    decision = decide_adapter([VoiceScore("a", 0.8, 0.10)], [VoiceScore("a", 0.9, 0.12)], max_cer_increase=0.01)
    assert not decision.keep
    assert "CER 10.0 % -> 12.0 %" in decision.reason, decision.reason
    assert "CER rose by +2.0 points (allowed +1.0)" in decision.reason, decision.reason
    assert (decision.cer_without, decision.cer_with) == (0.10, 0.12)  # stored as fractions


def test_a_score_of_one_item_says_so_instead_of_a_zero_width_interval(tmp_path: Path) -> None:
    """Issue 40: "CER 17875.0 % [17875.0, 17875.0]" read as certainty; one item has no interval to show."""
    from trainer.evaluation.results import score_cell

    item = {"sentence": "s0", "voice": "v", "language": "am", "seed": 1, "cer_errors": 3, "cer_length": 10}
    one = {**RESULT, "language": "am", "cer": 0.3, "items": [item],
           "intervals": {"cer": {"value": 0.3, "low": 0.3, "high": 0.3}}}
    two = {**one, "items": [item, {**item, "sentence": "s1"}]}
    assert score_cell(one, "cer") == "30.0 % (one item)"
    assert score_cell(two, "cer") == "30.0 % [30.0, 30.0]" and score_cell(RESULT, "cer") == "7.7 % [6.1, 9.4]"
    write_result(result_path(tmp_path / "model_step4.pth"), one)
    table = [line for line in evaluation_lines(tmp_path, 4) if line.startswith("| ")]
    assert [cell.strip() for cell in table[2].strip("|").split("|")][3] == "one item"
