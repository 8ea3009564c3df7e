"""What a base model takes, known before any data is prepared: the longest clip (seconds) and text (tokens).

One rule with preparation: a clip is too long when its codes exceed ``gpt.max_mel_tokens`` at its generation's
code rate (``shape_rules.seconds_of_codes`` with ``networks.generation_rule.CODES_PER_SECOND``), a text when its
tokens exceed ``gpt.max_text_tokens`` (``shape_rules.drop_reason``). ``data_tools.preprocess``,
``prepare_v2`` and ``prepare_v25`` screen their items with ``longest_seconds``; the ingest slicer cuts clips
to ``ClipLimits.slicing_seconds`` and its gates flag what still cannot fit, so the saved manifest of an import
loses nothing to length when it is prepared for the same model.

A model is a folder (``config.yaml`` inside: a download folder or the demo's ``checkpoints/``) or the config
file itself, of any generation (1.5, 2, 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_tools.shape_rules import DataLimits, seconds_of_codes

CONFIG_NAME = "config.yaml"
# The slicer stays this many codes under the limit: a clip written from a span rounded to milliseconds, and
# IndexTTS-1.5's DVAE (one code more than samples / 1024 at some lengths), must still fit.
SLICING_MARGIN_CODES = 2


class LimitsError(ValueError):
    """A model whose limits cannot be read (one line naming the file)."""


def longest_seconds(max_codes: int, generation: str) -> float:
    """The longest audio (seconds) a GPT of ``generation`` with ``gpt.max_mel_tokens = max_codes`` takes."""
    from networks.generation_rule import CODES_PER_SECOND

    return seconds_of_codes(max_codes, CODES_PER_SECOND[generation])


@dataclass(frozen=True)
class ClipLimits:
    generation: str  # "1.5", "2" or "2.5" (networks.generation_rule)
    max_codes: int  # gpt.max_mel_tokens
    max_text_tokens: int  # gpt.max_text_tokens
    codes_per_second: float  # the generation's code rate
    config: Path
    tokenizer: Path | None  # the tokenizer this generation's preparation uses by default (None: none found)

    @property
    def longest_seconds(self) -> float:
        return seconds_of_codes(self.max_codes, self.codes_per_second)

    @property
    def slicing_seconds(self) -> float:
        """The longest clip the slicer may cut (a little under ``longest_seconds``, see SLICING_MARGIN_CODES)."""
        return seconds_of_codes(max(1, self.max_codes - SLICING_MARGIN_CODES), self.codes_per_second)

    @property
    def data_limits(self) -> DataLimits:
        return DataLimits(max_text_tokens=self.max_text_tokens, max_codes=self.max_codes)

    def describe(self) -> str:
        return (f"IndexTTS-{self.generation} model {self.config.parent}: clips up to {self.longest_seconds:.2f} s "
                f"({self.max_codes} codes at {self.codes_per_second:g}/s), texts up to {self.max_text_tokens} tokens")


def config_path_of(model: str | Path) -> Path:
    """A model folder's config.yaml, or the config file given."""
    path = Path(model).expanduser()
    return path / CONFIG_NAME if path.is_dir() else path


def clip_limits(model: str | Path) -> ClipLimits:
    """The limits of the model in folder (or config file) ``model``; LimitsError when they cannot be read."""
    from data_tools.config import ConfigError, load_config

    config = config_path_of(model)
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise LimitsError(str(exc)) from None
    gpt = cfg.get("gpt")
    try:
        max_codes, max_text = int(gpt["max_mel_tokens"]), int(gpt["max_text_tokens"])
    except (TypeError, KeyError, ValueError):
        raise LimitsError(f"{config}: no gpt.max_mel_tokens and gpt.max_text_tokens (not an IndexTTS config?)"
                          ) from None
    if max_codes < 1 or max_text < 1:
        raise LimitsError(f"{config}: gpt.max_mel_tokens and gpt.max_text_tokens must be positive")
    from networks.generation_rule import CODES_PER_SECOND, generation_id

    generation = generation_id(cfg)
    return ClipLimits(generation, max_codes, max_text, CODES_PER_SECOND[generation], config,
                      _default_tokenizer(config, cfg, generation))


def _default_tokenizer(config: Path, cfg: dict[str, Any], generation: str) -> Path | None:
    """What preparation reads by default: the generation's own text table beside the config (a download folder's,
    e.g. IndexTTS-2.5's .tiktoken), else ``dataset.bpe_model``."""
    from generations.registry import by_id

    table_name = by_id(generation).test.folder_table
    if table_name:
        table = config.parent / table_name
        return table if table.is_file() else None
    dataset = cfg.get("dataset")
    bpe = dataset.get("bpe_model") if isinstance(dataset, dict) else None
    path = config.parent / str(bpe) if bpe else None
    return path if path is not None and path.is_file() else None


def load_text_tokenizer(path: str | Path, generation: str, language: str | None) -> Any:
    """The tokenizer that counts a text's tokens for ``generation`` (``encode(text, language)``), torch-free."""
    from generations.registry import by_id

    open_table = by_id(generation).manifest_format.checker.open_table
    if open_table is not None:  # the generation's own kind of table
        try:
            return open_table(path)
        except (OSError, ValueError) as exc:
            raise LimitsError(f"tokenizer {path}: {exc}") from None
    from data_tools.text_tokenizer import TextTokenizer, TokenizerError

    try:
        return TextTokenizer(path, language)
    except TokenizerError as exc:
        raise LimitsError(str(exc)) from None
