"""The headline of a benchmark: printed, and collected by ``bench/run_all.py`` for the README table.

A benchmark calls ``headline(...)`` once per number it exists for. When ``BENCH_RESULTS`` names a file
(``run_all.py`` sets it), the headline is appended there as one JSON line as well.
"""

from __future__ import annotations

import json
import os
from typing import Any

RESULTS_ENV = "BENCH_RESULTS"


def headline(bench: str, measure: str, value: float, unit: str, goal: str = "", met: bool | None = None,
             note: str = "") -> dict[str, Any]:
    """Print one result line and record it; ``met`` is None where the number has no goal."""
    row = {"bench": bench, "measure": measure, "value": value, "unit": unit, "goal": goal, "met": met,
           "note": note}
    verdict = "" if met is None else ("  [goal met]" if met else "  [goal NOT met]")
    goal_text = f"  (goal {goal})" if goal else ""
    print(f"RESULT {measure}: {value:.4g} {unit}{goal_text}{verdict}{'  ' + note if note else ''}", flush=True)
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
    return row
