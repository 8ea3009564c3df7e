"""Hubs ask the generation registry, never branch (issue 27): no product module outside the registry and the
generation packages compares against a generation's version string or name, keeps a table keyed by them, or
tells generations apart by the tokenizer's type, nor spells a generation's demo folder as a path (``"v2/runs"``,
``workspace / "v25"``: ask ``registry.demo_folders``). As tests/test_import_cycles.py guards the layers, this reads
every module of networks/, data_tools/, trainer/, webui/ and app.py (AST) and names each offence by path:line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from trainer.generations.registry import GENERATIONS

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("networks", "data_tools", "trainer", "webui")
# The registry and the one recognition rule: the only places that may name a generation's version.
ALLOWED = ("trainer/generations/", "networks/generation_rule.py")
VERSION_STRINGS = {"1.5", "2", "2.5", "2.0", "v1.5", "v2", "v2.5"}
NAME_PREFIXES = ("IndexTTS-1.5", "IndexTTS2", "IndexTTS-2.5", "IndexTTS 1.5", "IndexTTS 2")
# The demos' own folders in a workspace (the one at the workspace's root has no name to spell).
DEMO_FOLDERS = tuple(entry.demo_folder for entry in GENERATIONS if entry.demo_folder)


def _spells_demo_folder(node: ast.AST) -> bool:
    """A path through a demo's folder: a string starting ``<folder>/`` or ``something / "<folder>"``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(tuple(f"{folder}/" for folder in DEMO_FOLDERS))
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
            and node.right.value in DEMO_FOLDERS)


def _names_generation(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        return text in VERSION_STRINGS or text.startswith(NAME_PREFIXES) or text.startswith("2.5")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_generation(element) for element in node.elts)
    return False


def offences(source: str, where: str) -> list[str]:
    """Each generation branch of one module's source, as 'where:line: what'."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, where)):
        what = None
        if isinstance(node, ast.Compare) and any(map(_names_generation, [node.left, *node.comparators])):
            what = "compares against a generation's version or name"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and node.args and _names_generation(node.args[0])):
            what = "tests a string for a generation's version"
        elif isinstance(node, ast.Dict) and sum(key is not None and _names_generation(key) for key in node.keys) >= 2:
            what = "keeps a table keyed by generation versions"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2 and "Tokenizer" in ast.unparse(node.args[1])):
            what = "tells generations apart by the tokenizer's type"
        elif _spells_demo_folder(node):
            what = "spells a generation's demo folder (ask trainer.generations.registry.demo_folders)"
        if what:
            found.append((node.lineno, f"{where}:{node.lineno}: {what}"))
    return [text for _line, text in sorted(found)]


def product_files() -> list[Path]:
    files = [REPO / "app.py"]
    for package in PACKAGES:
        files += sorted((REPO / package).rglob("*.py"))
    return files


def test_hubs_never_branch_on_a_generation():
    checked, found = 0, []
    for path in product_files():
        where = path.relative_to(REPO).as_posix()
        if where.startswith(ALLOWED):
            continue
        checked += 1
        found += offences(path.read_text(encoding="utf-8"), where)
    assert checked > 200  # every product module was read
    assert all((REPO / place).exists() for place in ALLOWED)  # the allowance names real places
    assert found == [], "ask the generation's registry entry (trainer.generations) instead:\n" + "\n".join(found)


def test_the_guard_finds_a_planted_branch_of_each_kind():
    planted = '''
if variant.version == "2.5":
    pass
wanted = "x" if version in ("2", "2.5") else "y"
ok = declared.startswith("2.5")
NAMES = {"1.5": "a", "2": "b"}
is_table = isinstance(tokenizer, TextTokenizerV25)
label = "IndexTTS2" != name
fine = mode == "campplus" and rate == 2
RUN_ROOTS = ("runs", "v25/runs")
runs = workspace / "v2" / "runs"
also_fine = ("v2", workspace / "runs", "v2.5/x")
'''
    lines = [line.split(": ", 1)[0] for line in offences(planted, "planted.py")]
    assert lines == ["planted.py:2", "planted.py:4", "planted.py:5", "planted.py:6", "planted.py:7", "planted.py:8",
                     "planted.py:10", "planted.py:11"]
