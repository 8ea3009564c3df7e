"""No import cycles (issue 13): the static import graph of every product module, function-level imports included.

Python resolves a cycle at run time only when the import order happens to be right, and a function-level import
hides one until that function runs. This reads every ``import`` statement (module level and inside functions) of
app.py, demo/, trainer/, data_tools/, webui/, networks/ and generations/ and fails on any strongly connected group
of modules, naming it. A ``from package import name`` inside the package counts as an edge to the package's
``__init__``.

It also holds the layers to their order (app.py -> webui/ -> demo/ -> trainer/ -> data_tools/ -> networks/): no
module imports a layer above its own; a failure names module:line. A module of generations/ takes its layer from
its path (tests/layers.py: the registry and each entry sit in the data_tools layer, a generation's data/, demo/
and ui/ folders in theirs, the rest in the trainer layer). The generation registry names its code by module-name
strings (``lazy(module, name)``, ``prepare``) that no import statement shows: each entry's targets must import,
have the name, and sit in a layer the field naming them may reach (tests/layers.py's ``field_layer``).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from generations.registry import GENERATIONS
from generations.spec import Generation, LazyFunction, lazy
from tests.layers import LAYERS, PACKAGES, REPO, field_layer, layers_above, module_layer, path_layer

# Each layer and the layers above it, which it must never import (a function-level import counts too).
FORBIDDEN_ABOVE = {layer: layers_above(layer) for layer in LAYERS}


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
    for _name, where, target in edges:
        if module_layer(target) in FORBIDDEN_ABOVE[path_layer(where.rpartition(":")[0])]:
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


def _violations_in(folder: str) -> list[str]:
    return [v for v in layer_violations(import_edges()) if v.startswith(folder)]


def test_networks_import_no_layer_above():
    violations = _violations_in("networks/")
    assert violations == [], "networks/ must import nothing of trainer/, data_tools/, webui/: " + "; ".join(violations)


def test_data_tools_import_neither_trainer_nor_webui():
    violations = _violations_in("data_tools/")
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
    violations = _violations_in("trainer/")
    assert violations == [], "trainer/ must import nothing of demo/ or webui/: " + "; ".join(violations)
    assert layer_violations([("trainer.run", "trainer/run.py:5", "demo.workspace")]) == [
        "trainer/run.py:5 imports demo.workspace"]


def test_demo_and_webui_import_no_layer_above():
    violations = _violations_in("demo/") + _violations_in("webui/")
    assert violations == [], "demo/ must import nothing of webui/ or app.py, webui/ nothing of app.py: " + "; ".join(
        violations)


def test_each_generations_module_imports_no_layer_above_its_own():
    violations = _violations_in("generations/")
    assert violations == [], ("a module of generations/ imports above its layer (tests/layers.py): "
                              + "; ".join(violations))


def test_a_generations_module_has_the_layer_of_its_place():
    assert [path_layer(path) for path in (
        "generations/__init__.py", "generations/spec.py", "generations/registry.py",
        "generations/sentencepiece_fields.py", "generations/indextts25/__init__.py",
        "generations/indextts25/data/pairs.py", "generations/indextts25/demo/build.py",
        "generations/indextts25/ui/section.py", "generations/indextts25/dataset.py", "generations/indextts25/model.py",
        "generations/folders.py", "generations/sentencepiece_kit.py", "trainer/run.py", "app.py",
    )] == ["data_tools"] * 6 + ["demo", "webui", "trainer", "trainer", "trainer", "trainer", "trainer", "app"]
    assert module_layer("generations.indextts2") == "data_tools"  # a package: its __init__.py, the entry
    assert module_layer("generations.indextts2.samples") == "trainer"
    # the registry's layer: data tools may ask it, a registry module may not import the trainer
    assert layer_violations([("data_tools.check", "data_tools/check.py:3", "generations.registry"),
                             ("generations.registry", "generations/registry.py:7", "trainer.samples"),
                             ("generations.indextts2", "generations/indextts2/__init__.py:9", "trainer.samples"),
                             ("generations.indextts2.samples", "generations/indextts2/samples.py:4", "trainer.samples"),
                             ("generations.x.data.rows", "generations/x/data/rows.py:2", "generations.x.model"),
                             ("generations.x.demo.build", "generations/x/demo/build.py:2", "generations.x.ui.tab"),
                             ]) == [
        "generations/registry.py:7 imports trainer.samples",
        "generations/indextts2/__init__.py:9 imports trainer.samples",
        "generations/x/data/rows.py:2 imports generations.x.model",
        "generations/x/demo/build.py:2 imports generations.x.ui.tab",
    ]


# ----- the registry's lazy targets ----------------------------------------------------------------------------
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
    sits above the layer its field may reach (``field_layer``), does not import, or lacks the name."""
    found: list[str] = []
    for entry in entries:
        targets = [(item.name, target.module, target.name) for item in dataclasses.fields(entry)
                   for target in lazy_targets(getattr(entry, item.name))]
        targets += [("prepare", entry.prepare, "main")] if entry.prepare else []
        for field_name, module_name, name in dict.fromkeys(targets):
            where = f"{entry.name}: {module_name}.{name}"
            reach = field_layer(field_name)
            if module_layer(module_name) in FORBIDDEN_ABOVE[reach]:
                found.append(f"{where} is in the {module_layer(module_name)} layer, above what {field_name} may "
                             f"name (the {reach} layer and below)")
                continue
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                found.append(f"{where} does not import ({exc})")
                continue
            if not hasattr(module, name):
                found.append(f"{where} is not there")
    return found


