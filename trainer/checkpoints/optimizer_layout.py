"""Moving saved AdamW state into this trainer's parameter groups by parameter name (``repair``).

The trainer builds its AdamW with two groups (``trainer.steps.parameter_groups``: decayed, not decayed); an
older checkpoint of this project or a community trainer's single group indexes parameters in another order.
The names come from a model built on the meta device, so nothing is allocated.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch


def _meta_model(cfg: Mapping[str, Any]) -> torch.nn.Module:
    from generations.registry import build_gpt

    with torch.device("meta"):
        return build_gpt(dict(cfg))


def trainer_param_names(cfg: Mapping[str, Any], weight_decay: float = 0.01) -> list[list[str]]:
    """Parameter names per group in the layout this project's trainer builds its AdamW with."""
    from trainer.steps import parameter_groups

    model = _meta_model(cfg)
    name_of = {id(p): n for n, p in model.named_parameters()}
    return [[name_of[id(p)] for p in group["params"]] for group in parameter_groups(model, weight_decay)]


def trainer_group_template() -> list[dict[str, Any]]:
    """The option keys of this trainer's AdamW groups (``trainer.steps.build_optimizer``), without params."""
    from trainer.steps import build_optimizer

    probe = torch.nn.Linear(2, 2)  # one decayed matrix, one bias: both groups exist
    groups = build_optimizer(probe, 1e-3, 0.01, torch.device("cpu")).state_dict()["param_groups"]
    return [{k: v for k, v in group.items() if k != "params"} for group in groups]


# Options a foreign AdamW group carries over into ours (the rest is this trainer's algorithm: fused, ...).
CARRIED_GROUP_OPTIONS = ("lr", "betas", "eps", "initial_lr")


def relayout_optimizer(optimizer: Mapping[str, Any], scheduler: Mapping[str, Any] | None,
                       saved_names: list[list[str]], cfg: Mapping[str, Any], *, foreign: bool = False
                       ) -> tuple[dict[str, Any], dict[str, Any] | None, list[list[str]]]:
    """Move AdamW state saved under ``saved_names`` into this trainer's parameter groups, by name.

    ``foreign=True`` (a community trainer's optimizer): the groups take this trainer's options
    (``trainer.steps.build_optimizer``: fused kernel, ...) with the source's lr, betas, eps and initial
    lr; weight decay as the source's in the decayed group, 0 in the other. Otherwise the source's
    first group is the template. Raises ValueError (with the reason) when the state does not belong to
    this model's parameters.
    """
    model = _meta_model(cfg)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    groups = optimizer.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(saved_names):
        raise ValueError("its parameter groups do not match the recorded parameter names")
    index_to_name: dict[int, str] = {}
    for group, names in zip(groups, saved_names):
        ids = group.get("params", [])
        if len(ids) != len(names):
            raise ValueError(f"a parameter group lists {len(ids)} parameters, the model has {len(names)} there")
        index_to_name.update(zip(ids, names))
    for index, entry in optimizer.get("state", {}).items():
        name = index_to_name.get(index)
        if name is None or name not in shapes:
            raise ValueError(f"state for parameter #{index}, which this model does not have")
        if not isinstance(entry, Mapping):
            raise ValueError(f"state for parameter #{index} ({name}) is not a dict")
        for key in ("exp_avg", "exp_avg_sq"):
            moment = entry.get(key)
            if isinstance(moment, torch.Tensor) and tuple(moment.shape) != shapes[name]:
                raise ValueError(f"{key} of {name} is {list(moment.shape)}, the weight is {list(shapes[name])}")
    weight_decay = float(groups[0].get("weight_decay", 0.01))
    new_names = trainer_param_names(cfg, weight_decay)
    flat_index = {name: i for i, name in enumerate(n for g in new_names for n in g)}
    if foreign:
        templates = trainer_group_template()
        for template in templates:
            template.update({k: copy.deepcopy(groups[0][k]) for k in CARRIED_GROUP_OPTIONS if k in groups[0]})
        templates[0]["weight_decay"] = weight_decay
    else:
        templates = [{k: v for k, v in groups[0].items() if k != "params"} for _ in new_names]
    new_groups, offset = [], 0
    for number, names in enumerate(new_names):
        group = copy.deepcopy(templates[min(number, len(templates) - 1)])
        if number > 0:
            group["weight_decay"] = 0.0
        group["params"] = list(range(offset, offset + len(names)))
        offset += len(names)
        new_groups.append(group)
    new_state = {flat_index[index_to_name[i]]: entry for i, entry in optimizer.get("state", {}).items()
                 if index_to_name[i] in flat_index}
    new_optimizer = {"state": dict(sorted(new_state.items())), "param_groups": new_groups}
    new_scheduler = None
    if isinstance(scheduler, Mapping):
        new_scheduler = dict(scheduler)
        for key in ("base_lrs", "_last_lr"):
            values = scheduler.get(key)
            if isinstance(values, list) and values:
                new_scheduler[key] = [values[0]] * len(new_groups)
        new_scheduler["lr_lambdas"] = [None] * len(new_groups)
    return new_optimizer, new_scheduler, new_names


def community_param_order(state_keys: list[str], cfg: Mapping[str, Any], group_size: int) -> tuple[list[str], str]:
    """Parameter names in the order the community trainer's ``AdamW(model.parameters())`` indexed them.

    That order is the upstream model's registration order, which its saved ``state_dict`` keeps (minus
    the buffers); this project's modules may register in another order (they do for v2), so our own
    ``named_parameters()`` is only the fallback when the counts say the state dict is not the whole model.
    """
    from networks.unified_voice import INFERENCE_ONLY_PREFIXES

    model = _meta_model(cfg)
    buffers = {name for name, _ in model.named_buffers()}
    from_file = [k for k in state_keys if k not in buffers and not k.startswith(INFERENCE_ONLY_PREFIXES)]
    if len(from_file) == group_size:
        return from_file, "the checkpoint's own key order"
    ours = [name for name, _ in model.named_parameters()]
    if len(ours) == group_size:
        return ours, "this project's model order (the checkpoint's keys do not list every parameter)"
    raise ValueError(f"its single parameter group lists {group_size} parameters, the model has {len(ours)}")
