"""Plain-data helpers shared by the tabs: DataFrames for gr.Dataframe / gr.BarPlot / gr.LinePlot, and badges.

Everything here takes and returns plain values (lists, dicts, DataFrames, strings), so the tabs' callbacks
stay testable without a browser and without Gradio.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

# Badge colours by tone: background, text.
_TONES: dict[str, tuple[str, str]] = {
    "ok": ("#1f8f4e", "#ffffff"),
    "warn": ("#c98a00", "#ffffff"),
    "error": ("#c0392b", "#ffffff"),
    "info": ("#5b6b7b", "#ffffff"),
}

# Verdict words the libraries use, mapped to a tone (unknown words read as "info").
VERDICT_TONES: dict[str, str] = {
    "clean": "ok",
    "ok": "ok",
    "pass": "ok",
    "passed": "ok",
    "complete": "ok",
    "warnings": "warn",
    "warning": "warn",
    "partial": "warn",
    "skipped": "info",
    "errors": "error",
    "error": "error",
    "problems": "error",
    "fail": "error",
    "failed": "error",
    "invalid": "error",
}


def tone_for(verdict: str) -> str:
    return VERDICT_TONES.get(str(verdict).strip().lower(), "info")


def badge_html(label: str, detail: str = "", tone: str | None = None) -> str:
    """A coloured verdict badge followed by a one-line detail, as HTML for gr.HTML."""
    tone = tone or tone_for(label)
    background, color = _TONES.get(tone, _TONES["info"])
    badge = (
        f'<span class="studio-badge studio-badge-{tone}" data-tone="{tone}" '
        f'style="background:{background};color:{color};padding:2px 10px;border-radius:6px;'
        f'font-weight:600;">{html.escape(label)}</span>'
    )
    text = f' <span class="studio-badge-detail">{html.escape(detail)}</span>' if detail else ""
    return f'<div class="studio-verdict">{badge}{text}</div>'


def message_html(message: str, tone: str = "error") -> str:
    """A one-line message (e.g. 'manifest not found: x.jsonl') styled like a verdict line."""
    label = {"ok": "OK", "warn": "WARNING", "error": "ERROR"}.get(tone, "INFO")
    return badge_html(label, message, tone)


def records_frame(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A DataFrame with exactly ``columns`` in that order (missing keys become empty); empty rows -> headers only."""
    data = [[_cell(row.get(column)) for column in columns] for row in rows]
    return pd.DataFrame(data, columns=list(columns))


def empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame([], columns=list(columns))


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}={item}" for key, item in value.items())
    return value


def _edge_label(edge: float) -> str:
    """Bin edges short enough for an axis label: 3 significant digits, thousands without exponent."""
    if abs(edge) >= 1000:
        return f"{edge:,.0f}"
    return f"{edge:.3g}"


def histogram_from_counts(edges: Sequence[float], counts: Sequence[float], *, unit: str = "",
                          x: str = "bin", y: str = "count") -> pd.DataFrame:
    """A histogram (``len(edges) == len(counts) + 1``) as ordered string bins for a gr.BarPlot (sort=None)."""
    if len(edges) != len(counts) + 1:
        raise ValueError(f"histogram needs one more edge than counts, got {len(edges)} edges, {len(counts)} counts")
    suffix = f" {unit}" if unit else ""
    labels = [f"{_edge_label(lo)}–{_edge_label(hi)}{suffix}" for lo, hi in itertools.pairwise(edges)]
    return pd.DataFrame({x: labels, y: [int(c) if float(c).is_integer() else float(c) for c in counts]})


def format_bytes(size: float | None) -> str:
    if size is None:
        return ""
    size = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def format_number(value: Any, digits: int = 4) -> str:
    """Floats to ``digits`` significant digits, everything else as text; None -> ''."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.{digits}g}"
    return str(value)


def key_value_frame(facts: Mapping[str, Any], *, key: str = "field", value: str = "value") -> pd.DataFrame:
    """A two-column table of facts, nested dicts flattened to dotted keys."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, item: Any) -> None:
        if isinstance(item, Mapping) and item:
            for sub_key, sub_value in item.items():
                walk(f"{prefix}.{sub_key}" if prefix else str(sub_key), sub_value)
        else:
            rows.append((prefix, format_number(_cell(item)) if not isinstance(item, str) else item))

    walk("", facts)
    return pd.DataFrame(rows, columns=[key, value])
