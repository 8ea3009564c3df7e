"""Where a paired generation's demo (IndexTTS2, IndexTTS-2.5) keeps its files under ``<workspace>/<folder>/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PairedDemoPaths:
    """The files every paired demo has; a generation's subclass adds its own and says when it can synthesise."""

    root: Path  # <workspace>/<folder>
    config: Path
    base_checkpoint: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    @staticmethod
    def common(root: Path) -> dict[str, Path]:
        """The shared fields' values for a demo at ``root`` (keyword arguments of the subclass)."""
        return {"root": root, "config": root / "checkpoints" / "config.yaml",
                "base_checkpoint": root / "checkpoints" / "gpt.pth", "train_manifest": root / "data" / "train_pairs.jsonl",
                "val_manifest": root / "data" / "val_pairs.jsonl", "output_dir": root / "runs" / "demo"}

    def synthesis_ready(self) -> bool:
        raise NotImplementedError

    def sample_args(self) -> tuple[str, ...]:
        """Samples at every save through the demo's own download folder, once it is a whole one."""
        return ("--sample-model-dir", str(self.config.parent)) if self.synthesis_ready() else ()
