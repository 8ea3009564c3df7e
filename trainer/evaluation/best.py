"""``--best-by``: which checkpoint ``best.pth`` points at, and which few are pinned against rotation.

``val_loss`` (the default) leaves everything to the trainer (best.pth follows the validation loss, as
before). ``cer`` (lower is better) and ``sim`` (higher is better) follow the evaluation results, which
arrive after the save, from another process: so the evaluation moves ``best.pth`` itself when a result
makes a new best, with the store's atomic link replacement (a hard link made under a temp name and renamed over best.pth:
a crash leaves the old or the new link, never a missing or partial file; a hard link never dangles).

The ``keep_best`` best measured checkpoints are pinned: the trainer's rotation (``CheckpointManager``'s
``protect`` hook, :func:`rotation_guard`) does not delete them. Rotation and a best update each hold the
run's pin lock (``<run>/.eval_pins.lock``, flock), so rotation never reads the pins, then deletes a file
that a result arriving meanwhile has just made the best: either the result is written first and the file
is pinned, or the file is gone first and the result cannot pick it (only existing files are ranked).

The rule (``decide``), checkpoint by checkpoint in step order: the first measured checkpoint becomes the
best; a later one replaces the best only when the paired bootstrap 95 % interval of the difference
(new - best, same items on both sides: ``trainer.evaluation.stats``) lies wholly on the better side of zero
over at least ``MIN_PAIRED_ITEMS`` paired items, so a difference inside the scores' own spread never moves
best.pth. Below that minimum best.pth stays and says "too few items to tell": with one item the bootstrap has
nothing to resample (the interval is the point itself), and with two or three a single sentence decides. A checkpoint that breaks a limit never
becomes the best, whatever its number: its CER more than ``cer_limit`` (default 0.02, two points) above the
best so far's, or its SIM more than ``sim_limit`` (default 0.03) below the base model's. Nor does one whose
health disqualifies it (``trainer.evaluation.health``: runaway generation, an adapter that changes nothing); such a
checkpoint is not pinned against rotation either. Each decision
carries its reason in words ("best.pth -> step 4000: CER 8.1 % [7.2, 9.0] vs 9.4 % [8.5, 10.4], difference
-1.3 [-2.1, -0.5]"), written with the ``eval`` event. Results without per-item detail (older files) fall
back to comparing the numbers alone.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.health import disqualification
from trainer.evaluation.results import base_result_path, display_scale, read_result, results_by_step
from trainer.evaluation.stats import MIN_PAIRED_ITEMS, PairedComparison, compare

BEST_BY = ("val_loss", "cer", "sim")
PIN_LOCK = ".eval_pins.lock"
PIN_LOCK_TIMEOUT_S = 120.0
_POLL_S = 0.05

try:
    import fcntl
except ImportError:  # Windows: no flock; rotation and evaluation then rely on the order of their writes
    fcntl = None  # type: ignore[assignment]


def score_of(result: dict[str, Any], best_by: str) -> float | None:
    """The result's number for ``best_by``, oriented so that lower is better (None when missing)."""
    value = result.get(best_by)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if best_by == "cer" else -float(value)


def ranking(run_dir: Path, best_by: str) -> list[tuple[int, Path, float]]:
    """(step, checkpoint, value) of every measured model_step file that still exists, best first; ties: earlier."""
    from trainer.checkpoints.store import step_file_name

    ranked: list[tuple[float, int, Path, float]] = []
    for step, result in results_by_step(run_dir).items():
        path = Path(run_dir) / step_file_name(step)
        score = score_of(result, best_by)
        if score is not None and path.is_file() and disqualification(result) is None:
            ranked.append((score, step, path, float(result[best_by])))
    ranked.sort(key=lambda row: (row[0], row[1]))
    return [(step, path, value) for _score, step, path, value in ranked]


def pinned_names(run_dir: Path, best_by: str, keep_best: int) -> set[str]:
    """File names of the ``keep_best`` best measured checkpoints (none for ``val_loss``)."""
    if best_by == "val_loss" or keep_best <= 0:
        return set()
    names = {path.name for _step, path, _value in ranking(run_dir, best_by)[:keep_best]}
    current = current_best_file(run_dir)
    return names | ({current.name} if current is not None else set())


