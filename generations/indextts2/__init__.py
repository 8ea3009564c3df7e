"""IndexTTS2: a v2 GPT (speaker latents + emotion vector) on paired manifests, spoken through a download folder
(S2Mel, BigVGAN v2, w2v-BERT) at saves, in evaluation and in synthesis."""

from __future__ import annotations

from functools import partial

from generations.demo_facts import DemoFacts
from generations.export_facts import ExportFacts
from generations.indextts2.data.format import PAIRED
from generations.model_facts import S2MEL, ModelFacts
from generations.preset_facts import PresetFacts
from generations.s2mel_facts import S2MelFacts
from generations.sentencepiece_fields import SENTENCEPIECE, SENTENCEPIECE_EXPORT
from generations.spec import FormFacts, Generation, TestFacts, lazy
from generations.speech_facts import SpeechFacts
from generations.ui_facts import UiFacts
from networks.generation_rule import CODES_PER_SECOND, ID_2, recogniser_of

PACKAGE = __name__  # its code: modules of this package, named lazily
EVALUATION = f"{PACKAGE}.evaluation"
SAMPLES = f"{PACKAGE}.samples"
DEMO = "generations.indextts2.demo.build"  # its demo (the demo layer), named lazily

FOLDER = "generations.folders"
UI = "generations.indextts2.ui"  # its web-UI pieces (the webui layer), named lazily
W2V_BERT_PLACES = ("w2v-bert-2.0",)  # where its folder may hold w2v-BERT

# The form's GPU presets for it, in the form's order (generations/<name>/presets.py sizes them).
GPU_PRESET_NAMES = ("Amharic on one 24 GB GPU", "Amharic on 80 GB GPU")

INDEXTTS2 = Generation(
    id=ID_2, name="IndexTTS2",
    prompt="precomputed speaker latents + emotion vector (paired manifest)",
    recognises=recogniser_of(ID_2), recognises_folder=lazy(FOLDER, "is_indextts2_folder"),
    codes_per_second=CODES_PER_SECOND[ID_2],
    manifest_format=PAIRED, format_hint="paired manifests (prompt_condition_path, target_codes_path, ...)",
    **SENTENCEPIECE,
    config_hint="an IndexTTS2 config has gpt.emo_condition_module",
    speech=SpeechFacts(sample_plan=lazy(SAMPLES, "sample_plan"), sample_speaker=lazy(SAMPLES, "speaker"),
                       evaluation_speech=lazy(EVALUATION, "speech"), evaluation_backend=lazy(EVALUATION, "Backend"),
                       evaluation_needs_audio=True, synthesize=lazy(f"{PACKAGE}.synthesize", "synthesize"),
                       synthesis_options=frozenset({"s2mel", "s2mel_strength"})),
    export=ExportFacts(build=SENTENCEPIECE_EXPORT, name="IndexTTS2", version=2.0,
                       folder_files=partial(lazy(FOLDER, "model_folder_files"), "networks.indextts2",
                                            W2V_BERT_PLACES)),
    demo_folder="v2", prepare="data_tools.prepare_v2",
    model=ModelFacts(gpt_class=lazy("networks.unified_voice", "UnifiedVoiceV2"), latent_decoder=S2MEL,
                     ddp_unused_parameters=True, training_prompt=lazy("trainer.memory_facts", "latent_prompt")),
    form=FormFacts(manifest_kind="IndexTTS2 paired manifest",
                   not_for="not used for IndexTTS2: its samples at saves speak through --sample-model-dir (a "
                           "download folder)",
                   options=frozenset({"s2mel_prompt"}),
                   sample_options=frozenset({"sample_model_dir", "sample_steps"}),
                   demo_preset="Demo (IndexTTS2)"),
    test=TestFacts(folder_problem=partial(lazy(FOLDER, "folder_problem"), "networks.indextts2"),
                   w2v_bert_places=W2V_BERT_PLACES),
    s2mel=S2MelFacts(sources=lazy(f"{PACKAGE}.s2mel", "sources"), gpt_latent=True),
    ui=UiFacts(prepare_section=lazy(f"{UI}.prepare_section", "section")),
    demo=DemoFacts(paths=lazy(DEMO, "paths"), ensure=lazy(DEMO, "ensure_demo"), project="demo-indextts2",
                   project_files=lazy(DEMO, "project_files"), form_files=lazy(DEMO, "form_files")),
    presets=PresetFacts(names=GPU_PRESET_NAMES,
                        gpu_presets=lazy(f"{PACKAGE}.presets", "gpu_presets"),
                        released_gpt=lazy(f"{PACKAGE}.presets", "released_gpt")),
    model_set=lazy(f"{PACKAGE}.hub", "model_set"),
)