def test_every_registry_target_imports_and_sits_where_its_field_may_reach():
    assert sum(1 for entry in GENERATIONS for _ in lazy_targets(entry)) > 30  # the walk reaches the entries' code
    problems = registry_target_problems(GENERATIONS)
    assert problems == [], "the registry names code it must not:\n" + "\n".join(problems)


def test_each_field_reaches_its_layer():
    assert [field_layer(name) for name in ("form", "test", "ui", "demo", "demo_builder", "build_demo", "speech",
                                           "export", "s2mel", "prepare", "manifest_format")] == (
        ["webui"] * 3 + ["demo"] * 3 + ["trainer"] * 5)


def test_the_target_check_finds_each_kind_of_problem():
    shipped = GENERATIONS[-1]
    assert shipped.demo is not None and shipped.export is not None
    speech = dataclasses.replace(shipped.speech, sample_plan=lazy("demo.workspace", "demo_of"),
                                 evaluation_backend=lazy("generations.indextts2.demo.build", "build_demo"),
                                 synthesize=functools.partial(lazy("trainer.no_such_module", "run"), 1))
    planted = shipped.renamed(name="planted", speech=speech,
                              test=dataclasses.replace(shipped.test, folder_problem=lazy("trainer.options", "nothing"),
                                                       w2v_bert_places=(lazy("webui.dataclass_json", "from_json"),
                                                                        lazy("app", "main"))),
                              export=dataclasses.replace(shipped.export,
                                                         build=lazy("generations.indextts25.ui.no_such_panel", "build")),
                              prepare="webui.app",
                              demo=dataclasses.replace(shipped.demo, paths=lazy("webui.context", "is_demo_project"),
                                                       ensure=lazy("demo.workspace", "build_demo")))
    assert sorted(registry_target_problems([planted])) == sorted([
        "planted: demo.workspace.demo_of is in the demo layer, above what speech may name (the trainer layer "
        "and below)",
        "planted: generations.indextts2.demo.build.build_demo is in the demo layer, above what speech may "
        "name (the trainer layer and below)",
        "planted: trainer.no_such_module.run does not import (No module named 'trainer.no_such_module')",
        "planted: trainer.options.nothing is not there",
        "planted: app.main is in the app layer, above what test may name (the webui layer and below)",
        "planted: generations.indextts25.ui.no_such_panel.build is in the webui layer, above what export may name "
        "(the trainer layer and below)",
        "planted: webui.app.main is in the webui layer, above what prepare may name (the trainer layer and below)",
        "planted: webui.context.is_demo_project is in the webui layer, above what demo may name (the demo layer and "
        "below)",
    ])  # the test facet may name the web UI, the demo facet the demo layer (demo.workspace.build_demo): no problem