def current_best_file(run_dir: Path) -> Path | None:
    """The model_step file best.pth links (None when there is no best.pth or its step file is gone)."""
    from trainer.checkpoints.store import BEST, step_checkpoints

    best = Path(run_dir) / BEST
    if not best.is_file():
        return None
    for _step, path in step_checkpoints(run_dir):
        with contextlib.suppress(OSError):
            if os.path.samefile(best, path):
                return path
    return None


@contextlib.contextmanager
def pin_lock(run_dir: Path, timeout_s: float = PIN_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the run's pin lock (rotation and best updates take turns); EvaluationError after ``timeout_s``."""
    if fcntl is None:
        yield
        return
    fd = os.open(Path(run_dir) / PIN_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise EvaluationError(f"{Path(run_dir) / PIN_LOCK} stayed locked for {timeout_s:.0f} s") from None
                time.sleep(_POLL_S)  # the holder works for milliseconds (a listing, a rename)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def rotation_guard(run_dir: Path, best_by: str, keep_best: int) -> Callable[[], contextlib.AbstractContextManager]:
    """The ``protect`` hook of ``CheckpointManager``: rotation runs under the pin lock, sparing the pins."""

    @contextlib.contextmanager
    def guard() -> Iterator[set[str]]:
        with pin_lock(run_dir):
            yield pinned_names(run_dir, best_by, keep_best)

    return guard


@dataclass(frozen=True)
class BestRule:
    best_by: str
    cer_limit: float = 0.02  # CER no more than this above the best so far's (0.02: two points)
    sim_limit: float = 0.03  # SIM no more than this below the base model's


@dataclass(frozen=True)
class Decision:
    step: int
    becomes_best: bool
    reason: str
    best_step: int | None  # the best before this decision
    comparison: PairedComparison | None = None  # new - best on best_by (None: first, or no paired items)


def _metric(best_by: str) -> str:
    return "cer" if best_by == "cer" else "sim"


def _number(result: dict[str, Any] | None, metric: str) -> float | None:
    value = (result or {}).get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _scaled(metric: str) -> tuple[float, str, int]:
    """How a metric reads: CER/WER in percent points, SIM as a cosine (the one rule of ``results``)."""
    return display_scale(metric)


def comparison_text(comparison: PairedComparison) -> str:
    """``CER 8.1 % [7.2, 9.0] vs 9.4 % [8.5, 10.4], difference -1.3 [-2.1, -0.5]``."""
    scale, unit, digits = _scaled(comparison.metric)
    return (f"{comparison.metric.upper()} {comparison.new.text(scale, digits, unit)} vs "
            f"{comparison.old.text(scale, digits, unit)}, difference {comparison.difference.text(scale, digits)}")


def limit_breach(result: dict[str, Any], best: dict[str, Any] | None, base: dict[str, Any] | None,
                 rule: BestRule) -> str | None:
    """Which limit ``result`` breaks, in words; None when it breaks none."""
    cer, best_cer = _number(result, "cer"), _number(best, "cer")
    if cer is not None and best_cer is not None and cer - best_cer > rule.cer_limit + 1e-12:
        return (f"CER limit: {cer * 100:.1f} % is {(cer - best_cer) * 100:.1f} points above the best so far "
                f"({best_cer * 100:.1f} %; the limit is {rule.cer_limit * 100:.1f})")
    sim, base_sim = _number(result, "sim"), _number(base, "sim")
    if sim is not None and base_sim is not None and base_sim - sim > rule.sim_limit + 1e-12:
        return (f"SIM limit: {sim:.3f} is {base_sim - sim:.3f} below the base model's {base_sim:.3f} "
                f"(the limit is {rule.sim_limit:.3f})")
    return None


def decide(step: int, result: dict[str, Any], best_step: int | None, best: dict[str, Any] | None,
           base: dict[str, Any] | None, rule: BestRule) -> Decision:
    """Whether checkpoint ``step`` takes over from the best so far (see the module docstring), and why."""
    metric = _metric(rule.best_by)
    unhealthy = disqualification(result)
    if unhealthy is not None:
        kept = f"best.pth stays at step {best_step}" if best_step is not None else "no best.pth yet"
        return Decision(step, False, f"{kept}: step {step} is never best: {unhealthy} (health)", best_step)
    breach = limit_breach(result, best, base, rule)
    if breach is not None:
        kept = f"best.pth stays at step {best_step}" if best_step is not None else "no best.pth yet"
        return Decision(step, False, f"{kept}: step {step} breaks the {breach}", best_step)
    if best is None or best_step is None:
        value = _number(result, metric)
        shown = "-" if value is None else f"{value * _scaled(metric)[0]:.{_scaled(metric)[2]}f}{_scaled(metric)[1]}"
        return Decision(step, value is not None, f"best.pth -> step {step}: the first measured checkpoint "
                        f"({metric.upper()} {shown})", None)
    comparison = compare(result, best, metric)
    if comparison is None:  # no per-item detail on one side: the numbers alone
        new, old = _number(result, metric), _number(best, metric)
        better = new is not None and old is not None and (new < old if metric == "cer" else new > old)
        words = f"{metric.upper()} {new} vs {old} (no paired items: compared as numbers)"
        return Decision(step, better, (f"best.pth -> step {step}: " if better else
                                       f"best.pth stays at step {best_step}: step {step} ") + words, best_step)
    if comparison.items < MIN_PAIRED_ITEMS:
        return Decision(step, False, f"best.pth stays at step {best_step}: step {step} {comparison_text(comparison)} "
                        f"(too few items to tell: {comparison.items} paired, a difference counts over at least "
                        f"{MIN_PAIRED_ITEMS})", best_step, comparison)
    better = comparison.difference.high < 0 if metric == "cer" else comparison.difference.low > 0
    if better:
        return Decision(step, True, f"best.pth -> step {step}: {comparison_text(comparison)}", best_step, comparison)
    why = "worse" if comparison.excludes_zero else "inside the noise: the interval of the difference includes zero"
    return Decision(step, False, f"best.pth stays at step {best_step}: step {step} {comparison_text(comparison)} "
                    f"({why})", best_step, comparison)


def base_result(run_dir: Path, eval_set: str | None = None) -> dict[str, Any] | None:
    """The base model's result (of evaluation set ``eval_set`` when given)."""
    base = read_result(base_result_path(run_dir))
    if base is None or (eval_set is not None and base.get("eval_set") != eval_set):
        return None
    return base


def replay(run_dir: Path, rule: BestRule, extra: tuple[int, dict[str, Any]] | None = None) -> list[Decision]:
    """The rule applied to every measured checkpoint that still exists, in step order (``extra``: a result not
    yet written, decided last)."""
    from trainer.checkpoints.store import step_file_name

    results = {step: r for step, r in results_by_step(run_dir).items() if (Path(run_dir) / step_file_name(step)).is_file()}
    if extra is not None:
        results.pop(extra[0], None)
    order = sorted(results.items()) + ([extra] if extra is not None else [])
    decisions: list[Decision] = []
    best_step: int | None = None
    for step, result in order:
        if _number(result, _metric(rule.best_by)) is None:
            continue
        base = base_result(run_dir, result.get("eval_set"))
        best = results.get(best_step) if best_step is not None else None
        decision = decide(step, result, best_step, best, base, rule)
        decisions.append(decision)
        if decision.becomes_best:
            best_step = step
    return decisions


def best_of(decisions: list[Decision]) -> int | None:
    return next((d.step for d in reversed(decisions) if d.becomes_best), None)


def apply_best(run_dir: Path, rule: BestRule) -> tuple[tuple[int, float] | None, list[Decision]]:
    """Point best.pth at the checkpoint the rule picks (caller holds the pin lock): ((step, value) when best.pth
    was moved, else None; the decisions)."""
    from trainer.checkpoints.store import BEST, _replace_with_link, step_file_name

    if rule.best_by == "val_loss":
        return None, []
    decisions = replay(run_dir, rule)
    step = best_of(decisions)
    if step is None:
        return None, decisions
    path = Path(run_dir) / step_file_name(step)
    best = Path(run_dir) / BEST
    with contextlib.suppress(OSError):
        if os.path.samefile(best, path):
            return None, decisions
    _replace_with_link(path, best)
    value = _number(results_by_step(run_dir).get(step), _metric(rule.best_by))
    return (step, float(value if value is not None else math.nan)), decisions


def update_best(run_dir: Path, best_by: str, rule: BestRule | None = None) -> tuple[int, float] | None:
    """Point best.pth at the best measured checkpoint by the rule (caller holds the pin lock).

    Returns (step, value) when best.pth was moved, None when it already pointed there or nothing is measured.
    """
    return apply_best(run_dir, rule or BestRule(best_by))[0]


# -- the number best.pth follows, as the studio shows and changes it ---------------------------------------
CHOICE_FILE = "best_by.json"  # <run>/eval/best_by.json: a choice made after training (the Checkpoints tab)


def _choice_path(run_dir: Path) -> Path:
    from trainer.evaluation.eval_set import eval_dir

    return eval_dir(run_dir) / CHOICE_FILE


def followed(run_dir: Path) -> tuple[str, str]:
    """(best_by, where it comes from) of the run: a choice recorded after training when it is newer than the
    run's train_config.yaml (a resumed run's own --best-by wins again), else train_config.yaml's, else the
    default."""
    import json

    import yaml

    run_dir = Path(run_dir)
    config = run_dir / "train_config.yaml"
    choice = _choice_path(run_dir)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        recorded = json.loads(choice.read_text(encoding="utf-8")).get("best_by")
        if recorded in BEST_BY and (not config.is_file() or choice.stat().st_mtime >= config.stat().st_mtime):
            return str(recorded), "chosen after training"
    with contextlib.suppress(OSError, yaml.YAMLError, AttributeError):
        configured = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("best_by")
        if configured in BEST_BY:
            return str(configured), "the run's --best-by"
    return BEST_BY[0], "the default"


def record_choice(run_dir: Path, best_by: str) -> None:
    """Remember ``best_by`` for the run (what ``followed`` reports and the evaluation CLI then uses)."""
    import json

    from data_tools.fileio import atomic_write_text

    if best_by not in BEST_BY:
        raise EvaluationError(f"--best-by must be one of {', '.join(BEST_BY)}, got {best_by!r}")
    path = _choice_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"best_by": best_by, "time": round(time.time(), 3)}) + "\n")


