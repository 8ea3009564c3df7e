"""The notebook for free GPUs (notebooks/studio.ipynb), executed as Colab would run it, by nbclient: on the demo
workspace, on the CPU, with installs and downloads switched off. It must end with the studio answering on its port."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from tests.studio_process import free_port, http_status
from webui.jobs.process_tools import wait_until

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "studio.ipynb"


def _notebook():
    import nbformat

    return nbformat.read(NOTEBOOK, as_version=4)


def _set(source: str, name: str, value: object) -> str:
    """The settings cell with ``name = value`` (the line must exist: a renamed setting fails here, not silently)."""
    changed, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", source, count=1, flags=re.MULTILINE)
    assert count == 1, f"the settings cell has no {name}"
    return changed


def test_the_first_cell_says_what_the_free_cards_train_by_the_memory_estimate():
    from webui.training.card_fit import FREE_CARDS, fit_table

    first = _notebook().cells[0]
    assert first.cell_type == "markdown"
    shown = re.search(r"<!-- card_fit:.*?-->\n(.*)\n<!-- /card_fit -->", first.source, re.DOTALL)
    assert shown is not None, "the first cell lost its card_fit table"
    assert shown.group(1) == "\n\n".join(fit_table(name, size) for name, size in FREE_CARDS)


@pytest.mark.slow
def test_the_notebook_runs_on_the_demo_without_downloads_and_leaves_the_studio_answering(
        demo_workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from nbclient import NotebookClient

    workspace = tmp_path / "workspace"
    shutil.copytree(demo_workspace.root, workspace)
    port = free_port()
    nb = _notebook()
    settings = next(cell for cell in nb.cells if "parameters" in cell.metadata.get("tags", []))
    for name, value in (("INSTALL", False), ("DOWNLOAD", False), ("SHARE", False), ("WORKSPACE", str(workspace)),
                        ("PORT", port), ("PASSWORD", "notebook-pass")):
        settings.source = _set(settings.source, name, value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the kernel inherits it: no cell may reach the Hub
    pid_file = workspace / "studio.pid"
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
        outputs = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                          for out in cell.outputs)
        assert "IndexTTS-2.5 |" in outputs  # what this machine's card (or the free ones) can train
        assert "downloads off" in outputs and f"studio running at http://127.0.0.1:{port}/" in outputs
        assert "login required: user 'studio'" in outputs and "notebook-pass" not in outputs
        assert http_status(f"http://127.0.0.1:{port}/") == 200  # still answering after the notebook ended
    finally:
        if pid_file.is_file():
            pid = int(pid_file.read_text())
            os.killpg(pid, signal.SIGTERM)
            assert wait_until(lambda: http_status(f"http://127.0.0.1:{port}/", 1.0) is None, 30.0, interval_s=0.2)
