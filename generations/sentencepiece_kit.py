"""What IndexTTS-1.5 and IndexTTS2 share in the trainer: a SentencePiece ``--tokenizer`` and how a GPT of
that tokenizer starts (base checkpoint grown to the vocabulary, ``--init-from``, or random)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TABLE_SUFFIX = ".tiktoken"  # another generation's table, never a SentencePiece model


def reads_tokenizer(path: str) -> bool:
    return not str(path).endswith(TABLE_SUFFIX)


def open_tokenizer(opts: dict[str, Any]) -> Any:
    from data_tools.text_tokenizer import TextTokenizer, TokenizerError

    try:
        tokenizer = TextTokenizer(opts["tokenizer"])
        tokenizer.encode("preflight")
    except (TokenizerError, OSError, RuntimeError) as exc:
        raise TokenizerError(f"--tokenizer: {' '.join(str(exc).split())}") from None
    return tokenizer


def describe_tokenizer(path: str, tokenizer: Any) -> str:
    return f"{path}: {tokenizer.vocab_size:,} pieces, sha256 {tokenizer.sha256[:12]}…"


def target_gpt_config(config_gpt: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    from trainer.model_source import target_gpt_config as target

    return target(config_gpt, tokenizer)


def tokenizer_record(opts: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    from trainer.checkpoints import tokenizer_record as record

    return record(opts["tokenizer"], tokenizer.sha256, tokenizer.vocab_size)


def start(opts: dict[str, Any], config: dict[str, Any], config_path: Path, tokenizer: Any, mmap: bool) -> Any:
    from trainer.model_source import from_base_checkpoint, from_init_checkpoint, random_init

    if opts.get("init_from"):
        return from_init_checkpoint(Path(opts["init_from"]), config["gpt"], config_path, config, tokenizer,
                                    mmap=mmap)
    if opts.get("base_checkpoint"):
        return from_base_checkpoint(Path(opts["base_checkpoint"]), config["gpt"], config_path, config, tokenizer,
                                    mmap=mmap)
    return random_init(config["gpt"], tokenizer)


def rows_refusal(tokens: int, tokenizer: Any, source: str) -> str | None:
    if tokenizer.vocab_size > tokens:
        return f"--tokenizer has {tokenizer.vocab_size} pieces but the model of {source} has {tokens} text tokens"
    return None
