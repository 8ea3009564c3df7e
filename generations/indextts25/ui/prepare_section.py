"""The Data tab's IndexTTS-2.5 preparation: audio + transcripts -> 25 Hz codes, CAM++ / emotion vectors, text
ids and a 2.5 paired manifest, as a job.

The facts of the section (its form, model fields and command) for ``webui.data.prepare_section``, which lays it
out and runs ``python -m data_tools.prepare_v25`` under the studio's supervisor in
``<workspace>/jobs/prepare_v25/``; the Data tab finds it through the registry entry's ``ui`` facet
(``section``). The form starts filled from the session's IndexTTS-2.5 project (its saved
manifest, its prepared folder, its model folder's config and local w2v-BERT), else from the demo's 2.5 folder
when the workspace has one; empty model fields mean the files beside the config.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from networks.generation_rule import ID_25
from webui.data import prepare_section
from webui.data.prepare_section import Field, PairedPrepareForm, PrepareSection
from webui.form_inputs import InputProblem

if TYPE_CHECKING:
    from trainer.project import Project

JOB = "prepare_v25"  # its folder under <workspace>/jobs/
TEXT_SCHEMES = ("merges", "bytes", "translit")


@dataclass(frozen=True)
class PrepareForm(PairedPrepareForm):
    """IndexTTS-2.5's form: only the config is required (the rest defaults to its download folder's files);
    the language is required and the text scheme is the 2.5 text table's."""

    MODULE = "data_tools.prepare_v25"
    REQUIRED_FILES = (("--config", "config", "IndexTTS-2.5 config"),)
    OPTIONAL_FILES = (("--gpt", "gpt", "base GPT"), ("--codec", "codec", "2.5 codec"),
                      ("--campplus", "campplus", "CAM++ weights"), ("--w2v-stats", "w2v_stats", "w2v-BERT stats"),
                      ("--tokenizer", "tokenizer", "2.5 text table"))

    campplus: str = ""
    text_scheme: str = "merges"

    def generation_args(self) -> list[str]:
        if self.text_scheme not in TEXT_SCHEMES:
            raise InputProblem(f"text scheme must be one of {', '.join(TEXT_SCHEMES)}")
        if not self.language or self.language == prepare_section.NO_LANGUAGE:
            raise InputProblem("IndexTTS-2.5 needs the language (it sets the text prefix and the language row)")
        return ["--text-scheme", self.text_scheme, "--language", self.language]


def default_form(workspace: Path, project: Project | None = None) -> PrepareForm:
    """The form filled from ``project`` when it is an IndexTTS-2.5 project (``project_form``) over the demo's
    2.5 folder (its config, its local w2v-BERT, the demo audio) when the workspace has one, else empty model
    fields (a 2.5 download folder's config names the rest) and the real w2v-BERT id."""
    return prepare_section.project_form(_base_form(Path(workspace)), project, ID_25)


def _base_form(workspace: Path) -> PrepareForm:
    from generations.indextts2.demo.build import (
        DemoPaths as SharedAudio,  # the demo recordings live in the v2 demo
    )
    from generations.indextts25.demo.build import DemoPaths

    demo = DemoPaths.under(workspace)
    form = PrepareForm(input="", out_dir=str(workspace / "data" / "prepared_v25"), config="", gpt="", codec="",
                       campplus="", w2v_bert=prepare_section.DEFAULT_W2V_BERT, w2v_stats="", tokenizer="",
                       text_scheme="merges", **prepare_section.DEFAULT_OPTIONS)
    if not demo.config.is_file():
        return form
    w2v = demo.config.parent / "w2v-bert-2.0"
    audio = SharedAudio.under(workspace).audio
    return replace(form, input=str(audio) if audio.is_dir() else "", out_dir=str(demo.root / "data" / "prepared"),
                   config=str(demo.config), w2v_bert=str(w2v) if (w2v / "config.json").is_file() else form.w2v_bert)


SECTION = PrepareSection(
    generation="IndexTTS-2.5", prefix="prep25", job=JOB,
    heading="### Prepare audio for IndexTTS-2.5: 25 Hz codes, CAM++ and emotion vectors, text ids and pairs\n"
            "Writes `text_ids/`, `codes/`, `spk_vec/`, `emo_vec/`, `utterances.jsonl` and `pairs.jsonl` (the "
            "2.5 paired manifest the trainer reads) into the output folder. Empty model fields: the files of "
            "the 2.5 download folder the config.yaml is in. A rerun skips what is already done.",
    model_rows=(
        (prepare_section.CONFIG_FIELD, prepare_section.GPT_FIELD,
         Field("codec", "codec (empty: codec.pth beside the config)", "codec"),
         Field("campplus", "CAM++ (empty: campplus_cn_common.bin beside the config)", "campplus")),
        (prepare_section.W2V_BERT_FIELD, prepare_section.W2V_STATS_FIELD,
         Field("tokenizer", "text table (empty: beside the config, else the studio's)", "tokenizer"),
         Field("text_scheme", "text scheme (as training's)", "scheme", "choice", TEXT_SCHEMES)),
    ),
    default_form=default_form,
    generation_id=ID_25,
)


def section() -> PrepareSection:
    """The section (the entry's ``ui.prepare_section``)."""
    return SECTION


# The job's controls (tests and scripts): validate and launch, the job as it stands, graceful stop (SIGINT).
start = SECTION.start
poll = SECTION.poll
stop = SECTION.stop
