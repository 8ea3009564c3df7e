"""Fault injection for data_tools' long jobs (tests only), the same convention as the trainer's hooks.

A hook acts only when ``STUDIO_TEST_HOOKS=1`` is set as well, so one stray variable cannot kill a user's job,
and every active hook announces itself on stderr when the job starts. (data_tools never imports trainer/, so
the few lines of the convention live here too.)

- ``STUDIO_TEST_PREP_KILL_IN_BATCH=N``: batched preparation (``data_tools.batch_prep``) SIGKILLs itself in
  the N-th batch it computes in this run, after writing that batch's first item and before the batch is
  recorded as done: a deterministic "killed mid-way".
- ``STUDIO_TEST_PREP_KILL_RANK=R``: under torchrun, only the process of rank R obeys the hook above (the others
  are then ended by torchrun, as when one GPU's process dies).
"""

from __future__ import annotations

import os
import signal
import sys

HOOKS_GUARD_ENV = "STUDIO_TEST_HOOKS"
PREP_KILL_IN_BATCH_ENV = "STUDIO_TEST_PREP_KILL_IN_BATCH"
PREP_KILL_RANK_ENV = "STUDIO_TEST_PREP_KILL_RANK"
HOOKS = (PREP_KILL_IN_BATCH_ENV, PREP_KILL_RANK_ENV)


def hook_number(name: str) -> int | None:
    """The hook's number when it is set and the guard is on, else None."""
    if os.environ.get(HOOKS_GUARD_ENV, "").strip() != "1":
        return None
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def announce_active_hooks() -> None:
    for name in HOOKS:
        if hook_number(name) is not None:
            print(f"warning: test hook {name}={os.environ[name]} is active (fault injection, {HOOKS_GUARD_ENV}=1)",
                  file=sys.stderr, flush=True)


def kill_now() -> None:
    """SIGKILL this process (nothing is flushed or cleaned up: what a power cut or an OOM kill leaves)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
