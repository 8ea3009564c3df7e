"""IndexTTS-1.5: a v1.5 GPT (mel-prompted) on codes manifests, spoken through its BigVGAN (``--vocoder``)."""

from __future__ import annotations

from functools import partial

from generations.demo_facts import DemoFacts
from generations.export_facts import ExportFacts
from generations.indextts15.data.format import CODES
from generations.model_facts import BIGVGAN, ModelFacts
from generations.sentencepiece_fields import SENTENCEPIECE, SENTENCEPIECE_EXPORT
from generations.spec import Capability, FormFacts, Generation, lazy
from generations.speech_facts import SpeechFacts
from networks.generation_rule import CODES_PER_SECOND, ID_15, recogniser_of

PACKAGE = __name__  # its code: modules of this package, named lazily
EVALUATION = f"{PACKAGE}.evaluation"
SAMPLES = f"{PACKAGE}.samples"
DEMO = "generations.indextts15.demo.build"  # its demo (the demo layer), named lazily

INDEXTTS15 = Generation(
    id=ID_15, name="IndexTTS-1.5",
    prompt="100-band log-mel of a prompt utterance (codes manifest)",
    recognises=recogniser_of(ID_15), recognises_folder=None,
    codes_per_second=CODES_PER_SECOND[ID_15],
    manifest_format=CODES, format_hint="codes manifests (text, codes, cond_mel)",
    **SENTENCEPIECE,
    config_hint="a config without emo_condition_module describes IndexTTS-1.5",
    speech=SpeechFacts(sample_plan=lazy(SAMPLES, "sample_plan"), sample_speaker=lazy(SAMPLES, "speaker"),
                       evaluation_speech=lazy(EVALUATION, "speech"), evaluation_backend=lazy(EVALUATION, "backend"),
                       synthesize=lazy(f"{PACKAGE}.synthesize", "synthesize")),
    # upstream's IndexTTS-1.5 inference loads its BigVGAN from the model folder (its DVAE is not loaded)
    export=ExportFacts(build=SENTENCEPIECE_EXPORT, name="IndexTTS 1.5", version=1.5,
                       folder_files=partial(lazy("generations.folders", "config_named_files"),
                                            ("bigvgan_checkpoint",))),
    demo_folder="", prepare="data_tools.preprocess",
    model=ModelFacts(gpt_class=lazy("networks.unified_voice", "UnifiedVoice"), latent_decoder=BIGVGAN,
                     training_prompt=lazy("trainer.memory_facts", "mel_prompt")),
    form=FormFacts(manifest_kind="IndexTTS-1.5 codes manifest",
                   not_for="not used for IndexTTS-1.5: its samples at saves speak through --vocoder (BigVGAN)",
                   sample_options=frozenset({"vocoder"}),
                   demo_preset="Demo (CPU, tiny)"),
    missing={Capability.TRAIN_S2MEL: "it has no S2Mel decoder (its BigVGAN speaks the GPT's latent directly); "
                                     "train an IndexTTS2 or IndexTTS-2.5 S2Mel"},
    demo=DemoFacts(paths=lazy(DEMO, "paths"), ensure=lazy(DEMO, "ensure_demo"), project="demo-indextts-1.5",
                   project_files=lazy(DEMO, "project_files")),
    model_set=lazy(f"{PACKAGE}.hub", "model_set"),
)
