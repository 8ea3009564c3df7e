"""The data checker's report: plain dataclasses the CLI prints and the web UI shows as tables."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HISTOGRAM_BINS = 20
SUMMARY_PROBLEMS_PER_CODE = 5


@dataclass
class Problem:
    severity: str  # "error" | "warning"
    code: str  # short and stable, e.g. "malformed-json", "file-missing", "val-leak-text"
    where: str  # "file:line", or "file" for whole-file problems, or "" for data-set-wide ones
    message: str


@dataclass
class Histogram:
    edges: list[float]  # len(counts) + 1 bin edges
    counts: list[int]


@dataclass
class NumberSummary:
    count: int = 0
    min: float | None = None
    median: float | None = None
    max: float | None = None
    mean: float | None = None
    total: float = 0.0
    histogram: Histogram | None = None

    @classmethod
    def of(cls, values: np.ndarray, bins: int = HISTOGRAM_BINS) -> NumberSummary:
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size == 0:
            return cls()
        low, high = float(values.min()), float(values.max())
        if high <= low:
            high = low + 1.0
        counts, edges = np.histogram(values, bins=bins, range=(low, high))
        return cls(
            count=int(values.size),
            min=float(values.min()),
            median=float(np.median(values)),
            max=float(values.max()),
            mean=float(values.mean()),
            total=float(values.sum()),
            histogram=Histogram(edges=[round(float(e), 4) for e in edges], counts=counts.tolist()),
        )


@dataclass
class SpeakerStat:
    speaker: str
    utterances: int
    hours: float
    share: float  # of this split's known hours (of utterances where no durations are known)


@dataclass
class UnknownChar:
    char: str
    codepoint: str  # "U+1234"
    count: int
    first_where: str


@dataclass
class SplitStats:
    name: str  # "train" | "val"
    manifests: list[str] = field(default_factory=list)
    lines: int = 0
    entries: int = 0
    hours: float = 0.0
    entries_without_duration: int = 0
    durations_s: NumberSummary = field(default_factory=NumberSummary)
    text_chars: NumberSummary = field(default_factory=NumberSummary)
    text_tokens: NumberSummary | None = None  # with a tokenizer
    codes_lengths: NumberSummary | None = None  # with file checks
    script_letters: dict[str, int] = field(default_factory=dict)
    script_shares: dict[str, float] = field(default_factory=dict)
    lines_by_script: dict[str, int] = field(default_factory=dict)  # dominant script per line; "none": no letters
    lines_not_expected_language: int = 0
    speaker_count: int = 0
    entries_without_speaker: int = 0
    largest_speaker_share: float | None = None
    speakers: list[SpeakerStat] = field(default_factory=list)
    tokens_total: int = 0
    unknown_tokens: int = 0
    unknown_rate: float | None = None
    text_scheme: str | None = None  # IndexTTS-2.5: the scheme the texts were tokenised with
    tokens_per_char: float | None = None  # IndexTTS-2.5: tokens per character of the raw texts (prefix excluded)
    unknown_chars: list[UnknownChar] = field(default_factory=list)
    duplicate_ids: int = 0
    duplicate_texts: int = 0
    duplicate_codes: int = 0


@dataclass
class DataReport:
    verdict: str  # "clean" | "warnings" | "errors"
    errors: list[Problem]
    warnings: list[Problem]
    problem_counts: dict[str, int]  # code -> every occurrence, also those not listed (lists are capped)
    train: SplitStats
    val: SplitStats | None
    leakage: dict[str, int]  # "ids" | "texts" | "codes" -> val entries that also occur in train
    settings: dict[str, Any]
    elapsed_s: float = 0.0
    lines_per_s: float = 0.0
    formats: dict[str, str] = field(default_factory=dict)  # manifest -> "v1.5" | "v2" | "unknown"
    # v2: {manifest, line, id, old, new, basis} per batch-padded target_code_len (data_tools.code_lengths)
    code_len_fixes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "clean" else 1

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["exit_code"] = self.exit_code
        return data

    def summary_text(self) -> str:
        return "\n".join(_summary_lines(self))


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _summary_row(label: str, s: NumberSummary | None, unit: str = "", digits: int = 1) -> str:
    if s is None or not s.count:
        return f"  {label}: -"
    return (f"  {label}: min {_fmt(s.min, digits)}{unit}  median {_fmt(s.median, digits)}{unit}  "
            f"max {_fmt(s.max, digits)}{unit}  ({s.count} known)")


def _split_lines(stats: SplitStats) -> list[str]:
    out = [f"{stats.name}: {stats.entries} entries in {stats.lines} lines, {stats.hours:.2f} h "
           f"({', '.join(stats.manifests)})"]
    out.append(_summary_row("duration", stats.durations_s, " s", 2))
    out.append(_summary_row("text length", stats.text_chars, " chars", 0))
    if stats.text_tokens is not None:
        out.append(_summary_row("text tokens", stats.text_tokens, "", 0))
    if stats.codes_lengths is not None:
        out.append(_summary_row("codes", stats.codes_lengths, "", 0))
    if stats.script_shares:
        shares = ", ".join(f"{name} {100 * share:.1f}%" for name, share in stats.script_shares.items())
        out.append(f"  scripts (letters): {shares}; lines by main script: "
                   + ", ".join(f"{k} {v}" for k, v in stats.lines_by_script.items()))
    if stats.lines_not_expected_language:
        out.append(f"  lines not in the expected language: {stats.lines_not_expected_language}")
    if stats.speaker_count:
        top = ", ".join(f"{s.speaker} {s.hours:.2f} h" for s in stats.speakers[:5])
        more = f" (+{stats.speaker_count - 5} more)" if stats.speaker_count > 5 else ""
        out.append(f"  speakers: {stats.speaker_count}, largest share {100 * (stats.largest_speaker_share or 0):.0f}%"
                   f": {top}{more}")
    if stats.tokens_per_char is not None:
        out.append(f"  tokens per character ('{stats.text_scheme}' scheme, language prefix excluded): "
                   f"{stats.tokens_per_char:.2f}")
    if stats.unknown_rate is not None and stats.text_scheme is None:
        chars = ", ".join(f"{u.char!r} x{u.count}" for u in stats.unknown_chars[:8])
        out.append(f"  unknown tokens: {stats.unknown_tokens} of {stats.tokens_total} "
                   f"({100 * stats.unknown_rate:.2f}%){': ' + chars if chars else ''}")
    if stats.duplicate_ids or stats.duplicate_texts or stats.duplicate_codes:
        out.append(f"  duplicates: {stats.duplicate_ids} ids, {stats.duplicate_texts} texts, "
                   f"{stats.duplicate_codes} codes")
    return out


def _summary_lines(report: DataReport) -> list[str]:
    out = _split_lines(report.train)
    if report.val is not None:
        out += _split_lines(report.val)
        utterances = (f", {report.leakage['utterances']} pairs reusing train target utterances"
                      if "utterances" in report.leakage else "")
        out.append(f"leakage train/val: {report.leakage.get('ids', 0)} ids, {report.leakage.get('texts', 0)} texts, "
                   f"{report.leakage.get('codes', 0)} codes{utterances}")
    if report.code_len_fixes:
        out.append(f"padded target_code_len: {len(report.code_len_fixes)} pairs can be corrected "
                   "(--fix-code-len writes <name>.codelen_fixed.jsonl beside each manifest)")
    for label, problems in (("errors", report.errors), ("warnings", report.warnings)):
        if not problems:
            continue
        by_code: dict[str, list[Problem]] = {}
        for problem in problems:
            by_code.setdefault(problem.code, []).append(problem)
        total = sum(report.problem_counts.get(code, len(items)) for code, items in by_code.items())
        out.append(f"{label} ({total}):")
        for code, items in by_code.items():
            count = report.problem_counts.get(code, len(items))
            out.append(f"  [{code}] x{count}")
            for problem in items[:SUMMARY_PROBLEMS_PER_CODE]:
                where = f"{problem.where}: " if problem.where else ""
                out.append(f"    {where}{problem.message}")
            if count > SUMMARY_PROBLEMS_PER_CODE:
                out.append(f"    ... and {count - SUMMARY_PROBLEMS_PER_CODE} more (all listed in --json)"
                           if count == len(items) else
                           f"    ... and {count - SUMMARY_PROBLEMS_PER_CODE} more")
    notes = []
    if report.settings.get("tokenizer") is None:
        notes.append("no --tokenizer: token counts and unknown characters not checked")
    if report.settings.get("config") is None:
        notes.append("no --config: lengths not checked against the model's limits")
    if not report.settings.get("check_files", True):
        notes.append("--no-file-checks: .npy / audio files not opened")
    out.extend(f"note: {note}" for note in notes)
    out.append(f"verdict: {report.verdict.upper()} ({report_count(report, 'error')} errors, "
               f"{report_count(report, 'warning')} warnings) in {report.elapsed_s:.1f} s")
    return out


def report_count(report: DataReport, severity: str) -> int:
    problems = report.errors if severity == "error" else report.warnings
    codes = {p.code for p in problems}
    return sum(report.problem_counts.get(code, 0) for code in codes)
