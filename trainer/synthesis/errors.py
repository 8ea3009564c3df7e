"""The synthesis refusal: bad input (text, reference, files) said in one line; CLIs exit 2 on it."""

from __future__ import annotations

from trainer.errors import UsageError


class SynthesisError(UsageError):
    """Input synthesis cannot use; ``str(err)`` is one line saying what and where."""
