"""Paired bootstrap intervals of evaluation scores: how sure a difference between two models is.

An evaluation measures items (text x reference voice x seed). Two results of the same evaluation set are
paired item by item (the same key on both sides), and the bootstrap resamples item indices with
replacement, the same indices on both sides, so what the items share (a hard sentence, a difficult voice)
cancels in the difference. Each resample recomputes the statistic as the evaluation reports it: CER and WER
as corpus rates (errors summed over characters or words summed), SIM as the mean cosine. The interval is
the percentile interval (2.5 % and 97.5 % by default). The RNG has a fixed seed: the same results give the
same intervals, every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

METRICS = ("cer", "wer", "sim")
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 20240229
LEVEL = 0.95
# The fewest paired items (sentence x voice x seed) over which a difference can move best.pth. With 1 item the
# bootstrap has one resample, with 2 or 3 only 3 or 10 distinct ones, and an interval clear of zero says little;
# 6 give 462, each item at most a sixth of the difference. The default set has 8 sentences x 1 voice x 3 seeds.
MIN_PAIRED_ITEMS = 6


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def text(self, scale: float = 1.0, digits: int = 1, unit: str = "") -> str:
        """``8.1 % [7.2, 9.0]`` (scale 100, unit ' %')."""
        return (f"{self.value * scale:.{digits}f}{unit} [{self.low * scale:.{digits}f}, "
                f"{self.high * scale:.{digits}f}]")

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class PairedComparison:
    """``new`` and ``old`` on the items both measured, and ``new - old`` with its interval."""

    metric: str
    new: Interval
    old: Interval
    difference: Interval
    items: int

    @property
    def excludes_zero(self) -> bool:
        return self.difference.low > 0 or self.difference.high < 0

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "items": self.items, "new": self.new.to_dict(), "old": self.old.to_dict(),
                "difference": self.difference.to_dict()}


def item_key(item: dict[str, Any]) -> tuple[Any, ...]:
    """What pairs an item across two results: its sentence, voice, language and seed."""
    return (item.get("sentence"), item.get("voice"), item.get("language"), item.get("seed"))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def item_counts(item: dict[str, Any], metric: str) -> tuple[float, float] | None:
    """(numerator, denominator) of one item for ``metric``: CER/WER errors and reference length (an old result
    without counts: the item's rate over 1), SIM the cosine over 1; None when the item has no such score."""
    if metric in ("cer", "wer"):
        errors, length = item.get(f"{metric}_errors"), item.get(f"{metric}_length")
        if _finite(errors) and _finite(length) and length > 0:
            return float(errors), float(length)
    value = item.get(metric)
    return (float(value), 1.0) if _finite(value) else None


def main_items(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of the evaluation set's main language (the second language's are scored apart)."""
    language = result.get("language")
    return [i for i in result.get("items") or [] if isinstance(i, dict) and i.get("language") == language]


def paired_arrays(new: dict[str, Any], old: dict[str, Any], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2) arrays of (numerator, denominator) for new and old, over the items both results scored."""
    old_by_key = {item_key(i): i for i in main_items(old)}
    rows_new, rows_old = [], []
    for item in main_items(new):
        other = old_by_key.get(item_key(item))
        if other is None:
            continue
        a, b = item_counts(item, metric), item_counts(other, metric)
        if a is not None and b is not None:
            rows_new.append(a)
            rows_old.append(b)
    return np.asarray(rows_new, dtype=np.float64).reshape(-1, 2), np.asarray(rows_old, dtype=np.float64).reshape(-1, 2)


def _rates(num_new: np.ndarray, den_new: np.ndarray, num_old: np.ndarray, den_old: np.ndarray, axis: int = -1
           ) -> np.ndarray:
    """New rate, old rate and their difference (scipy calls it on stacked resamples)."""
    new = num_new.sum(axis) / np.maximum(den_new.sum(axis), 1e-12)
    old = num_old.sum(axis) / np.maximum(den_old.sum(axis), 1e-12)
    return np.stack([new, old, new - old])


def compare_rows(new: np.ndarray, old: np.ndarray, metric: str = "cer", draws: int = BOOTSTRAP_DRAWS,
                 seed: int = BOOTSTRAP_SEED, level: float = LEVEL) -> PairedComparison | None:
    """The paired comparison of (numerator, denominator) rows (scipy's paired percentile bootstrap); None
    without items."""
    from scipy.stats import bootstrap

    n = len(new)
    if n == 0 or len(old) != n:
        return None
    data = (new[:, 0], new[:, 1], old[:, 0], old[:, 1])
    values = _rates(*data)
    if n == 1:  # one item: nothing to resample
        low = high = values
    else:
        found = bootstrap(data, _rates, paired=True, vectorized=True, method="percentile", n_resamples=draws,
                          confidence_level=level, random_state=np.random.default_rng(seed))
        # All resamples equal (every item the same): scipy's interval is nan; the value itself is the interval.
        low = np.where(np.isfinite(found.confidence_interval.low), found.confidence_interval.low, values)
        high = np.where(np.isfinite(found.confidence_interval.high), found.confidence_interval.high, values)
    new_i, old_i, diff_i = (Interval(float(values[k]), float(low[k]), float(high[k])) for k in range(3))
    return PairedComparison(metric, new_i, old_i, diff_i, n)


def compare(new: dict[str, Any], old: dict[str, Any], metric: str, draws: int = BOOTSTRAP_DRAWS,
            seed: int = BOOTSTRAP_SEED, level: float = LEVEL) -> PairedComparison | None:
    """Paired bootstrap of two results of the same evaluation set on ``metric``; None when they share no item."""
    rows_new, rows_old = paired_arrays(new, old, metric)
    return compare_rows(rows_new, rows_old, metric, draws, seed, level)


def interval_of(result: dict[str, Any], metric: str, draws: int = BOOTSTRAP_DRAWS, seed: int = BOOTSTRAP_SEED,
                level: float = LEVEL) -> Interval | None:
    """One result's ``metric`` with its bootstrap interval over its items; None without items."""
    rows = np.asarray([c for c in (item_counts(i, metric) for i in main_items(result)) if c is not None],
                      dtype=np.float64).reshape(-1, 2)
    comparison = compare_rows(rows, rows, metric, draws, seed, level)
    return comparison.new if comparison is not None else None


def preference_rate(wins: int, losses: int, ties: int, level: float = LEVEL) -> Interval | None:
    """The share of A/B choices for the first model, ties counting half, with a Wilson score interval
    (good for small counts); None without choices."""
    n = wins + losses + ties
    if n == 0:
        return None
    p = (wins + 0.5 * ties) / n
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2.0))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))
