"""The Data tab's IndexTTS2 preparation: audio + transcripts -> features and a paired manifest, as a job.

The facts of the section (its form, model fields and command) for ``webui.data.prepare_section``, which lays it
out and runs ``python -m data_tools.prepare_v2`` under the studio's supervisor in
``<workspace>/jobs/prepare_v2/``; the Data tab finds it through the registry entry's ``ui`` facet
(``section``). The form starts filled from the session's IndexTTS2 project (its saved
manifest, its prepared folder, its model folder's files), else with the demo workspace's IndexTTS2 files when
they are there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from networks.generation_rule import ID_2
from webui.data import prepare_section
from webui.data.prepare_section import Field, PairedPrepareForm, PrepareSection

if TYPE_CHECKING:
    from trainer.project import Project

JOB = "prepare_v2"  # its folder under <workspace>/jobs/


@dataclass(frozen=True)
class PrepareForm(PairedPrepareForm):
    """IndexTTS2's form: the config and the semantic codec are required."""

    MODULE = "data_tools.prepare_v2"
    REQUIRED_FILES = (("--config", "config", "config"), ("--codec", "codec", "semantic codec"))
    OPTIONAL_FILES = (("--gpt", "gpt", "base GPT"), ("--w2v-stats", "w2v_stats", "w2v-BERT stats"),
                      ("--tokenizer", "tokenizer", "tokenizer"))


def default_form(workspace: Path, project: Project | None = None) -> PrepareForm:
    """The form filled from ``project`` when it is an IndexTTS2 project (``project_form``) over the demo's
    IndexTTS2 files when the workspace has them, else empty fields and the real w2v-BERT id."""
    return prepare_section.project_form(_base_form(workspace), project, ID_2, _project_codec)


def _project_codec(project: Project) -> dict[str, str]:
    from networks.indextts2 import HUB_FILES

    codec = project.model_path / HUB_FILES["semantic_codec"]
    return {"codec": str(codec) if codec.is_file() else ""}


def _base_form(workspace: Path) -> PrepareForm:
    from generations.indextts2.demo.build import DemoPaths

    demo = DemoPaths.under(workspace)
    if demo.kit.exists() and demo.config.is_file():
        return PrepareForm(input=str(demo.audio), out_dir=str(demo.root / "data" / "prepared"),
                           config=str(demo.config), gpt="", codec=str(demo.kit.codec),
                           w2v_bert=str(demo.kit.w2v_bert), w2v_stats="", tokenizer=str(demo.extended_tokenizer),
                           **prepare_section.DEFAULT_OPTIONS)
    return PrepareForm(input="", out_dir=str(Path(workspace) / "data" / "prepared_v2"), config="", gpt="",
                       codec="", w2v_bert=prepare_section.DEFAULT_W2V_BERT, w2v_stats="", tokenizer="",
                       **prepare_section.DEFAULT_OPTIONS)


SECTION = PrepareSection(
    generation="IndexTTS2", prefix="prep2", job=JOB,
    heading="### Prepare audio for IndexTTS2: w2v-BERT features, semantic codes, conditioning and pairs\n"
            "Writes `text_ids/`, `codes/`, `condition/`, `emo_vec/`, `utterances.jsonl` and `pairs.jsonl` "
            "(the community layout) into the output folder. Runs as its own process on the GPU when there "
            "is one; a rerun skips what is already done.",
    model_rows=(
        (prepare_section.CONFIG_FIELD, prepare_section.GPT_FIELD,
         Field("codec", "semantic codec (model.safetensors or .pth)", "codec")),
        (prepare_section.W2V_BERT_FIELD, prepare_section.W2V_STATS_FIELD,
         Field("tokenizer", "tokenizer (empty: the config's bpe_model)", "tokenizer")),
    ),
    default_form=default_form,
    generation_id=ID_2,
    project_extra=_project_codec,
)


def section() -> PrepareSection:
    """The section (the entry's ``ui.prepare_section``)."""
    return SECTION


# The job's controls (tests and scripts): validate and launch, the job as it stands, graceful stop (SIGINT).
start = SECTION.start
poll = SECTION.poll
stop = SECTION.stop
