"""``python -m trainer.project``: create a voice project, show its steps, record a step run from a shell.

    python -m trainer.project create NAME --model-dir DIR [--tokenizer FILE] [--workspace WS]
    python -m trainer.project show NAME [--json] [--workspace WS]
    python -m trainer.project record NAME STEP --output PATH [--output ...] [--input PATH ...] [--count KEY=N ...]

Exit 0 on success; 2 with one line ``error: ...`` for bad input (a bad name, no such project or step, a missing
output or one outside the workspace, a project that exists already, a damaged project file: what and where).
The studio reads the same project file, so a step recorded here shows in its project view.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from data_tools.cli import OneLineErrorParser, usage_error
from trainer.project.layout import ProjectError, create_project, load_project
from trainer.project.steps import STEPS, next_step, record_step, refresh, step_states


def _parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m trainer.project", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    create = commands.add_parser("create", help="a new project fine-tuning a base model folder")
    create.add_argument("name")
    create.add_argument("--model-dir", required=True, type=Path, help="the base model folder (config.yaml ...)")
    create.add_argument("--tokenizer", type=Path, default=None, help="the text tokenizer to train with "
                        "(default: the model folder's own)")
    show = commands.add_parser("show", help="the project's steps and their state")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="the states as JSON")
    record = commands.add_parser("record", help="record what a step produced and from what")
    record.add_argument("name")
    record.add_argument("step", choices=STEPS)
    record.add_argument("--output", action="append", type=Path, required=True, help="a file or folder it wrote")
    record.add_argument("--input", action="append", type=Path, default=[], help="a file or folder it read")
    record.add_argument("--count", action="append", default=[], metavar="KEY=N", help="a count (e.g. clips=120)")
    record.add_argument("--note", default="")
    for sub in (create, show, record):
        sub.add_argument("--workspace", type=Path, default=Path("."), help="the studio workspace (default: .)")
    return parser


def _counts(items: list[str]) -> dict[str, int]:
    counts = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip().isdigit():
            raise ProjectError(f"--count {item!r}: give KEY=N with a whole number N")
        counts[key.strip()] = int(value)
    return counts


def _show(workspace: Path, name: str, as_json: bool) -> int:
    project = refresh(load_project(workspace, name))
    states = step_states(project)
    if as_json:
        print(json.dumps({"name": project.name, "generation": project.generation, "model_dir": str(project.model_path),
                          "model_dir_in_workspace": project.in_workspace(project.model_path),
                          "steps": [{"step": s.step, "state": s.state, "note": s.note, "when": s.when,
                                     "outputs": list(s.outputs)} for s in states]}, indent=2, ensure_ascii=False))
        return 0
    print(f"project {project.name}: {project.generation_name}, base model {project.where(project.model_path)}")
    for state in states:
        print(f"  {state.title:<28} {state.state:<12} {state.note}")
    upcoming = next_step(states)
    print(f"next: {upcoming.title}" if upcoming else "every step is done")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "create":
            project = create_project(args.workspace, args.name, args.model_dir, tokenizer=args.tokenizer)
            print(f"project {project.name} ({project.generation_name}) created: {project.file}")
            return 0
        if args.command == "show":
            return _show(args.workspace, args.name, args.json)
        project = load_project(args.workspace, args.name)
        record_step(project, args.step, args.output, args.input, _counts(args.count), args.note, source="cli")
        print(f"recorded {args.step} of project {project.name}")
        return 0
    except ProjectError as exc:
        return usage_error(exc)
    except OSError as exc:
        return usage_error(f"{exc.filename or ''}: {exc.strerror or exc}")


if __name__ == "__main__":
    sys.exit(main())
