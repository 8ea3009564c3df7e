"""The Tokenizer tab's boxes that take the session's project's files: its model folder's base tokenizer, the
tokenizer it trains with, its saved manifest (the corpus) and its prepared manifests and config, from the
project's hand-off (``trainer.project.handoff.defaults_for(project, "tokenizer")``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.project import follow

if TYPE_CHECKING:
    from trainer.project import Project
    from webui.context import StudioContext


def project_tokenizer_values(project: Project) -> dict[str, str]:
    """The tab's boxes by name (``sample_base``, ``train_corpus``, ``verify_config``...) for ``project``."""
    from trainer.project import defaults_for

    handed = defaults_for(project, "tokenizer")
    base, tokenizer = handed["base_tokenizer"], handed["tokenizer"]
    train, val = handed["train_manifest"], handed["val_manifest"]
    return {"sample_base": base, "sample_extended": tokenizer, "train_corpus": "\n".join(handed["corpus"]),
            "extend_base": base, "verify_extended": tokenizer, "verify_base": base,
            "verify_samples": val[0] if val else "", "verify_manifest": train[0] if train else "",
            "verify_config": handed["config"]}


def follow_project(ctx: StudioContext, fields: dict[str, Any]) -> None:
    """Fill ``fields`` from the session's project whenever it changes (``webui.project.follow``); a page that
    opens on a demo project keeps the demo's files as it always did."""
    names = list(fields)

    def values(stamp: Any) -> list[Any]:
        from webui.context import is_demo_project

        project = ctx.project(follow.stamp_name(stamp))
        if project is None or (follow.stamp_cause(stamp) == follow.LOAD and is_demo_project(project.name)):
            return [gr.skip()] * len(names)
        shown = project_tokenizer_values(project)
        return [shown.get(name, gr.skip()) for name in names]

    follow.follow(ctx, values, [fields[name] for name in names])
