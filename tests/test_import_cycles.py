"""No import cycles (issue 13): the static import graph of every product module, function-level imports included.

Python resolves a cycle at run time only when the import order happens to be right, and a function-level import
hides one until that function runs. This reads every ``import`` statement (module level and inside functions) of
app.py, demo/, trainer/, data_tools/, webui/ and networks/ and fails on any strongly connected group of modules, naming
it. A ``from package import name`` inside the package counts as an edge to the package's ``__init__``.

It also holds the layers to their order (app.py -> webui/ -> demo/ -> trainer/ -> data_tools/ -> networks/):
networks/ imports nothing of the layers above it, data_tools/ nothing of trainer/ or webui/, trainer/ nothing of
demo/ or webui/; a failure names module:line. The generation registry names its code by module-name strings
(``lazy(module, name)``, ``prepare``) that no import statement shows: each entry's targets must import, have the name,
and sit in the registry's layer or below; its demo facet's targets may sit in the demo layer (demo/ and each
generation's ``generations/<name>/demo/``), as the demo builds on the trainer.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from trainer.generations.registry import GENERATIONS
from trainer.generations.spec import Generation, LazyFunction, lazy

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("trainer", "data_tools", "webui", "networks", "demo")
# Each layer and the packages above it, which it must never import (a function-level import counts too).
FORBIDDEN_ABOVE = {
    "networks": ("trainer", "data_tools", "webui", "app", "demo"),
    "data_tools": ("trainer", "webui", "app", "demo"),
    "trainer": ("demo", "webui", "app"),  # the demo builders sit above the trainer (webui/ and app.py may import them)
}


def _modules() -> dict[str, Path]:
    found = {"app": REPO / "app.py"}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_edges() -> list[tuple[str, str, str]]:
    """(importing module, "path:line", imported product module) for every import statement of every product module."""
    modules = _modules()
    edges: list[tuple[str, str, str]] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != name:
                    edges.append((name, f"{path.relative_to(REPO).as_posix()}:{node.lineno}", owner))
    return edges


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in _modules()}
    for name, _where, owner in import_edges():
        graph[name].add(owner)
    return graph


def layer_violations(edges: list[tuple[str, str, str]]) -> list[str]:
    """``path:line imports target`` for each import of a layer above the importer's (FORBIDDEN_ABOVE)."""
    found = []
    for name, where, target in edges:
        above = FORBIDDEN_ABOVE.get(name.split(".")[0], ())
        if target.split(".")[0] in above:
            found.append(f"{where} imports {target}")
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; groups of more than one module (a module never imports itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 80  # every product module was read
    assert strongly_connected(graph) == []


def test_the_checker_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    graph["data_tools.config"].add("trainer.train")  # a layer pointing up closes a loop
    assert any("data_tools.config" in group and "trainer.train" in group for group in strongly_connected(graph))


def test_networks_import_no_layer_above():
    violations = [v for v in layer_violations(import_edges()) if v.startswith("networks/")]
    assert violations == [], "networks/ must import nothing of trainer/, data_tools/, webui/: " + "; ".join(violations)


def test_data_tools_import_neither_trainer_nor_webui():
    violations = [v for v in layer_violations(import_edges()) if v.startswith("data_tools/")]
    assert violations == [], "data_tools/ must import nothing of trainer/ or webui/: " + "; ".join(violations)


def test_the_layer_check_names_module_and_line():
    edges = [("networks.dvae", "networks/dvae.py:12", "trainer.errors"),
             ("data_tools.config", "data_tools/config.py:3", "webui.app"),
             ("data_tools.config", "data_tools/config.py:4", "networks.gpt_config"),
             ("trainer.run", "trainer/run.py:9", "webui.app")]
    assert layer_violations(edges) == [
        "networks/dvae.py:12 imports trainer.errors",
        "data_tools/config.py:3 imports webui.app",
        "trainer/run.py:9 imports webui.app",
    ]


def test_trainer_imports_no_demo_builder():
    violations = [v for v in layer_violations(import_edges()) if v.startswith("trainer/")]
    assert violations == [], "trainer/ must import nothing of demo/ or webui/: " + "; ".join(violations)
    assert layer_violations([("trainer.run", "trainer/run.py:5", "demo.workspace")]) == [
        "trainer/run.py:5 imports demo.workspace"]


# ----- the registry's lazy targets ----------------------------------------------------------------------------
REGISTRY_LAYER = "trainer"
DEMO_FACET = "demo"  # the entry field whose targets are the demo layer's (python -m demo builds through them)
DEMO_LAYER_ABOVE = ("webui", "app")


def layer_of(module_name: str) -> str:
    """The layer a module sits in: its top package, but a generation's demo package (``generations.<name>.demo``)
    is the demo layer."""
    parts = module_name.split(".")
    return "demo" if parts[0] == "generations" and parts[2:3] == ["demo"] else parts[0]


def lazy_targets(value: Any) -> Iterator[LazyFunction]:
    """Every ``lazy`` reference inside an entry's value: itself, a partial's function and arguments, a nested
    facts object's fields, a mapping's values, a collection's items."""
    if isinstance(value, LazyFunction):
        yield value
    elif isinstance(value, functools.partial):
        for inner in (value.func, *value.args, *value.keywords.values()):
            yield from lazy_targets(inner)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from lazy_targets(getattr(value, item.name))
    elif isinstance(value, Mapping):
        for inner in value.values():
            yield from lazy_targets(inner)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for inner in value:
            yield from lazy_targets(inner)


def registry_target_problems(entries: Iterable[Generation]) -> list[str]:
    """'<entry>: <module>.<name> <what is wrong>' for each lazy target (and ``prepare`` module) of ``entries`` that
    points above the registry's layer, does not import, or lacks the name."""
    found: list[str] = []
    for entry in entries:
        above = FORBIDDEN_ABOVE[REGISTRY_LAYER]
        targets = [(target.module, target.name, above)
                   for target in lazy_targets(dataclasses.replace(entry, **{DEMO_FACET: None}))]
        targets += [(target.module, target.name, DEMO_LAYER_ABOVE) for target in lazy_targets(entry.demo)]
        targets += [(entry.prepare, "main", above)] if entry.prepare else []
        for module_name, name, ceiling in dict.fromkeys(targets):
            where = f"{entry.name}: {module_name}.{name}"
            if layer_of(module_name) in ceiling:
                found.append(f"{where} is in a layer above the registry's ({layer_of(module_name)}/)")
                continue
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                found.append(f"{where} does not import ({exc})")
                continue
            if not hasattr(module, name):
                found.append(f"{where} is not there")
    return found


def test_every_registry_target_imports_and_sits_below_the_registry():
    assert sum(1 for entry in GENERATIONS for _ in lazy_targets(entry)) > 30  # the walk reaches the entries' code
    problems = registry_target_problems(GENERATIONS)
    assert problems == [], "the registry names code it must not:\n" + "\n".join(problems)


def test_the_target_check_finds_each_kind_of_problem():
    shipped = GENERATIONS[-1]
    assert shipped.demo is not None
    planted = shipped.renamed(name="planted", sample_plan=lazy("demo.workspace", "demo_of"),
                              evaluation_backend=lazy("generations.indextts2.demo.build", "build_demo"),
                              synthesize=functools.partial(lazy("trainer.no_such_module", "run"), 1),
                              test=dataclasses.replace(shipped.test, folder_problem=lazy("trainer.options", "nothing")),
                              prepare="webui.app",
                              demo=dataclasses.replace(shipped.demo, paths=lazy("webui.context", "is_demo_project"),
                                                       ensure=lazy("demo.workspace", "build_demo")))
    assert sorted(registry_target_problems([planted])) == sorted([
        "planted: demo.workspace.demo_of is in a layer above the registry's (demo/)",
        "planted: generations.indextts2.demo.build.build_demo is in a layer above the registry's (demo/)",
        "planted: trainer.no_such_module.run does not import (No module named 'trainer.no_such_module')",
        "planted: trainer.options.nothing is not there",
        "planted: webui.app.main is in a layer above the registry's (webui/)",
        "planted: webui.context.is_demo_project is in a layer above the registry's (webui/)",
    ])
