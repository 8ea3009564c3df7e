"""The Tokenizer tab's IndexTTS-2.5 panel: one sample text measured under the three 2.5 text schemes.

``measure_schemes`` (no Gradio) gives the table: per scheme the tokens (language prefix excluded), the
characters, tokens per character, the longest input a model sees (prefix included: what ``max_text_tokens``
limits) and the text table's rows; the trainer's ``--text-scheme`` picks one of these rows.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from generations.indextts25.data.text_table import DEFAULT_SCHEME, TEXT_SCHEMES, TextTable
from generations.indextts25.data.tiktoken_table import TableError

SAMPLE_TEXT = "ሰላም ለዓለም። ኢትዮጵያ ውብ ሀገር ናት።"
COLUMNS = ["scheme", "tokens", "characters", "tokens per character", "ids with prefix", "text rows"]


@lru_cache(maxsize=4)
def _tokenizer(scheme: str) -> TextTable:
    return TextTable(scheme=scheme)


def measure_schemes(text: str, language: str = "am") -> tuple[pd.DataFrame, str]:
    """(the table, a one-line message) for ``text`` in ``language`` under every scheme."""
    rows = []
    language = (language or "am").strip() or "am"
    for scheme in TEXT_SCHEMES:
        try:
            tokenizer = _tokenizer(scheme)
        except TableError as exc:
            return pd.DataFrame(columns=COLUMNS), f"the 2.5 tokenizer cannot be loaded: {exc}"
        cost = tokenizer.measure([text], language)
        rows.append({"scheme": scheme + (" (default)" if scheme == DEFAULT_SCHEME else ""), "tokens": cost.tokens,
                     "characters": cost.chars, "tokens per character": round(cost.tokens_per_char, 2),
                     "ids with prefix": cost.longest, "text rows": tokenizer.number_text_tokens + 1})
    if not text.strip():
        return pd.DataFrame(rows, columns=COLUMNS), "type a sentence to measure it"
    return pd.DataFrame(rows, columns=COLUMNS), (f"language '{language}': the trainer's --text-scheme picks the "
                                                 "row; fewer tokens per character fit longer sentences in "
                                                 "max_text_tokens")


def build_panel() -> None:
    """The panel's components (inside the Tokenizer tab)."""
    import gradio as gr

    gr.Markdown("### IndexTTS-2.5: tokens per character of each text scheme")
    with gr.Row():
        text = gr.Textbox(value=SAMPLE_TEXT, label="Sample text for the IndexTTS-2.5 schemes", lines=2, elem_id="tok25-text", scale=4)
        language = gr.Textbox(value="am", label="Language code", elem_id="tok25-language", scale=0, min_width=120)
    table, message = measure_schemes(SAMPLE_TEXT, "am")
    note = gr.Markdown(value=message, elem_id="tok25-message")
    result = gr.Dataframe(value=table, interactive=False, label="Schemes", elem_id="tok25-table")
    gr.on([text.submit, text.change, language.submit], measure_schemes, inputs=[text, language],
          outputs=[result, note], trigger_mode="always_last", show_progress="hidden")
