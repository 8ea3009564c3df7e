"""The web UI's facet of a generation's entry: the Data-tab, Tokenizer-tab and Test-tab pieces it brings.

The hubs (``webui.data.tab_data``, ``webui.tokenizer.tab_tokenizer``, ``webui.testing.text_coverage``) lay out or
call these for every entry that has them, in the registry's order (oldest generation first), so a new generation
adds its own pieces in its folder (``generations/<name>/ui/``) and edits no hub. Each is named with ``lazy``: the
registry imports none of the web UI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UiFacts:
    """What the web UI shows for one generation beyond the shared tabs (None: nothing of that kind)."""

    prepare_section: Callable[[], Any] | None = None  # () -> its Data tab's PrepareSection (webui.data)
    tokenizer_panel: Callable[[], None] | None = None  # lays out its own panel inside the Tokenizer tab
    # (run options, tokenizer stamp, base vocabulary size, manifest stamps, text) -> (chunks, marked positions,
    # names) or None: how the Test tab marks the untrained text of its runs (None: the SentencePiece rule)
    coverage_marks: Callable[..., Any] | None = None
