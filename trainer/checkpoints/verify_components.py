"""``verify``'s component checks: the weights, the model config, the tokenizer record, the optimizer set
(optimizer, scheduler, grad scaler), the counters, RNG and sampler position, and the content digest, each as a
``Component`` (ok / missing / wrong, with the detail).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from trainer.checkpoints.digest import ABSENT, ALGORITHM, DigestCheck, declares_digest
from trainer.checkpoints.nonfinite import nonfinite_tensors
from trainer.checkpoints.rng import check_rng_state
from trainer.checkpoints.validate import expected_state_shapes, shape_differences
from trainer.checkpoints.verify_report import COMPONENTS, MISSING, OK, WRONG, Component


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_weights(state: Mapping[str, torch.Tensor] | None) -> Component:
    if not state:
        return Component("model weights", MISSING, "no state dict of tensors")
    bad = [name for name, t in state.items()
           if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all())]
    params = sum(t.numel() for t in state.values())
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in state.values()})
    if bad:
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return Component("model weights", WRONG, f"NaN/Inf in {', '.join(bad[:3])}{more}")
    return Component("model weights", OK, f"{len(state)} tensors, {params:,} values, {'/'.join(dtypes)}")


def _check_config(cfg: Any, state: Mapping[str, torch.Tensor] | None) -> tuple[Component, dict | None]:
    if not isinstance(cfg, Mapping):
        return Component("model config", MISSING, "not recorded"), None
    from networks.gpt_config import ConfigError, effective_gpt_config

    try:
        effective = effective_gpt_config(dict(cfg), source="recorded model config")
        shapes = expected_state_shapes(effective)
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        return Component("model config", WRONG, str(exc)), None
    if state is not None:
        diffs = shape_differences(state, shapes)
        if diffs:
            return Component("model config", WRONG, "weights do not fit it: " + "; ".join(diffs)), effective
    return Component("model config", OK, f"{effective['layers']} layers, dim {effective['model_dim']}, "
                                          f"{effective['number_text_tokens']} text tokens"), effective


def _check_tokenizer(record: Any, cfg: Mapping[str, Any] | None) -> Component:
    if not isinstance(record, Mapping):
        return Component("tokenizer record", MISSING, "not recorded")
    sha, vocab = record.get("sha256"), record.get("vocab_size")
    if not (isinstance(sha, str) and len(sha) == 64):
        return Component("tokenizer record", MISSING, f"no sha256 recorded (path {record.get('path')})")
    if not (is_count(vocab) and vocab > 0):
        return Component("tokenizer record", WRONG, f"vocab_size {vocab!r}")
    scheme = record.get("text_scheme")
    if isinstance(scheme, Mapping):  # IndexTTS-2.5: the scheme's table must be the model's text table
        wanted = scheme.get("number_text_tokens")
        if cfg is not None and wanted != int(cfg["number_text_tokens"]):
            return Component("tokenizer record", WRONG, f"the '{scheme.get('scheme')}' text scheme's table has "
                                                        f"{wanted} text tokens, the model "
                                                        f"{int(cfg['number_text_tokens']):,}")
        return Component("tokenizer record", OK, f"{record.get('path')} sha256 {sha[:12]}…, IndexTTS-2.5 "
                                                 f"'{scheme.get('scheme')}' text scheme, vocab {vocab:,}")
    if cfg is not None and vocab > int(cfg["number_text_tokens"]):
        return Component("tokenizer record", WRONG, f"vocab {vocab:,} exceeds the model's "
                                                    f"{int(cfg['number_text_tokens']):,} text tokens")
    return Component("tokenizer record", OK, f"{record.get('path')} sha256 {sha[:12]}… vocab {vocab:,}")


def _optimizer_shape_problem(optimizer: Mapping[str, Any], names: list[list[str]] | None,
                             state: Mapping[str, torch.Tensor] | None) -> str | None:
    if not names or state is None:
        return None
    flat = [name for group in names for name in group]
    for index, entry in (optimizer.get("state") or {}).items():
        if not isinstance(index, int) or index >= len(flat):
            return f"state for parameter #{index}, but only {len(flat)} parameters are named"
        param = state.get(flat[index])
        moment = entry.get("exp_avg") if isinstance(entry, Mapping) else None
        if param is not None and isinstance(moment, torch.Tensor) and tuple(moment.shape) != tuple(param.shape):
            return f"moments of {flat[index]} are {list(moment.shape)}, the weight is {list(param.shape)}"
    return None


def _param_names_from_model(cfg: Mapping[str, Any] | None) -> list[list[str]] | None:
    """Parameter order of a single-group optimizer over model.parameters() (the community trainers' layout)."""
    if cfg is None:
        return None
    from generations.registry import build_gpt

    with torch.device("meta"):
        model = build_gpt(dict(cfg))
    return [[name for name, _ in model.named_parameters()]]


def _check_optimizer_set(ckpt: Mapping[str, Any], state: Mapping[str, torch.Tensor] | None,
                         cfg: Mapping[str, Any] | None, amp: Any) -> list[Component]:
    optimizer, scheduler, scaler = ckpt.get("optimizer"), ckpt.get("scheduler"), ckpt.get("scaler")
    out: list[Component] = []
    if optimizer is None:
        out.append(Component("optimizer", MISSING, "not recorded"))
    elif not (isinstance(optimizer, Mapping) and isinstance(optimizer.get("state"), Mapping)
              and isinstance(optimizer.get("param_groups"), list)):
        out.append(Component("optimizer", WRONG, "malformed (needs state and param_groups)"))
    else:
        names = ckpt.get("optimizer_param_names")
        if names is None and len(optimizer["param_groups"]) == 1:
            names = _param_names_from_model(cfg)
        problem = _optimizer_shape_problem(optimizer, names, state)
        if problem is None:
            bad = nonfinite_tensors({"optimizer": optimizer, "optimizer_param_names": names})
            problem = f"NaN/Inf in {', '.join(bad)}" if bad else None
        groups = optimizer["param_groups"]
        n_params = sum(len(g.get("params", [])) for g in groups)
        if problem:
            out.append(Component("optimizer", WRONG, problem))
        elif not optimizer["state"] and is_count(ckpt.get("step")) and ckpt.get("step", 0) > 0:
            out.append(Component("optimizer", WRONG, "no per-parameter state after training steps"))
        else:
            lr = groups[0].get("lr") if groups else None
            out.append(Component("optimizer", OK, f"{len(optimizer['state'])}/{n_params} parameters with state, "
                                                  f"{len(groups)} group(s), lr {lr}"))
    if scheduler is None:
        out.append(Component("scheduler", MISSING, "not recorded"))
    elif not (isinstance(scheduler, Mapping) and "last_epoch" in scheduler):
        out.append(Component("scheduler", WRONG, "malformed (no last_epoch)"))
    else:
        out.append(Component("scheduler", OK, f"at step {scheduler['last_epoch']}"))
    if scaler is None:
        if amp == "fp16" and optimizer is not None:
            out.append(Component("grad scaler", MISSING, "fp16 training without a saved grad scaler"))
        else:
            out.append(Component("grad scaler", OK, "not used (no fp16 grad scaling)"))
    elif not (isinstance(scaler, Mapping) and "scale" in scaler):
        out.append(Component("grad scaler", WRONG, "malformed (no scale)"))
    else:
        out.append(Component("grad scaler", OK, f"scale {scaler['scale']}"))
    return out


def studio_components(ckpt: dict[str, Any], state: Mapping[str, torch.Tensor] | None) -> tuple[list[Component], dict | None]:
    config_comp, cfg = _check_config(ckpt.get("model_config"), state)
    comps = [_check_weights(state), config_comp, _check_tokenizer(ckpt.get("tokenizer"), cfg)]
    counters = [k for k in ("step", "epoch", "position") if not is_count(ckpt.get(k))]
    if counters:
        status = MISSING if all(k not in ckpt for k in counters) else WRONG
        comps.append(Component("training counters", status, f"{', '.join(counters)} not recorded as counts"))
    else:
        comps.append(Component("training counters", OK,
                               f"step {ckpt['step']}, epoch {ckpt['epoch']}, position {ckpt['position']}"))
    amp = (ckpt.get("hparams") or {}).get("amp") if isinstance(ckpt.get("hparams"), Mapping) else None
    comps += _check_optimizer_set(ckpt, state, cfg, amp)
    rng = ckpt.get("rng")
    if rng is None:
        comps.append(Component("RNG", MISSING, "not recorded"))
    else:
        problems = check_rng_state(rng)
        comps.append(Component("RNG", WRONG, "; ".join(problems)) if problems else
                     Component("RNG", OK, f"python, numpy, torch CPU, {len(rng.get('torch_cuda') or [])} CUDA"))
    sampler = ckpt.get("sampler")
    if sampler is None:
        comps.append(Component("sampler position", MISSING, f"order not recorded (position {ckpt.get('position')})"))
    elif not isinstance(sampler, Mapping) or not is_count(ckpt.get("position")):
        comps.append(Component("sampler position", WRONG, "malformed"))
    else:
        comps.append(Component("sampler position", OK, f"epoch {ckpt.get('epoch')}, batch {ckpt.get('position')}"))
    return comps, cfg


def community_components(ckpt: dict[str, Any], state: Mapping[str, torch.Tensor] | None) -> list[Component]:
    comps = [_check_weights(state), Component("model config", MISSING, "community checkpoints do not record it")]
    extra = ckpt.get("extra") if isinstance(ckpt.get("extra"), Mapping) else {}
    tok = extra.get("tokenizer")
    comps.append(Component("tokenizer record", MISSING, f"path only ({tok}), no sha256" if tok else "not recorded"))
    step, epoch, batch = ckpt.get("step"), ckpt.get("epoch"), ckpt.get("batch_idx")
    if is_count(step) and is_count(epoch):
        comps.append(Component("training counters", OK, f"step {step}, next epoch {epoch}"
                                                        + (f", next batch {batch}" if is_count(batch) else "")))
    else:
        comps.append(Component("training counters", WRONG, "step/epoch not counts"))
    amp = extra.get("amp_dtype")
    comps += _check_optimizer_set(ckpt, state, None, "fp16" if amp in ("float16", "fp16") else amp)
    comps.append(Component("RNG", MISSING, "not recorded" if "rng_state" not in ckpt else "not in this format"))
    comps.append(Component("sampler position", MISSING,
                           f"batch {batch} known, the data order is not" if is_count(batch) else "not recorded"))
    return comps


def bare_components(state: Mapping[str, torch.Tensor] | None) -> list[Component]:
    comps = [_check_weights(state)]
    comps += [Component(name, MISSING, "weights-only file") for name in COMPONENTS[1:]]
    return comps


def digest_component(digest: DigestCheck | None, ckpt: Mapping[str, Any]) -> Component:
    if digest is None:
        return Component("content digest", MISSING, "file not checked")
    if digest.status == "ok":
        speed = f", {digest.mb_per_s:,.0f} MB/s" if digest.mb_per_s else ""
        return Component("content digest", OK, f"{ALGORITHM} {digest.recorded[:12]}… matches "
                                               f"({digest.bytes_hashed:,} bytes{speed})")
    if digest.status == ABSENT:
        if declares_digest(ckpt):
            return Component("content digest", WRONG, "recorded at save, missing from the file (torn)")
        return Component("content digest", MISSING, "written before content digests: integrity cannot be proven")
    return Component("content digest", WRONG, digest.reason())
