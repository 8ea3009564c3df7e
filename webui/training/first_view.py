"""The Training tab's first view: the project's data and model as one read-only summary, with what to train and for
how long beside it; a "change" button opens the section that holds their fields (issue 40)."""

from __future__ import annotations

import html
from collections.abc import Sequence

SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("train_manifest", "Training data"), ("config", "Model"), ("base_checkpoint", "Starting weights"),
    ("tokenizer", "Tokenizer"), ("output_dir", "Run folder"),
)


def _shown(raw: object) -> str:
    """A field's value as the summary shows it: a multi-path field's lines joined, '' when empty."""
    if isinstance(raw, list | tuple):
        lines = [str(item).strip() for item in raw]
    else:
        lines = [line.strip() for line in str(raw or "").splitlines()]
    return " · ".join(line for line in lines if line)


def data_summary_html(raw_values: Sequence[object]) -> str:
    """The summary of the data and model fields (``SUMMARY_ROWS`` order, as the form holds them)."""
    rows = []
    for (name, title), raw in zip(SUMMARY_ROWS, raw_values):
        value = _shown(raw)
        shown = f"<code>{html.escape(value)}</code>" if value else '<span class="status-bad">not set</span>'
        rows.append(f'<div data-field="{name}"><b>{html.escape(title)}</b>: {shown}</div>')
    return '<div class="train-data-summary">' + "".join(rows) + "</div>"
