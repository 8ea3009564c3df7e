"""The pre-flight's token coverage line: how many of the rows a grown text vocabulary appends the training data
ever reaches.

A row that no training item's text ids hold never gets a gradient: it keeps its initial value and the model speaks
noise where a text needs it. The count is over the items the trainer itself loads (after its length limits), so
it holds for every generation's tokenizer: SentencePiece pieces and IndexTTS-2.5 merges alike. Which pieces they
are is the Tokenizer tab's verify (``training_coverage``); the Test tab marks them in a text before speaking it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CHECK = "token coverage"


def appended_rows_trained(items: Iterable[Any], base_size: int, total: int, spare_rows: int = 0) -> tuple[int, int]:
    """(appended rows some item's text ids hold, appended rows) of a vocabulary grown from ``base_size`` to
    ``total`` ids (``data_tools.tokenizer.coverage``, as the Test tab counts them)."""
    from data_tools.tokenizer.coverage import appended_ids, trained_appended

    appended = appended_ids(base_size, total, spare_rows)
    return len(trained_appended((item.text_ids.tolist() for item in items), appended)), len(appended)


def add_token_coverage(plan: Any) -> None:
    """A soft line when the run grows the text vocabulary (nothing otherwise): a warning when some appended rows
    never train."""
    start, train = plan.start, plan.train
    if start is None or train is None or start.base_vocab_size is None:
        return
    base_size, total = int(start.base_vocab_size), int(start.gpt_config["number_text_tokens"])
    if total <= base_size:
        return
    spare_rows = int(getattr(plan.tokenizer, "spare_text_rows", 0))  # IndexTTS-2.5: merges follow a spare row
    trained, appended = appended_rows_trained(train.items, base_size, total, spare_rows)
    message = f"{trained:,} of {appended:,} appended pieces occur in the {len(train.items):,} training items"
    if trained < appended:
        message += (f"; {appended - trained:,} never do: their rows will not train (the Tokenizer tab's verify with "
                    "this manifest lists them; the Test tab marks them in a text)")
    plan.add(CHECK, True, message, warning=trained < appended)
