"""The IndexTTS-2.5 half of ``export``: a bundle stock IndexTTS-2.5 inference loads unchanged.

- ``OUT/gpt.pth`` ({"model": state_dict}): for the ``merges`` scheme the text rows (``text_embedding``,
  ``text_head.weight``, ``text_head.bias``) re-ordered from the studio's ids (added tokens after the spare row)
  to upstream's id order (``TiktokenTable.upstream_id_order``: ranks, added ranks, specials, spare row);
  ``OUT/gpt.safetensors`` (optional): the same tensors;
- ``OUT/config.yaml``: ``version: 2.5`` at the top level, the gpt section of the trained model (its
  ``number_text_tokens``) without the studio's ``spk_cond_mode`` marker (upstream passes that beside it);
- ``OUT/multilingual_zh_ja_yue_char_del.tiktoken``: for ``merges`` the upstream-layout table with the added
  ranks (``write_upstream_table``), else the stock table; ``translit`` adds ``amharic_translit.py`` (the
  reversible transliteration inference needs, no dependencies);
- the table's own licence file beside it, ``OUT/LICENSE-NOTICE`` and ``OUT/MODEL_CARD.md``, the card with
  ``stock_inference_notes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

from data_tools.fileio import atomic_write_bytes, atomic_write_text, sha256_file
from data_tools.languages import amharic_translit
from generations.indextts25.data.ethiopic_merges import write_upstream_table
from generations.indextts25.data.text_table import DEFAULT_MERGES, TextTable, stock_inference_notes
from generations.indextts25.data.tiktoken_table import TABLE_NAME, TableError
from trainer.checkpoints.base_movement import BaseMovement
from trainer.checkpoints.card_facts import LICENSE_NOTICE, _base_model, training_lines
from trainer.checkpoints.export_weights import write_gpt_weights
from trainer.checkpoints.format import CheckpointError

TEXT_ROW_TENSORS = ("text_embedding.weight", "text_head.weight", "text_head.bias")
SPK_COND_MODE_KEY = "spk_cond_mode"


def tokenizer_of(ckpt: Mapping[str, Any], table: str | Path | None) -> TextTable:
    """The run's 2.5 tokenizer from the checkpoint's record (``table``: the .tiktoken to use instead)."""
    record = ckpt.get("tokenizer") if isinstance(ckpt.get("tokenizer"), Mapping) else {}
    scheme_record = record.get("text_scheme") if isinstance(record.get("text_scheme"), Mapping) else None
    if scheme_record is None:
        raise CheckpointError("the checkpoint does not record its IndexTTS-2.5 text scheme: it was not trained by "
                              "this studio's 2.5 trainer")
    path = Path(table) if table is not None else Path(str(record.get("path") or ""))
    if not path.is_file():
        raise CheckpointError(f"the 2.5 tokenizer table is not available ({path}): pass --tokenizer with the "
                              ".tiktoken table the run used")
    if record.get("sha256") and sha256_file(path) != record["sha256"]:
        raise CheckpointError(f"{path} is not the table the checkpoint was trained with (sha256 differs)")
    scheme = str(scheme_record.get("scheme"))
    merges = Path(str(record.get("merges_path") or DEFAULT_MERGES))
    try:
        tokenizer = TextTable(path, scheme=scheme, merges=merges if scheme == "merges" else None)
    except TableError as exc:
        raise CheckpointError(f"the run's 2.5 tokenizer cannot be rebuilt: {' '.join(str(exc).split())}") from None
    if tokenizer.merges_sha256 != (scheme_record.get("merges_sha256") or ""):
        raise CheckpointError(f"the merges file {merges} has changed since training (sha256 differs)")
    return tokenizer


def upstream_rows(weights: dict[str, torch.Tensor], tokenizer: TextTable) -> dict[str, torch.Tensor]:
    """The text tensors in upstream's id order (a no-op for schemes without added tokens)."""
    if not tokenizer.added_tokens:
        return weights
    order = torch.tensor(tokenizer.tokenizer.upstream_id_order(), dtype=torch.long)
    out = dict(weights)
    for key in TEXT_ROW_TENSORS:
        if weights[key].shape[0] != order.numel():
            raise CheckpointError(f"{key} has {weights[key].shape[0]} rows, the '{tokenizer.scheme}' scheme's table "
                                  f"{order.numel()}")
        out[key] = weights[key].index_select(0, order).contiguous()
    return out


