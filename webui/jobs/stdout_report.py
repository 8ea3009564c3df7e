"""Run a tool module with its standard output written to a file: the report of a CLI that prints it.

    python -m webui.jobs.stdout_report --out REPORT -- MODULE [ARGS...]

Some CLIs print their JSON report on stdout (``python -m trainer.checkpoints verify PATH --json``). Under
the supervisor, stdout and stderr share console.log, so a warning could land inside the JSON. This
launcher runs ``MODULE`` in its own process (``runpy``, as ``python -m`` would) with ``sys.stdout``
pointed at ``REPORT.partial``, renamed to ``REPORT`` when the tool ends; stderr (progress bars, the
``error: ...`` line) still goes to the console. The exit code is the tool's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
from pathlib import Path

EXIT_INTERRUPTED = 130


def _parse(argv: list[str]) -> tuple[Path, str, list[str]]:
    if "--" not in argv:
        print("error: stdout_report needs '--' followed by a module and its arguments", file=sys.stderr)
        raise SystemExit(2)
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m webui.jobs.stdout_report")
    parser.add_argument("--out", required=True, type=Path, help="file that receives the module's stdout")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        parser.error("no module after '--'")
    return args.out, command[0], command[1:]


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message") prints the message and exits 1
    return 1


def main(argv: list[str] | None = None) -> int:
    out, module, args = _parse(sys.argv[1:] if argv is None else argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    code = 0
    try:
        with open(partial, "w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
            sys.argv = [module, *args]
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            except SystemExit as exc:
                code = _exit_code(exc)
            except KeyboardInterrupt:
                print("error: interrupted", file=sys.stderr)
                code = EXIT_INTERRUPTED
        os.replace(partial, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
