"""What the studio shows of an S2Mel run's keep decision: the held-out voices scored GPT-only and GPT + S2Mel.

``python -m trainer.s2mel.evaluate`` writes ``s2mel_scores.json`` beside the run's checkpoints; :func:`scores_of`
reads it for a checkpoint (None when the run was not measured), :func:`scores_html` lays it out: one row per voice
(similarity and CER without and with the trained S2Mel), the means, health (whether an adapter changes anything), and
the decision with its reason (the line the export prints). The Test tab shows it under a picked S2Mel; any tab can (``gr.HTML(scores_html(path))``).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from trainer.evaluation.results import metric_text

SCORES_FILE = "s2mel_scores.json"  # trainer.s2mel.evaluate.SCORES_FILE (not imported: the UI stays light)


def scores_of(checkpoint: Path | None) -> dict[str, Any] | None:
    """The scores file beside an S2Mel checkpoint, when it is one the evaluation wrote."""
    if checkpoint is None:
        return None
    try:
        data = json.loads((Path(checkpoint).parent / SCORES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("without"), list) or not isinstance(data.get("with"), list):
        return None
    return data


def _number(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(number) else f"{number:.4f}"


def scores_html(checkpoint: Path | None) -> str:
    """A table of the held-out voices' scores and the keep decision ("" when not measured)."""
    data = scores_of(checkpoint)
    if data is None:
        return ""
    with_by_voice = {str(s.get("voice")): s for s in data["with"] if isinstance(s, dict)}
    rows = []
    for before in data["without"]:
        if not isinstance(before, dict):
            continue
        after = with_by_voice.get(str(before.get("voice")), {})
        rows.append("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>".format(
            html.escape(str(before.get("voice"))), _number(before.get("similarity")),
            _number(after.get("similarity")), metric_text("cer", before.get("cer")), metric_text("cer", after.get("cer"))))
    keep = bool(data.get("keep"))
    verdict = "kept" if keep else "left out"
    return ('<div class="s2mel-scores" data-keep="{keep}"><div>S2Mel measured at step {step} on held-out voices: '
            '<b>{verdict}</b></div><table><tr><th>voice</th><th>similarity GPT only</th><th>similarity GPT + '
            'S2Mel</th><th>CER GPT only</th><th>CER GPT + S2Mel</th></tr>{rows}</table>{health}<div>{reason}</div></div>'
            .format(keep=str(keep).lower(), step=html.escape(str(data.get("step"))), verdict=verdict,
                    rows="".join(rows), reason=html.escape(str(data.get("reason") or "")), health=_health_html(data)))


def _health_html(data: dict[str, Any]) -> str:
    """The health line of the scores file ("" when the evaluation recorded none)."""
    health = data.get("health")
    summary = health.get("summary") if isinstance(health, dict) else None
    if not isinstance(summary, str):
        return ""
    return f'<div class="s2mel-health" data-ok="{str(summary == "ok").lower()}">health: {html.escape(summary)}</div>'

