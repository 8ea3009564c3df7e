"""Every trainer option, declared once.

From ``OPTIONS`` come the CLI parser (``trainer.options_parser``), the resolved ``train_config.yaml`` written
at start (``write_train_config``), the UI's training form (``Option.group`` / ``Option.form``) and the argv the
UI runs (``options_to_argv``). ``parse_argv(options_to_argv(values)) == values`` for every option.

Value types: ``str``/``path``/``choice`` -> str (``""`` means "not given"), ``int`` -> int, ``float`` ->
float, ``bool`` -> bool (flags ``--x`` / ``--no-x``), repeatable options -> list of str.

``Option.required`` marks the form's mandatory fields; the parser does not enforce it: an option that is
not given is refused by the run plan (``trainer.plan``), so the pre-flight and the trainer say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from data_tools.fileio import atomic_write_text

KINDS = ("str", "path", "int", "float", "bool", "choice")

GROUP_DATA = "Data and model"
GROUP_SCHEDULE = "Length and batches"
GROUP_OPTIM = "Optimisation"
GROUP_LOGGING = "Logging and checkpoints"
GROUP_EVAL = "Evaluation"
GROUP_RUN = "Run"
GROUP_LORA = "LoRA"
GROUP_LANGUAGES = "Languages and replay"


@dataclass(frozen=True)
class Option:
    name: str  # python name, e.g. "train_manifest"
    flag: str  # "--train-manifest"
    kind: str  # one of KINDS
    default: Any
    help: str
    group: str  # the UI form's section title
    choices: tuple[str, ...] | None = None
    repeatable: bool = False  # list value, flag given once per item
    required: bool = False  # the run cannot start without it (refused by the run plan, not the parser)
    form: bool = True  # shown in the UI's training form
    minimum: float | None = None  # int/float: smallest accepted value


def _opt(name: str, kind: str, default: Any, help: str, group: str, **extra: Any) -> Option:
    return Option(name=name, flag="--" + name.replace("_", "-"), kind=kind, default=default, help=help,
                  group=group, **extra)


# IndexTTS-2.5 only (ignored for IndexTTS-1.5 / IndexTTS2 runs): how Amharic text becomes ids.
TEXT_SCHEME_OPTIONS: tuple[Option, ...] = (
    _opt("text_scheme", "choice", "merges", "IndexTTS-2.5 only: merges (the 2.5 table plus Ethiopic merges as new "
         "rows, ~0.34 tokens per Amharic character), bytes (the stock table: raw UTF-8 bytes, ~2.3), translit "
         "(Amharic in Latin letters, the stock table, ~0.7)", GROUP_DATA, choices=("merges", "bytes", "translit")),
    _opt("text_merges", "path", "", "IndexTTS-2.5 merges scheme: the Ethiopic merges JSON (empty: the studio's "
         "tokenizers/indextts25/ethiopic_merges_am.json)", GROUP_DATA),
)

OPTIONS: tuple[Option, ...] = (
    # --- data and model
    _opt("train", "choice", "gpt", "what to train: gpt (the GPT) or s2mel (IndexTTS2 / 2.5 S2Mel decoder on the "
         "prepared folder of --train-manifest, from the s2mel.pth of --model-dir; --lora trains adapters, else the "
         "whole DiT; --base-checkpoint: the GPT whose latent IndexTTS2 feeds it)", GROUP_DATA,
         choices=("gpt", "s2mel")),
    _opt("s2mel_prompt", "choice", "auto", "IndexTTS2 / 2.5 S2Mel runs: what prompts each training clip. cross: "
         "another clip of the same speaker (the manifest's speaker), drawn per clip and epoch, as synthesis prompts "
         "from a reference recording; own: the clip's own first frames and style; auto: cross where a speaker has "
         "several clips, else own", GROUP_DATA, choices=("auto", "own", "cross")),
    _opt("train_manifest", "path", [], "training manifest (JSONL): an IndexTTS-1.5 codes manifest, an IndexTTS2 or an IndexTTS-2.5 paired manifest; repeat for several (PATH::lang sets its language, PATH::lang@W also its sampling weight: replay)",
         GROUP_DATA, repeatable=True, required=True),
    _opt("val_manifest", "path", [], "validation manifest, same format as the training one; repeat for several (PATH::lang: validated per "
         "language too; none: no validation)",
         GROUP_DATA, repeatable=True),
    _opt("tokenizer", "path", "", "SentencePiece model for the text (base or extended vocabulary); for "
         "IndexTTS-2.5 its .tiktoken table (multilingual_zh_ja_yue_char_del.tiktoken)",
         GROUP_DATA, required=True),
    *TEXT_SCHEME_OPTIONS,
    _opt("config", "path", "", "IndexTTS config.yaml whose gpt: section defines the model", GROUP_DATA,
         required=True),
    _opt("base_checkpoint", "path", "", "IndexTTS gpt.pth to start from (empty: random initialisation)",
         GROUP_DATA),
    _opt("output_dir", "path", "", "run folder: checkpoints, metrics.jsonl, TensorBoard logs", GROUP_DATA,
         required=True),
    _opt("model_dir", "path", "", "IndexTTS2 or IndexTTS-2.5 download folder (s2mel.pth, semantic_codec/ or codec, "
         "campplus_cn_common.bin, bigvgan/, wav2vec2bert_stats.pt, ...) that speech at saves and evaluation of "
         "those generations use; empty: the folder of --config when it holds them", GROUP_DATA),
    _opt("w2v_bert", "str", "", "w2v-BERT 2.0 for IndexTTS2 speech: a local folder or a model id (empty: "
         "w2v-bert-2.0/ in --model-dir)", GROUP_DATA),
    _opt("loss_mode", "choice", "masked",
         "masked: token mean over each item's real tokens plus its first stop (IndexTTS-1.5 and IndexTTS2; "
         "for IndexTTS2 this is the community trainer's loss); indextts: mean over every position, stop padding "
         "included (IndexTTS-1.5 upstream's loss; the same formula for IndexTTS2)",
         GROUP_DATA, choices=("masked", "indextts")),
    _opt("freeze_base_rows", "bool", True,
         "with an extended vocabulary keep the base rows of text_embedding/text_head bitwise unchanged",
         GROUP_DATA),
    # --- length and batches
    _opt("epochs", "int", 10, "passes over the training data", GROUP_SCHEDULE, minimum=1),
    _opt("max_steps", "int", 0, "stop after this many optimizer steps (0: only --epochs limits)",
         GROUP_SCHEDULE, minimum=0),
    _opt("batch_size", "int", 8, "items per micro-batch (per process)", GROUP_SCHEDULE, minimum=1),
    _opt("grad_accumulation", "int", 1, "micro-batches per optimizer step", GROUP_SCHEDULE, minimum=1),
    _opt("num_workers", "int", 2, "DataLoader worker processes (0: load in the training process)",
         GROUP_SCHEDULE, minimum=0),
    _opt("shard_url", "str", "", "read the prepared folders' shards (python -m data_tools.shards pack) from this "
         "http(s) URL of the folder they were uploaded to, by byte ranges; the index stays local (empty: local "
         "shards)", GROUP_SCHEDULE, form=False),
    # --- optimisation
    _opt("learning_rate", "float", 2e-5, "peak learning rate (AdamW)", GROUP_OPTIM, minimum=0.0),
    _opt("weight_decay", "float", 0.01, "AdamW weight decay on weight matrices (not biases/norms/embeddings)",
         GROUP_OPTIM, minimum=0.0),
    _opt("warmup_steps", "int", 500, "linear warm-up steps, then cosine decay to 10% of the peak",
         GROUP_OPTIM, minimum=0),
    _opt("grad_clip", "float", 1.0, "clip the gradient norm to this (0: no clipping)", GROUP_OPTIM, minimum=0.0),
    _opt("text_loss_weight", "float", 0.2, "weight of the text loss in the training loss", GROUP_OPTIM,
         minimum=0.0),
    _opt("mel_loss_weight", "float", 0.8, "weight of the mel-code loss in the training loss", GROUP_OPTIM,
         minimum=0.0),
    _opt("amp", "choice", "auto", "mixed precision: auto (bf16 on a GPU that supports it, else off), bf16 (CPU or "
         "GPU), fp16 (GPU only, grad scaler), off", GROUP_OPTIM, choices=("auto", "bf16", "fp16", "off")),
    _opt("max_nonfinite_steps", "int", 20, "stop (exit 2, nothing saved after them) when the loss or gradient is "
         "not finite for this many optimizer steps in a row; such steps never change the weights",
         GROUP_OPTIM, minimum=1),
    _opt("grad_checkpointing", "bool", False, "recompute GPT-2 and conformer blocks in backward (less memory, slower)",
         GROUP_OPTIM),
    _opt("gpu_memory_gb", "float", 0.0, "GPU memory in GB the pre-flight checks the run's estimate against (0: the "
         "CUDA device's own; a CPU run without it is not estimated)", GROUP_OPTIM, minimum=0.0),
    # --- logging and checkpoints
    _opt("log_interval", "int", 10, "print and record training metrics every N steps", GROUP_LOGGING,
         minimum=1),
    _opt("val_interval", "int", 500, "validate every N steps (and at the end)", GROUP_LOGGING, minimum=1),
    _opt("max_val_batches", "int", 50, "validate on at most N batches (0: the whole validation set)",
         GROUP_LOGGING, minimum=0),
    _opt("save_interval", "int", 1000, "save latest.pth and model_step<N>.pth every N steps", GROUP_LOGGING,
         minimum=1),
    _opt("vocoder", "path", "", "IndexTTS-1.5 BigVGAN (bigvgan_generator.pth) to speak samples at saves with "
         "(empty: no samples)", GROUP_LOGGING),
    _opt("sample_model_dir", "path", "", "IndexTTS2 or IndexTTS-2.5 download folder (config.yaml, s2mel.pth, bigvgan/, "
         "w2v-bert-2.0/, ...) to speak samples at saves with (empty: no samples)", GROUP_LOGGING),
    _opt("sample_steps", "int", 10, "S2Mel flow-matching steps of IndexTTS2 / 2.5 samples at saves (inference's default "
         "is 25: fewer is faster and rougher)", GROUP_LOGGING, minimum=1),
    _opt("sample_texts", "path", "", "texts to speak at saves, one per line (empty: the first 3 validation "
         "transcripts)", GROUP_LOGGING),
    _opt("sample_every", "int", 0, "make samples at saves whose step is a multiple of N (0: at every save)",
         GROUP_LOGGING, minimum=0),
    _opt("keep_checkpoints", "int", 3, "model_step<N>.pth files to keep (latest.pth and best.pth are extra)",
         GROUP_LOGGING, minimum=1),
    # --- evaluation (trainer/evaluation; python -m trainer.evaluate takes the same flags)
    _opt("eval_at_saves", "bool", False, "measure every committed save in its own process beside training: CER and "
         "WER of its speech (ASR) and speaker similarity to the reference voice (needs --eval-asr, and --vocoder "
         "for IndexTTS-1.5 or the download folder, --model-dir, for IndexTTS2)", GROUP_EVAL),
    _opt("eval_asr", "str", "", "CTC speech recogniser for CER/WER: a local model folder or a model id (e.g. "
         "facebook/mms-1b-all)", GROUP_EVAL),
    _opt("eval_asr_lang", "str", "", "the recogniser's adapter language for the training language (MMS: amh); "
         "empty: the model's own", GROUP_EVAL),
    _opt("eval_speaker_model", "str", "", "x-vector speaker model for similarity: a local folder or a model id "
         "(e.g. microsoft/wavlm-base-plus-sv); empty: no similarity", GROUP_EVAL),
    _opt("eval_texts", "path", "", "evaluation sentences, one per line (empty: the first --eval-sentences "
         "validation transcripts)", GROUP_EVAL),
    _opt("eval_sentences", "int", 8, "validation transcripts in the evaluation set (without --eval-texts)",
         GROUP_EVAL, minimum=1),
    _opt("eval_voices", "int", 1, "reference voices: prompts of the first N validation speakers", GROUP_EVAL,
         minimum=1),
    _opt("eval_reference", "path", [], "reference voice audio instead of validation prompts (repeat for several); "
         "similarity needs audio, a prompt mel has none", GROUP_EVAL, repeatable=True),
    _opt("eval_language", "str", "", "language of the evaluation sentences for scoring (empty: the validation "
         "manifest's)", GROUP_EVAL),
    _opt("eval_second_texts", "path", "", "sentences in a second language (e.g. English) to show what the "
         "fine-tune forgot (empty: none)", GROUP_EVAL),
    _opt("eval_second_language", "str", "en", "language of --eval-second-texts (for scoring)", GROUP_EVAL),
    _opt("eval_second_asr_lang", "str", "", "the recogniser's adapter for the second language (MMS: eng); empty: "
         "the model's own", GROUP_EVAL),
    _opt("eval_base", "bool", True, "also measure the base model (--base-checkpoint) once on the same set",
         GROUP_EVAL),
    _opt("eval_device", "str", "cpu", "device of evaluation at saves: cpu, cuda or cuda:N (a spare GPU)",
         GROUP_EVAL),
    _opt("eval_threads", "int", 1, "CPU threads of evaluation at saves (leave the training's cores alone)",
         GROUP_EVAL, minimum=1),
    _opt("best_by", "choice", "val_loss", "what best.pth follows: val_loss (lowest validation loss), cer (lowest "
         "CER) or sim (highest speaker similarity); cer and sim come from evaluation", GROUP_EVAL,
         choices=("val_loss", "cer", "sim")),
    _opt("keep_best", "int", 2, "with --best-by cer|sim, the N best measured checkpoints are kept past "
         "--keep-checkpoints rotation", GROUP_EVAL, minimum=0),
    _opt("eval_seeds", "int", 3, "every evaluation text is spoken in every voice with N seeds (fixed when the "
         "run's evaluation set is first stored)", GROUP_EVAL, minimum=1),
    _opt("best_cer_limit", "float", 0.02, "--best-by never picks a checkpoint whose CER is more than this above "
         "the best so far's (0.02: two points)", GROUP_EVAL, minimum=0.0),
    _opt("best_sim_limit", "float", 0.03, "--best-by never picks a checkpoint whose speaker similarity is more "
         "than this below the base model's", GROUP_EVAL, minimum=0.0),
    # --- run
    _opt("resume", "str", "", "auto: continue from <output-dir>/latest.pth (or the newest valid "
         "model_step); PATH: that checkpoint; empty: fresh start", GROUP_RUN),
    _opt("init_from", "path", "", "start from this checkpoint's weights with a fresh optimizer, "
         "scheduler and scaler at step 0 (e.g. after changing the tokenizer)", GROUP_RUN),
    _opt("seed", "int", 1234, "seed of the data order, initialisation and dropout", GROUP_RUN, minimum=0),
    _opt("device", "str", "auto", "auto, cpu, cuda or cuda:N", GROUP_RUN),
    _opt("sharding", "choice", "ddp", "under torchrun: ddp (every process holds the whole model; the default) or "
         "fsdp (PyTorch FSDP2: weights, gradients and optimizer state split over the processes, for a full "
         "fine-tune that does not fit one GPU); checkpoints are the same single file either way",
         GROUP_RUN, choices=("ddp", "fsdp")),
    _opt("collective_timeout", "int", 600, "under torchrun: seconds a collective (gradient all-reduce, save, "
         "stop poll) may wait for the other processes before the job ends with an error naming the rank",
         GROUP_RUN, form=False, minimum=1),
    _opt("preflight", "bool", False, "only run the pre-flight checks and print them (exit 0 ok, 2 not)",
         GROUP_RUN, form=False),
    _opt("preflight_json", "path", "", "with --preflight, also write the report as JSON here", GROUP_RUN,
         form=False),
    _opt("preflight_processes", "int", 1, "with --preflight, check as for a torchrun job of N processes in all "
         "(every process needs a batch of the data)", GROUP_RUN, form=False, minimum=1),
    # --- LoRA (trainer.lora_setup, networks.lora)
    _opt("lora", "bool", False, "train LoRA adapters on the GPT-2 blocks instead of the whole GPT: the base weights "
         "are frozen (but the parts kept below); checkpoints hold the stock weights plus the adapters, export merges "
         "them", GROUP_LORA),
    _opt("lora_dora", "bool", False, "with --lora: DoRA adapters (weight-decomposed LoRA, peft's): each adapted "
         "weight also trains a magnitude per output feature; GPT and S2Mel runs; export merges them the same way",
         GROUP_LORA),
    _opt("lora_rank", "int", 16, "rank of each adapter", GROUP_LORA, minimum=1),
    _opt("lora_alpha", "float", 32.0, "adapter scale numerator: the update is alpha / rank x B A", GROUP_LORA,
         minimum=0.0),
    _opt("lora_dropout", "float", 0.0, "dropout on the adapters' input", GROUP_LORA, minimum=0.0),
    _opt("lora_targets", "str", "all", "projections to adapt: all, or a comma list of attn.c_attn, attn.c_proj, "
         "mlp.c_fc, mlp.c_proj", GROUP_LORA),
    _opt("lora_layers", "str", "", "GPT-2 blocks to adapt, e.g. 0-11,20 (empty: every block)", GROUP_LORA),
    _opt("lora_train_heads", "bool", True, "with --lora, also train text_head, mel_head and final_norm",
         GROUP_LORA),
    _opt("lora_train_embeddings", "bool", True, "with --lora, also train the text and mel embeddings and their "
         "position tables (a new language's new text rows need this; frozen base rows stay frozen)", GROUP_LORA),
    _opt("lora_train_lang_row", "bool", True, "with --lora, also train the IndexTTS-2.5 language table "
         "(lang_embedding)", GROUP_LORA),
    # --- languages and replay (trainer.language_row, trainer.replay, trainer.forgetting)
    _opt("lang_init_from", "str", "", "IndexTTS-2.5: at a fresh start copy this language's lang_embedding row "
         "(e.g. en) over the run's language row (the first --train-manifest's ::lang); only that row then trains",
         GROUP_LANGUAGES),
    _opt("lang_lr_mult", "float", 1.0, "IndexTTS-2.5: learning-rate multiplier of the language table", GROUP_LANGUAGES,
         minimum=0.0),
    _opt("forget_margin", "float", 0.0, "forgetting guard: warn when a replayed language's validation loss rises "
         "more than this above its first value (validation manifests as PATH::lang; 0: off)", GROUP_LANGUAGES,
         minimum=0.0),
    _opt("stop_on_forgetting", "bool", False, "with --forget-margin, stop the run (exit 2) when the guard fires, "
         "naming the last checkpoint from before the rise", GROUP_LANGUAGES),
)

_BY_NAME = {option.name: option for option in OPTIONS}


def option_by_name(name: str) -> Option:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no trainer option named {name!r}") from None


def default_values() -> dict[str, Any]:
    return {option.name: list(option.default) if option.repeatable else option.default for option in OPTIONS}


def _format_value(option: Option, value: Any) -> str:
    if option.kind == "float":
        return repr(float(value))
    if option.kind == "int":
        return str(int(value))
    return str(value)


def _flag_and_value(flag: str, text: str) -> list[str]:
    # "--flag=-x" keeps argparse from taking a value that starts with "-" for a flag.
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


def options_to_argv(values: dict[str, Any]) -> list[str]:
    """The argv for ``values``: every required option and every value that differs from its default."""
    unknown = sorted(set(values) - set(_BY_NAME))
    if unknown:
        raise KeyError(f"unknown trainer option(s): {', '.join(unknown)}")
    argv: list[str] = []
    for option in OPTIONS:
        if option.name not in values:
            continue
        value = values[option.name]
        if option.kind == "bool":
            if bool(value) != bool(option.default):
                argv.append(option.flag if value else "--no-" + option.flag[2:])
        elif option.repeatable:
            for item in value or []:
                argv += _flag_and_value(option.flag, str(item))
        elif option.required or value != option.default:
            argv += _flag_and_value(option.flag, _format_value(option, value))
    return argv


def resolved_config(values: dict[str, Any]) -> dict[str, Any]:
    """Plain YAML-safe values (paths as str) in declaration order."""
    out: dict[str, Any] = {}
    for option in OPTIONS:
        value = values.get(option.name, option.default)
        if option.repeatable:
            value = [str(item) for item in value or []]
        elif isinstance(value, Path):
            value = str(value)
        out[option.name] = value
    return out


def write_train_config(values: dict[str, Any], path: str | Path) -> None:
    """Write the resolved options as ``train_config.yaml`` (atomic)."""
    header = "# Resolved options of this run (python -m trainer.train); flags are these names with dashes.\n"
    text = yaml.safe_dump(resolved_config(values), sort_keys=False, allow_unicode=True)
    atomic_write_text(Path(path), header + text)
