"""Plain words for every field of the training form: a field reads as what it decides, and its command-line flag
follows in the small text under it, where a person who knows the CLI looks for it (issue 40)."""

from __future__ import annotations

TITLES: dict[str, str] = {
    # Data and model
    "train": "What to train",
    "train_manifest": "Training data",
    "val_manifest": "Validation data",
    "tokenizer": "Tokenizer",
    "text_scheme": "How Amharic text becomes tokens (IndexTTS-2.5)",
    "text_merges": "Ethiopic merges file (IndexTTS-2.5)",
    "s2mel_prompt": "S2Mel prompts: the clip itself or another of its speaker",
    "config": "Model config",
    "base_checkpoint": "Base model weights",
    "output_dir": "Run folder",
    "model_dir": "Model download folder",
    "w2v_bert": "Speech feature model (w2v-BERT)",
    "loss_mode": "How the loss counts tokens",
    "freeze_base_rows": "Keep the base vocabulary's rows unchanged",
    # Length and batches
    "epochs": "Passes over the data",
    "max_steps": "Stop after steps",
    "batch_size": "Clips per batch",
    "grad_accumulation": "Batches per update",
    "num_workers": "Data loading processes",
    # Optimisation
    "learning_rate": "Learning rate",
    "weight_decay": "Weight decay",
    "warmup_steps": "Warm-up steps",
    "grad_clip": "Gradient clipping",
    "text_loss_weight": "Weight of the text loss",
    "mel_loss_weight": "Weight of the speech-code loss",
    "amp": "Mixed precision",
    "max_nonfinite_steps": "Stop after broken (NaN) steps",
    "grad_checkpointing": "Save memory by recomputing",
    "gpu_memory_gb": "GPU memory to plan for (GB)",
    # Logging and checkpoints
    "log_interval": "Log every N steps",
    "val_interval": "Validate every N steps",
    "max_val_batches": "Validation batches",
    "save_interval": "Save every N steps",
    "vocoder": "Vocoder for samples (IndexTTS-1.5)",
    "sample_model_dir": "Model folder for samples",
    "sample_steps": "Sample quality steps (S2Mel)",
    "sample_texts": "Sentences spoken at saves",
    "sample_every": "Speak samples every N saves' steps",
    "keep_checkpoints": "Checkpoints to keep",
    # Evaluation
    "eval_at_saves": "Score every save",
    "eval_asr": "Speech recogniser for CER",
    "eval_asr_lang": "Recogniser language",
    "eval_speaker_model": "Speaker model for similarity",
    "eval_texts": "Evaluation sentences",
    "eval_sentences": "Number of evaluation sentences",
    "eval_voices": "Number of evaluation voices",
    "eval_reference": "Evaluation reference voices",
    "eval_language": "Language of the evaluation sentences",
    "eval_second_texts": "Sentences in a second language",
    "eval_second_language": "Second language",
    "eval_second_asr_lang": "Recogniser language for the second language",
    "eval_base": "Also score the base model",
    "eval_device": "Device for scoring",
    "eval_threads": "CPU threads for scoring",
    "best_by": "What picks best.pth",
    "keep_best": "Best checkpoints to keep",
    "eval_seeds": "Seeds per sentence",
    "best_cer_limit": "Worst CER a best checkpoint may have",
    "best_sim_limit": "Lowest similarity a best checkpoint may have",
    # Run
    "init_from": "Start from another run's weights",
    "seed": "Random seed",
    "device": "Device",
    "sharding": "How processes share the model",
    # LoRA
    "lora": "Train adapters (LoRA) instead of the whole model",
    "lora_dora": "Weight-decomposed adapters (DoRA)",
    "lora_rank": "Adapter rank",
    "lora_alpha": "Adapter scale (alpha)",
    "lora_dropout": "Adapter dropout",
    "lora_targets": "Layers' projections to adapt",
    "lora_layers": "Blocks to adapt",
    "lora_train_heads": "Also train the output heads",
    "lora_train_embeddings": "Also train the embeddings",
    "lora_train_lang_row": "Also train the language table (IndexTTS-2.5)",
    # Languages and replay
    "lang_init_from": "Start the language row from",
    "lang_lr_mult": "Language table learning-rate factor",
    "forget_margin": "Forgetting alarm margin",
    "stop_on_forgetting": "Stop when other languages are forgotten",
    # Processes and nodes
    "nproc_per_node": "GPUs (processes) per machine",
    "nnodes": "Machines",
    "rdzv_endpoint": "Rendezvous address",
    "node_rank": "This machine's number",
    "min_nodes": "Fewest machines (elastic)",
    "max_restarts": "Restarts after a lost machine",
}


def title_of(name: str, flag: str) -> str:
    """The plain words of option ``name``; its ``flag`` until someone writes them (the form's test refuses that)."""
    return TITLES.get(name, flag)
