"""The one error of checkpoint evaluation: a one-line reason (exit 2 from the CLI)."""

from trainer.errors import UsageError


class EvaluationError(UsageError):
    """Evaluation cannot run as asked (a missing model, an eval set that does not fit, ...)."""
