"""Upload an export (``python -m trainer.checkpoints export``) to a Hub model repository the user names.

The repository is created private unless asked otherwise (an existing one is reused, and a visibility that
differs from the one asked for is reported). Every file of the export goes up in one commit, plus a
``README.md`` (the Hub's model card) made from ``MODEL_CARD.md`` with a metadata header that names the licence
as "other" and points at ``LICENSE-NOTICE``, unless the export already has a README.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.models.hub import _hub_errors, api, hub_problem, timeout_s

WEIGHTS = ("gpt.pth", "gpt.safetensors")
REQUIRED = ("config.yaml", "LICENSE-NOTICE", "MODEL_CARD.md")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
CARD_HEADER = """---
license: other
license_name: bilibili-indextts-model-licence
license_link: LICENSE-NOTICE
pipeline_tag: text-to-speech
tags:
- indextts
- text-to-speech
---

"""


class PublishProblem(ValueError):
    """The export or the repository name cannot be published as given (one line)."""


@dataclass(frozen=True)
class PublishReport:
    repo_id: str
    url: str
    private: bool
    commit: str | None
    files: tuple[str, ...]
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "url": self.url, "private": self.private, "commit": self.commit,
                "files": list(self.files), "note": self.note}


def export_files(export_dir: Path) -> list[Path]:
    """The export's files (refuses a folder that is not a whole export, naming what it lacks)."""
    export_dir = Path(export_dir)
    if not export_dir.is_dir():
        raise PublishProblem(f"{export_dir}: no such export folder")
    lacking = [name for name in REQUIRED if not (export_dir / name).is_file()]
    if not any((export_dir / name).is_file() for name in WEIGHTS):
        lacking.insert(0, " or ".join(WEIGHTS))
    if lacking:
        raise PublishProblem(f"{export_dir} is not a whole export (it lacks {', '.join(lacking)}): make one with "
                             "python -m trainer.checkpoints export")
    return sorted(path for path in export_dir.iterdir() if path.is_file() and not path.name.startswith("."))


def model_card_text(export_dir: Path) -> str:
    return CARD_HEADER + (Path(export_dir) / "MODEL_CARD.md").read_text(encoding="utf-8")


def publish_export(export_dir: Path, repo_id: str, *, private: bool = True, token: str | None = None,
                   message: str | None = None) -> PublishReport:
    """Create (or reuse) ``repo_id`` and upload the export to it in one commit."""
    from huggingface_hub import CommitOperationAdd

    if not _REPO_ID.match(repo_id or ""):
        raise PublishProblem(f"repository {repo_id!r}: expected owner/name, e.g. my-name/indextts2-amharic")
    files = export_files(export_dir)
    operations = [CommitOperationAdd(path_in_repo=path.name, path_or_fileobj=str(path)) for path in files]
    if not (Path(export_dir) / "README.md").is_file():
        operations.append(CommitOperationAdd(path_in_repo="README.md",
                                             path_or_fileobj=model_card_text(export_dir).encode("utf-8")))
    client = api(token)  # every request bounded by hub.timeout_s()
    step = "create repository"
    try:
        url = client.create_repo(repo_id, private=private, exist_ok=True, repo_type="model", token=token)
        step = "repository info"
        info = client.model_info(repo_id, token=token, timeout=timeout_s())
        step = "upload"
        commit = client.create_commit(repo_id, operations=operations, token=token, repo_type="model",
                                      commit_message=message or f"Upload {Path(export_dir).name} (IndexTTS fine-tune)")
    except _hub_errors() as exc:
        raise hub_problem(exc, repo_id, step) from None
    note = ""
    if info.private is not None and bool(info.private) != private:
        note = (f"{repo_id} already existed and is {'private' if info.private else 'public'}: its visibility was "
                "left as it is")
    return PublishReport(repo_id, str(url), bool(info.private) if info.private is not None else private,
                         getattr(commit, "oid", None), tuple(op.path_in_repo for op in operations), note)
