"""IndexTTS-2.5: a 2.5 GPT (CAM++ speaker vector + emotion vector + language row) on 2.5 paired manifests,
with a .tiktoken text table and its text schemes; samples, synthesis and evaluation through a 2.5 download folder."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from generations.demo_facts import DemoFacts
from generations.export_facts import ExportFacts
from generations.indextts25.data.format import PAIRED
from generations.model_facts import S2MEL, ModelFacts
from generations.preset_facts import PresetFacts
from generations.s2mel_facts import S2MelFacts
from generations.spec import FormFacts, Generation, TestFacts, lazy
from generations.speech_facts import SpeechFacts
from generations.ui_facts import UiFacts
from networks.generation_rule import CODES_PER_SECOND, ID_25, recogniser_of

PACKAGE = __name__  # its code: modules of this package, named lazily
EVALUATION = f"{PACKAGE}.evaluation"
SAMPLES = f"{PACKAGE}.samples"
DEMO = "generations.indextts25.demo.build"  # its demo (the demo layer), named lazily

NAME = "IndexTTS-2.5"
TABLE_NAME = "multilingual_zh_ja_yue_char_del.tiktoken"  # its table in a download folder (networks.indextts25)
# what its export writes: the weights, config, table (with its licence), the translit module, notice and card
EXPORT_FILES = ("gpt.pth", "gpt.safetensors", "config.yaml", TABLE_NAME, TABLE_NAME + ".LICENSE",
                "amharic_translit.py", "LICENSE-NOTICE", "MODEL_CARD.md")
TABLE_SUFFIX = ".tiktoken"
MODEL = f"{PACKAGE}.model"
FOLDER = "generations.folders"
UI = "generations.indextts25.ui"  # its web-UI pieces (the webui layer), named lazily
W2V_BERT_PLACES = ("w2v-bert-2.0", "hf_cache/w2v-bert-2.0")  # where its folder may hold w2v-BERT


def config_refusal(gpt: Mapping[str, Any], where: str) -> str | None:
    if "emo_condition_module" in gpt:
        return None
    return (f"{where} declares {NAME} but its gpt section has no emo_condition_module (an {NAME} GPT keeps "
            "IndexTTS2's emotion path): use the config.yaml of the 2.5 release")


def reads_tokenizer(path: str) -> bool:
    """A ``--tokenizer`` that is a 2.5 ``.tiktoken`` table (rather than a SentencePiece model)."""
    return str(path).endswith(TABLE_SUFFIX)


# The form's GPU presets for it, in the form's order (generations/<name>/presets.py sizes them).
GPU_PRESET_NAMES = (f"{NAME} full fine-tune (80 GB)", f"{NAME} LoRA (24 GB)")

INDEXTTS25 = Generation(
    id=ID_25, name=NAME,
    prompt=("CAM++ speaker vector + emotion vector of a prompt utterance, and the item's language "
            f"({NAME} paired manifest)"),
    recognises=recogniser_of(ID_25), recognises_folder=lazy("networks.indextts25", "is_indextts25_folder"),
    codes_per_second=CODES_PER_SECOND[ID_25],
    manifest_format=PAIRED,
    format_hint=f"{NAME} paired manifests (prompt_spk_vec_path, target_codes_path, target_text, language, ...)",
    tokenizer_kind=f"an {NAME} table", tokenizer_file=f"its .tiktoken file ({TABLE_NAME})",
    config_hint="for a 2.5 model set 'version: 2.5' in its config.yaml",
    reads_tokenizer=reads_tokenizer, open_tokenizer=lazy(MODEL, "open_tokenizer"),
    describe_tokenizer=lazy(MODEL, "describe_tokenizer"), target_gpt_config=lazy(MODEL, "target_gpt_config"),
    tokenizer_record=lazy(MODEL, "run_tokenizer_record"), start=lazy(MODEL, "start"),
    rows_refusal=lazy(MODEL, "run_rows_refusal"), data_note=lazy(MODEL, "tokens_per_char_line"),
    speech=SpeechFacts(sample_plan=lazy(SAMPLES, "sample_plan"), sample_speaker=lazy(SAMPLES, "speaker"),
                       evaluation_speech=lazy(EVALUATION, "speech"), evaluation_backend=lazy(EVALUATION, "Backend"),
                       evaluation_needs_audio=True, synthesize=lazy(f"{PACKAGE}.synthesize", "synthesize"),
                       synthesis_options=frozenset({"text_scheme", "adapter_file", "duration_factor", "s2mel",
                                                    "s2mel_strength"})),
    export=ExportFacts(build=lazy(f"{PACKAGE}.export", "export"), name=NAME, version=2.5,
                       folder_files=partial(lazy(FOLDER, "model_folder_files"), "networks.indextts25",
                                            W2V_BERT_PLACES),
                       bundle_files=EXPORT_FILES),
    demo_folder="v25", prepare="data_tools.prepare_v25",
    model=ModelFacts(gpt_class=lazy("networks.gpt_v25", "UnifiedVoiceV25"), latent_decoder=S2MEL,
                     saved_config=lazy(MODEL, "saved_model_config"), appends_text_rows=True,
                     config_refusal=config_refusal, ddp_unused_parameters=True, language_table=True,
                     training_prompt=lazy("trainer.memory_facts", "speaker_vector_prompt")),
    form=FormFacts(manifest_kind=f"{NAME} paired manifest",
                   not_for=f"not used for {NAME}: its samples at saves speak through --sample-model-dir (a 2.5 "
                           "download folder)",
                   options=frozenset({"text_scheme", "text_merges", "s2mel_prompt"}),
                   sample_options=frozenset({"sample_model_dir", "sample_steps"}),
                   demo_preset="IndexTTS-2.5 demo (CPU)"),
    test=TestFacts(folder_problem=partial(lazy(FOLDER, "folder_problem"), "networks.indextts25"),
                   w2v_bert_places=W2V_BERT_PLACES, folder_table=TABLE_NAME),
    s2mel=S2MelFacts(sources=lazy(f"{PACKAGE}.s2mel", "sources")),
    ui=UiFacts(prepare_section=lazy(f"{UI}.prepare_section", "section"),
               tokenizer_panel=lazy(f"{UI}.tokenizer_panel", "build_panel"),
               coverage_marks=lazy(f"{UI}.text_coverage", "untrained_marks")),
    demo=DemoFacts(paths=lazy(DEMO, "paths"), ensure=lazy(DEMO, "ensure_demo"), project="demo-indextts-2.5",
                   project_files=lazy(DEMO, "project_files"), form_files=lazy(DEMO, "form_files")),
    presets=PresetFacts(names=GPU_PRESET_NAMES,
                        gpu_presets=lazy(f"{PACKAGE}.presets", "gpu_presets"),
                        released_gpt=lazy(f"{PACKAGE}.presets", "released_gpt"),
                        demo_settings=lazy(f"{PACKAGE}.presets", "demo_settings")),
    model_set=lazy(f"{PACKAGE}.hub", "model_set"),
)
