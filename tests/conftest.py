"""Shared fixtures: the demo workspace (built once per session), ../shared lookup, tool availability."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Under pytest-xdist each worker, and each trainer or torchrun process a test starts, would take one torch thread
# per core: two workers on two cores then run four to eight spinning threads. One thread each keeps the cores busy
# without that contention. Set before torch is imported, so the worker and every child process inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")


# The modules that took longest on 2 cores (2026-11-29; the torchrun modules of issue 41 added 2026-12-07), longest first. Only an ordering aid for the parallel
# run: the longest units start first, so none of them is left to run alone at the end. A module missing here
# runs after these, in collection order.
LONGEST_FIRST = (
    "browser/test_project_path_browser.py", "browser/test_studio_browser.py", "browser/test_listen_v25_browser.py",
    "browser/test_listen_v2_browser.py", "browser/test_indextts25_browser.py", "browser/test_listen_browser.py",
    "browser/test_listen_s2mel_browser.py", "browser/test_ingest_browser.py", "browser/test_torchrun_browser.py",
    "browser/test_listen_ab_browser.py",
    "test_evaluate_v25.py", "test_torchrun.py", "test_elastic.py", "test_prepare_parallel.py", "test_shards_resume.py",
    "test_ingest_parallel.py", "test_s2mel_cli.py", "test_train_v25.py", "test_preflight.py",
    "test_evaluate_v2.py", "test_evaluate.py", "test_prepare_v25.py", "test_supervisor.py", "test_fsdp.py",
    "test_resume_exact.py", "test_prepare_v2.py", "test_ui_tabs.py", "test_training_samples_v25.py",
    "test_memory_estimate.py", "test_lora_training.py", "test_s2mel_training.py", "test_s2mel_keep.py",
    "test_train_v2.py", "test_train_cli.py", "test_synthesis_v25_cli.py", "test_replay.py", "test_listen.py",
    "test_training_samples_v2.py",
)


def _module(item: pytest.Item) -> str:
    return Path(str(item.fspath)).relative_to(REPO / "tests").as_posix()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests first, then the longest modules (a stable sort keeps each module's own order), so that with
    ``--dist loadscope --no-loadscope-reorder`` the longest units of work start first."""
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: (not _module(item).startswith("browser/"), rank.get(_module(item), len(rank))))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``pytest -n N --dist loadscope``, with all browser tests as one unit of work: they run one after another on
    one worker (each drives its own studio and Chromium, mostly waiting on them) beside the other workers. Every
    other module is a unit of its own, as loadscope makes it, so its module-scoped models are built once."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class BrowserTestsAsOneScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "browser" if nodeid.startswith("tests/browser/") else super()._split_scope(nodeid)

    return BrowserTestsAsOneScope(config, log)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_tool(name: str, why: str) -> str:
    """Path of an external program; skip locally without it, but fail in CI (which installs it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed ({why})"
        if in_ci():
            pytest.fail(message + "; CI must install it")
        pytest.skip(message)
    return path


def shared_file(*parts: str) -> Path:
    """A large reference fixture from ../shared; skipped with the reason where the folder is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if in_ci():
            pytest.fail(f"{path} is missing; CI always has ../shared beside the checkout")
        pytest.skip(f"reference fixture {path} not present (../shared is not beside this checkout)")
    return path


@pytest.fixture(autouse=True)
def _trainer_test_hooks_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process trainer runs honour STUDIO_TEST_* hooks a test sets (the trainer wants a second guard)."""
    monkeypatch.setenv("STUDIO_TEST_HOOKS", "1")


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory, worker_id: str):
    """The demo workspace, built once per test run. Tests must not modify it: copy what they change.

    Under pytest-xdist the first worker to ask builds it beside the workers' temporary folders and every worker
    copies that (a private copy each, so one worker's stray write cannot reach another): one build, not one per
    worker."""
    from filelock import FileLock

    from demo.workspace import build_demo
    from generations.indextts15.demo.build import DemoPaths

    target = tmp_path_factory.mktemp("demo")
    if worker_id == "master":
        return build_demo(target)
    shared = tmp_path_factory.getbasetemp().parent
    built = shared / "demo-template.built"
    with FileLock(str(shared / "demo-template.lock"), timeout=900):
        if not built.exists():
            build_demo(shared / "demo-template")
            built.touch()
    shutil.copytree(shared / "demo-template", target, dirs_exist_ok=True)
    return DemoPaths.under(target)


@pytest.fixture
def repo_root() -> Path:
    return REPO
