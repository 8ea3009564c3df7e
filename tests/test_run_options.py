"""RunOptions: the run's options as one typed object from the options table; a misspelt name fails at once."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from tests.test_options import REQUIRED, non_default_value
from trainer.options import OPTIONS, options_to_argv, write_train_config
from trainer.options_parser import parse_argv
from trainer.plan import make_plan
from trainer.run_options import (
    OptionTypeError,
    RunOptions,
    UnknownOption,
    parse_run_options,
    stored_run_options,
)

REPO = Path(__file__).resolve().parents[1]
OPTION_NAMES = {option.name for option in OPTIONS}


def _one_line_naming(exc: pytest.ExceptionInfo[BaseException], wrong: str, right: str) -> None:
    message = str(exc.value)
    assert "\n" not in message
    assert repr(wrong) in message and repr(right) in message, message


@pytest.mark.parametrize("read", [
    lambda opts: opts.bach_size,
    lambda opts: opts["bach_size"],
    lambda opts: opts.get("bach_size", 8),
    lambda opts: "bach_size" in opts,
    lambda opts: opts.replace(bach_size=2),
    lambda opts: RunOptions.from_dict({**opts.to_dict(), "bach_size": 2}),
], ids=["attribute", "item", "get", "in", "replace", "from_dict"])
def test_a_misspelt_option_fails_at_once_naming_the_real_one(read):
    opts = parse_run_options(REQUIRED)
    with pytest.raises(UnknownOption) as exc:
        read(opts)
    _one_line_naming(exc, "bach_size", "batch_size")


def test_a_misspelt_option_stops_the_plan_before_any_check_runs(tmp_path):
    values = {**parse_argv([*REQUIRED[:-1], str(tmp_path / "run")]), "lerning_rate": 1e-3}
    with pytest.raises(UnknownOption) as exc:
        make_plan(values)
    _one_line_naming(exc, "lerning_rate", "learning_rate")
    assert not (tmp_path / "run").exists()


def test_every_option_is_a_typed_frozen_attribute():
    opts = parse_run_options(REQUIRED)
    fields = {field.name: field.type for field in dataclasses.fields(opts)}
    assert list(fields) == [option.name for option in OPTIONS]
    for option in OPTIONS:
        value = getattr(opts, option.name)
        wanted = list if option.repeatable else {"int": int, "float": float, "bool": bool}.get(option.kind, str)
        assert type(value) is wanted, option.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.batch_size = 2  # type: ignore[misc]
    with pytest.raises(OptionTypeError, match="'batch_size' takes int, got str"):
        opts.replace(batch_size="2")
    assert opts.replace(batch_size=2).batch_size == 2 and opts.batch_size == 8


def test_argv_round_trip_and_the_yaml_are_those_of_the_plain_dict(tmp_path):
    values = {option.name: non_default_value(option) for option in OPTIONS}
    opts = RunOptions.from_dict(values)
    assert options_to_argv(opts) == options_to_argv(values)
    assert parse_run_options(options_to_argv(opts)) == opts
    assert opts.to_dict() == values and dict(opts) == values
    write_train_config(values, tmp_path / "dict.yaml")
    write_train_config(opts, tmp_path / "typed.yaml")
    assert (tmp_path / "typed.yaml").read_bytes() == (tmp_path / "dict.yaml").read_bytes()


def test_a_stored_config_leaves_out_names_the_table_no_longer_declares():
    stored = {**parse_argv(REQUIRED), "retired_option": 3}
    assert stored_run_options(stored) == parse_run_options(REQUIRED)
    with pytest.raises(OptionTypeError, match="'epochs'"):
        stored_run_options({**stored, "epochs": "ten"})


# --- the product code reads only declared options -------------------------------------------------------------
PRODUCT = ("trainer", "webui", "data_tools", "generations")
# Names under which code holds trainer options (a RunOptions or a plain dict of them).
OPTION_HOLDERS = {"opts", "options", "values", "run_options"}
# Keys read on such names that are not trainer options, because the dict mixes them in or is another thing:
NOT_OPTIONS = {
    # the training form's values also hold the launcher's fields (webui.jobs.launcher.LAUNCH_OPTIONS)
    "nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint", "rdzv_id", "processes", "nodes",
}
# What a RunOptions has besides its options.
RUN_OPTIONS_API = {"to_dict", "replace", "from_dict", "get", "keys", "items", "values"}
# Functions whose result is a RunOptions (so are RunOptions.from_dict and a RunOptions' replace).
MAKES_RUN_OPTIONS = {"parse_run_options", "as_run_options", "stored_run_options"}


def _holder(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name) and node.id in OPTION_HOLDERS:
        return node.id
    if isinstance(node, ast.Attribute) and node.attr in OPTION_HOLDERS - {"values"}:
        return node.attr
    return None


def _string_key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """``holder["key"]`` and ``holder.get("key", ...)`` on the names that hold options."""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _holder(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                reads.append((node.lineno, key.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _holder(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            reads.append((node.lineno, node.args[0].value))
    return reads


def _is_run_options_expr(node: ast.expr | None, trainer_file: bool) -> bool:
    if trainer_file and isinstance(node, ast.Attribute) and node.attr == "opts":  # plan.opts, self.opts, run.opts
        return True
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in MAKES_RUN_OPTIONS
    if isinstance(func, ast.Attribute) and func.attr == "replace":  # a changed copy of a RunOptions
        return _is_run_options_expr(func.value, trainer_file)
    return isinstance(func, ast.Attribute) and ast.unparse(func) == "RunOptions.from_dict"


def _typed_names(function: ast.FunctionDef | ast.AsyncFunctionDef, trainer_file: bool, annotations: bool) -> set[str]:
    """Names in ``function`` that hold a RunOptions: annotated so, or assigned one."""
    names = {arg.arg for arg in [*function.args.args, *function.args.kwonlyargs]
             if annotations and arg.annotation is not None and "RunOptions" in ast.unparse(arg.annotation)
             and "Mapping" not in ast.unparse(arg.annotation)}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                names |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_run_options_expr(v, trainer_file)}
        elif (annotations and isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and "RunOptions" in ast.unparse(node.annotation)):
            names.add(node.target.id)
    return names


def _attribute_reads(tree: ast.AST, trainer_file: bool = True, annotations: bool = True) -> list[tuple[int, str]]:
    """``x.name`` on whatever holds a RunOptions: names assigned one, names annotated ``RunOptions`` where the
    module imports it (``annotations``), and ``*.opts`` (``plan.opts``, ``run.opts``, ``self.opts``) in the
    trainer's modules (``trainer_file``; data_tools' ``self.opts`` are its own options objects)."""
    reads = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        typed = _typed_names(function, trainer_file, annotations)
        for node in ast.walk(function):
            if not isinstance(node, ast.Attribute):
                continue
            holder = node.value
            if (isinstance(holder, ast.Name) and holder.id in typed) or (
                    trainer_file and isinstance(holder, ast.Attribute) and holder.attr == "opts"):
                reads.append((node.lineno, node.attr))
    return reads


def _imports_run_options(tree: ast.AST) -> bool:
    """Whether the module takes ``RunOptions`` from trainer.run_options (data_tools.paired_prep has a class of
    that name of its own, and data_tools' ``self.opts`` are its own options objects)."""
    return any(isinstance(node, ast.ImportFrom) and node.module == "trainer.run_options" for node in ast.walk(tree))


def _product_files() -> list[Path]:
    return sorted(path for folder in PRODUCT for path in (REPO / folder).rglob("*.py"))


def test_product_code_reads_only_declared_options():
    undeclared = []
    attribute_reads = 0
    for path in _product_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(REPO)
        undeclared += [f"{where}:{line}: [{key!r}]" for line, key in _string_key_reads(tree)
                       if key not in OPTION_NAMES | NOT_OPTIONS]
        attributes = _attribute_reads(tree, trainer_file=where.parts[0] == "trainer",
                                      annotations=_imports_run_options(tree))
        attribute_reads += len(attributes)
        undeclared += [f"{where}:{line}: .{name}" for line, name in attributes
                       if name not in OPTION_NAMES | RUN_OPTIONS_API]
    assert not undeclared, "reads of names that are not trainer options:\n" + "\n".join(undeclared)
    assert attribute_reads > 100  # the walk does see the run's typed reads


def test_the_walk_finds_a_misspelt_read():
    tree = ast.parse("def f(plan, opts: RunOptions):\n    a = opts.bach_size\n    b = plan.opts.seed\n"
                     "    c = values['lerning_rate']\n    run = plan.opts.replace(seed=1)\n    d = run.epoch\n"
                     "    e = RunOptions.from_dict(c).sed\n    f = parse_run_options([])\n    g = f.lora_rnk\n")
    assert sorted(name for _, name in _attribute_reads(tree)) == ["bach_size", "epoch", "lora_rnk", "replace", "seed"]
    assert [key for _, key in _string_key_reads(tree)] == ["lerning_rate"]
