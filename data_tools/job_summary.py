"""The one machine-readable line a data CLI prints when it ends, so a job's badge says what the job did.

    job-summary: {"done": 7, "noun": "prepared", "left_out": {"too long": 3}}

The preparation CLIs (``data_tools.preprocess``, ``prepare_v2``, ``prepare_v25``) print it last on stdout; the
studio reads the last such line of a job's log (``webui.jobs.job_view``) and shows "7 prepared, 3 left out (too long)"
in the badge, not only in the log. ``left_out`` counts the skipped items by the first part of their reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

PREFIX = "job-summary: "


@dataclass(frozen=True)
class JobSummary:
    done: int
    noun: str = "prepared"
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> items

    @property
    def left_out_total(self) -> int:
        return sum(self.left_out.values())

    def text(self) -> str:
        """``7 prepared, 3 left out (too long)``; several reasons are counted: ``(too long 2, silent audio 1)``."""
        shown = f"{self.done} {self.noun}"
        if not self.left_out_total:
            return shown + ", none left out"
        reasons = sorted(self.left_out.items(), key=lambda kv: (-kv[1], kv[0]))
        why = reasons[0][0] if len(reasons) == 1 else ", ".join(f"{reason} {count}" for reason, count in reasons)
        return f"{shown}, {self.left_out_total} left out ({why})"

    def line(self) -> str:
        return PREFIX + json.dumps({"done": self.done, "noun": self.noun, "left_out": self.left_out},
                                   ensure_ascii=False)


def summary_line(done: int, left_out: Mapping[str, int], noun: str = "prepared") -> str:
    return JobSummary(int(done), noun, {str(k): int(v) for k, v in left_out.items() if v}).line()


def last_summary(log: str) -> JobSummary | None:
    """The last well-formed summary line of a log (None when there is none)."""
    for line in reversed(log.splitlines()):
        if not line.startswith(PREFIX):
            continue
        try:
            data = json.loads(line[len(PREFIX):])
            left_out = {str(k): int(v) for k, v in dict(data.get("left_out") or {}).items()}
            return JobSummary(int(data["done"]), str(data.get("noun") or "prepared"), left_out)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return None
