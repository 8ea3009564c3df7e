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
def demo_workspace(tmp_path_factory: pytest.TempPathFactory):
    """The demo workspace, built once per test session. Tests must not modify it: copy what they change."""
    from demo.workspace import build_demo

    return build_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def repo_root() -> Path:
    return REPO