def val_loss_best(run_dir: Path) -> int | None:
    """The step of the lowest validation loss (metrics.jsonl ``val`` events) whose model_step file still exists:
    the trainer's own rule, for pointing best.pth back at it after it followed CER or SIM."""
    import json

    from trainer.checkpoints.store import step_file_name

    best: tuple[float, int] | None = None
    with contextlib.suppress(OSError), open(Path(run_dir) / "metrics.jsonl", encoding="utf-8") as handle:
        for line in handle:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("event") != "val":
                continue
            loss, step = _number(event, "loss"), event.get("step")
            if loss is None or not isinstance(step, int) or not (Path(run_dir) / step_file_name(step)).is_file():
                continue
            if best is None or loss < best[0]:
                best = (loss, step)
    return best[1] if best is not None else None


def repoint_best(run_dir: Path, rule: BestRule) -> tuple[int | None, str]:
    """Point best.pth by ``rule`` now, with no measuring (caller holds the pin lock): (the step best.pth links,
    one line saying why)."""
    from trainer.checkpoints.store import BEST, _replace_with_link, step_file_name

    if rule.best_by == "val_loss":
        step = val_loss_best(run_dir)
        reason = (f"best.pth -> step {step}: the lowest validation loss" if step is not None
                  else "no validation loss recorded for a checkpoint that still exists: best.pth left as it is")
    else:
        decisions = replay(run_dir, rule)
        step = best_of(decisions)
        decision = next((d for d in reversed(decisions) if d.becomes_best), None)
        reason = decision.reason if decision is not None else (
            f"no checkpoint measured for {rule.best_by.upper()} yet: best.pth left as it is (Evaluate measures them)")
    if step is None:
        return None, reason
    path, best = Path(run_dir) / step_file_name(step), Path(run_dir) / BEST
    same = False
    with contextlib.suppress(OSError):
        same = os.path.samefile(best, path)
    if not same:
        _replace_with_link(path, best)
    return step, reason
