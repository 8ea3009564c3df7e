"""What ``verify`` says about a checkpoint: each component's status, the verdict, what resuming would lose.

Verdicts: COMPLETE (exact resume possible), PARTIAL (weights usable, exact resume not), INVALID (not loadable,
or not a model); ``VerifyReport.exit_code`` is the CLI's (0, 1, 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.checkpoints.validate import ValidationReport

COMPLETE, PARTIAL, INVALID = "COMPLETE", "PARTIAL", "INVALID"
OK, MISSING, WRONG = "ok", "missing", "wrong"

COMPONENTS = ("model weights", "model config", "tokenizer record", "training counters", "optimizer",
              "scheduler", "grad scaler", "RNG", "sampler position", "content digest")

# What resuming loses when a component is missing or wrong.
COSTS = {
    "model config": "model config not recorded: resume cannot check --config against it",
    "tokenizer record": "tokenizer not recorded: resume cannot check --tokenizer against it",
    "training counters": "step/epoch unknown: the schedule and epoch count restart at 0",
    "optimizer": "optimizer state missing: AdamW moments restart from zero (optimizer, scheduler and grad "
                 "scaler are reset together)",
    "scheduler": "scheduler state missing: the learning-rate schedule cannot continue where it was",
    "grad scaler": "grad scaler state missing: the fp16 loss scale re-calibrates",
    "RNG": "RNG state missing: resume will not be bit-exact",
    "sampler position": "sampler state missing: the current epoch's data order cannot be reproduced",
}


@dataclass
class Component:
    name: str
    status: str  # ok | missing | wrong
    detail: str = ""


@dataclass
class VerifyReport:
    path: Path
    kind: str  # studio | community | bare | unknown | unloadable
    verdict: str
    reason: str = ""
    components: list[Component] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    usable_as: list[str] = field(default_factory=list)
    compatibility: ValidationReport | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def compatible(self) -> bool | None:
        return None if self.compatibility is None else self.compatibility.ok

    @property
    def exit_code(self) -> int:
        if self.verdict == INVALID or self.compatible is False:
            return 2
        return 0 if self.verdict == COMPLETE else 1

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "kind": self.kind, "verdict": self.verdict, "reason": self.reason,
            "components": [{"name": c.name, "status": c.status, "detail": c.detail} for c in self.components],
            "lost": list(self.lost), "usable_as": list(self.usable_as),
            "compatible": self.compatible,
            "compatibility": None if self.compatibility is None else self.compatibility.to_dict(),
            "exit_code": self.exit_code,
        }

    def lines(self, verbose: bool = False) -> list[str]:
        marks = {OK: "ok     ", MISSING: "MISSING", WRONG: "WRONG  "}
        out = [f"{self.path}: {self.kind} checkpoint"] if self.kind not in ("unloadable",) else [str(self.path)]
        for comp in self.components:
            detail = f"  {comp.detail}" if (comp.detail and (verbose or comp.status != OK)) else ""
            out.append(f"  {marks[comp.status]} {comp.name}{detail}")
        for cost in self.lost:
            out.append(f"  lost: {cost}")
        if self.usable_as:
            out.append(f"  usable as: {', '.join(self.usable_as)}")
        if self.compatibility is not None:
            if self.compatibility.ok:
                out.append("  compatible with the given --tokenizer/--config")
            for error in self.compatibility.errors:
                out.append(f"  INCOMPATIBLE: {error}")
            for warning in self.compatibility.warnings:
                out.append(f"  warning: {warning}")
            if verbose:
                out += [f"  {line}" for line in self.compatibility.info]
        verdict = f"verdict: {self.verdict}"
        if self.reason:
            verdict += f" ({self.reason})"
        out.append(verdict)
        return out
