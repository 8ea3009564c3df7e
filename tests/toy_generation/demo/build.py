"""The toy's demo: ``<workspace>/toy/``, a copy of the IndexTTS-1.5 demo's model and data with a toy config.

- ``toy/checkpoints/``: the 1.5 demo's base model folder (gpt.pth, bpe.model, dvae.pth, its BigVGAN), its
  config.yaml's gpt section marked as the toy's GPT (``toy_gpt_keys``);
- ``toy/data/``: the 1.5 demo's codes and prompt mels, its train and val manifests rewritten in the toy's own
  manifest format (``tests.toy_generation.data``: the same lines under other field names);
- the tokenizer is the workspace's Amharic-extended one (``tokenizers/amharic_extended.model``), not copied.

The 1.5 demo is built first (demos are built oldest generation first, and the toy is the newest).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from data_tools.config import save_config
from demo.data import demo_train_argv
from generations.demo_facts import DemoProject
from generations.indextts15.demo.build import DemoPaths as Demo15
from tests.toy_generation import TOY_FOLDER, toy_gpt_keys
from tests.toy_generation.data.manifest import convert_codes_manifest


@dataclass(frozen=True)
class ToyDemoPaths:
    root: Path
    config: Path
    base_checkpoint: Path
    extended_tokenizer: Path
    vocoder: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    @classmethod
    def under(cls, workspace: Path) -> ToyDemoPaths:
        source = Demo15.under(Path(workspace))
        root = Path(workspace) / TOY_FOLDER
        checkpoints, data = root / "checkpoints", root / "data"
        return cls(root=root, config=checkpoints / source.config.name,
                   base_checkpoint=checkpoints / source.base_checkpoint.name,
                   extended_tokenizer=source.extended_tokenizer, vocoder=checkpoints / source.vocoder.name,
                   train_manifest=data / source.train_manifest.name, val_manifest=data / source.val_manifest.name,
                   output_dir=root / "runs" / "demo")

    def exists(self) -> bool:
        return all(path.is_file() for path in (self.config, self.base_checkpoint, self.extended_tokenizer,
                                               self.vocoder, self.train_manifest, self.val_manifest))

    def train_argv(self, max_steps: int = 200) -> list[str]:
        return demo_train_argv(self.train_manifest, self.val_manifest, self.extended_tokenizer, self.config,
                               self.base_checkpoint, self.output_dir, max_steps, ("--vocoder", str(self.vocoder)))


def build_demo(workspace: Path) -> ToyDemoPaths:
    """Copy the IndexTTS-1.5 demo's model and data into ``workspace/toy``, mark its config as the toy's and write
    its manifests in the toy's format."""
    source = Demo15.under(Path(workspace))
    if not source.exists():
        raise FileNotFoundError(f"the toy demo is built from the IndexTTS-1.5 demo, which {workspace} lacks")
    toy = ToyDemoPaths.under(Path(workspace))
    shutil.copytree(source.config.parent, toy.config.parent, dirs_exist_ok=True)
    shutil.copytree(source.train_manifest.parent, toy.train_manifest.parent, dirs_exist_ok=True)
    convert_codes_manifest(source.train_manifest, toy.train_manifest)
    convert_codes_manifest(source.val_manifest, toy.val_manifest)
    config = yaml.safe_load(source.config.read_text(encoding="utf-8"))
    config["gpt"].update(toy_gpt_keys())
    save_config(config, toy.config)
    return toy


def ensure_demo(workspace: Path, sentences: list[str], n_val: int, seed: int, force: bool = False) -> ToyDemoPaths:
    """The toy demo, built when ``force`` or when any of its files is missing (its sentences are the 1.5 demo's)."""
    toy = ToyDemoPaths.under(Path(workspace))
    return build_demo(Path(workspace)) if force or not toy.exists() else toy


def paths(workspace: Path) -> ToyDemoPaths:
    return ToyDemoPaths.under(Path(workspace))


def project_files(demo: ToyDemoPaths) -> DemoProject:
    return DemoProject(model_dir=demo.config.parent, tokenizer=demo.extended_tokenizer, folder=demo.root,
                       prepared=(demo.train_manifest, demo.val_manifest))


def form_files(demo: ToyDemoPaths) -> dict[str, Path | None]:
    """The training form's files for the toy's demo preset."""
    return {"train_manifest": demo.train_manifest, "val_manifest": demo.val_manifest,
            "tokenizer": demo.extended_tokenizer, "config": demo.config, "base_checkpoint": demo.base_checkpoint,
            "output_dir": demo.output_dir, "vocoder": demo.vocoder}