def config_yaml(gpt: Mapping[str, Any], raw_config: dict[str, Any] | None, notes: list[str]) -> dict[str, Any]:
    section = {k: v for k, v in gpt.items() if k != SPK_COND_MODE_KEY}
    if raw_config is None:
        data: dict[str, Any] = {"gpt": section}
        notes.append("config.yaml holds only the gpt section and version (pass --config to carry the others over)")
    else:
        data = dict(raw_config)
        base = dict(data.get("gpt") or {})
        base.pop(SPK_COND_MODE_KEY, None)
        base.update({k: v for k, v in section.items() if k in base or k == "number_text_tokens"})
        data["gpt"] = base
    data["gpt_checkpoint"] = "gpt.pth"
    data["version"] = 2.5
    return data


def model_card(ckpt: Mapping[str, Any], gpt: Mapping[str, Any], tokenizer: TextTable, dtype: str,
               source: Path, movement: BaseMovement | None, language: str) -> str:
    lines = [
        "# IndexTTS-2.5 GPT fine-tune",
        "",
        f"- Base model: IndexTTS-2.5, {_base_model(ckpt)}",
        "- Model version: 2.5 (config.yaml `version: 2.5`)",
        f"- Architecture: {gpt.get('layers')} layers, model_dim {gpt.get('model_dim')}, "
        f"{gpt.get('number_text_tokens')} text tokens",
        f"- Text: '{tokenizer.scheme}' scheme, {TABLE_NAME} ({tokenizer.added_tokens:,} added tokens), table sha256 "
        f"{tokenizer.sha256}" + (f", merges sha256 {tokenizer.merges_sha256}" if tokenizer.merges_sha256 else ""),
        *training_lines(ckpt, dtype, source, movement, with_top1=False),
        "",
        stock_inference_notes(tokenizer, language).rstrip("\n"),
        "",
        "## Licence",
        "",
        "Derived from IndexTTS-2.5: subject to the bilibili IndexTTS model licence of the base model, which must",
        f"accompany these weights. See LICENSE-NOTICE. The tokenizer table carries its own licence ({TABLE_NAME}.LICENSE).",
        "",
    ]
    return "\n".join(lines)


def _language_of(ckpt: Mapping[str, Any]) -> str:
    manifests = ckpt.get("manifests") if isinstance(ckpt.get("manifests"), Mapping) else {}
    for record in manifests.get("train") or []:
        if isinstance(record, Mapping) and record.get("languages"):
            return str(record["languages"][0])
    return "am"


def export(ckpt: dict[str, Any], path: Path, out_dir: Path, gpt: Mapping[str, Any],
               weights: dict[str, torch.Tensor], raw_config: dict[str, Any] | None, dtype: str, safetensors: bool,
               movement: BaseMovement | None, tokenizer: str | Path | None, report: Any) -> Any:
    """Write the 2.5 bundle (see the module docstring); ``weights`` are already in the export dtype."""
    tok = tokenizer_of(ckpt, tokenizer)
    weights = upstream_rows(weights, tok)
    write_gpt_weights(out_dir, weights, safetensors, report)
    table_path = out_dir / TABLE_NAME
    if tok.added_tokens:
        write_upstream_table(tok.tokenizer, table_path)
    else:
        atomic_write_bytes(table_path, tok.table.read_bytes())
    report.files.append(table_path)
    licence = tok.table.with_name(TABLE_NAME + ".LICENSE")
    if licence.is_file():  # the table's own licence travels with it
        atomic_write_bytes(out_dir / licence.name, licence.read_bytes())
        report.files.append(out_dir / licence.name)
    if tok.scheme == "translit":
        translit_path = out_dir / "amharic_translit.py"
        atomic_write_bytes(translit_path, Path(amharic_translit.__file__).read_bytes())
        report.files.append(translit_path)
    config_path = out_dir / "config.yaml"
    atomic_write_text(config_path, yaml.safe_dump(config_yaml(gpt, raw_config, report.notes), sort_keys=False,
                                                  allow_unicode=True))
    report.files.append(config_path)
    notice_path = out_dir / "LICENSE-NOTICE"
    atomic_write_text(notice_path, LICENSE_NOTICE.format(model_name="IndexTTS-2.5", base=_base_model(ckpt)))
    report.files.append(notice_path)
    card_path = out_dir / "MODEL_CARD.md"
    atomic_write_text(card_path, model_card(ckpt, gpt, tok, dtype, path, movement, _language_of(ckpt)))
    report.files.append(card_path)
    moved = " in upstream's id order" if tok.added_tokens else ""
    report.notes.insert(0, f"{len(weights)} tensors as {dtype}, IndexTTS-2.5 (config version 2.5), '{tok.scheme}' "
                           f"text scheme, number_text_tokens {gpt['number_text_tokens']}, text rows{moved}")
    return report
