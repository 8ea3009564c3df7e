"""Hubs ask the generation registry, never branch (issue 27): no product module outside the registry and the
generation packages compares against a generation's version string or name, keeps a table keyed by them, or
tells generations apart by the tokenizer's type, nor spells a generation's demo folder as a path (``"v2/runs"``,
``workspace / "v25"``: ask ``registry.demo_folders``). As tests/test_import_cycles.py guards the layers, this reads
every module of networks/, data_tools/, trainer/, webui/, generations/ and app.py (AST) and names each offence by
path:line; generations/ itself may name its generations.

A generation is one folder (issue 37): generations/<name>/ holds its entry (``__init__.py``) and all of its code,
whatever the layer (tests/layers.py: ``data/`` the data tools' layer, ``demo/`` the demo's, ``ui/`` the web UI's,
the rest the trainer's), as torchtitan keeps ``models/<name>/``. Nor does a shared module tell manifest formats or
text tables apart by a generation's constant (``FORMAT_V25``, ``ID_15``), by a class of a generation's folder
(``isinstance(item, PairItemV25)``) or by a table's suffix (``.tiktoken``, ``.model``): it asks
``generations.registry.format_of`` / ``format_of_line`` and the entry's ``reads_tokenizer``. In the layers the naming rule covers (outside
generations/: trainer/, webui/, demo/, data_tools/), no file is named for a generation (``v25.py``, ``data_v25.py``,
``pipeline_v2.py``, ``prepare_v2_section.py``...) and no function or class defined there is (``sample_plan_v15``,
``V2Backend``, ``SynthesizerV25``, ``indextts2_folder``...): a generation's code lives in its folder under plain
names; shared engines keep neutral ones. The one allowance is ``USER_COMMANDS``: files whose name is a command users
type. networks/ keeps its network modules by design.
"""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

from generations.registry import GENERATIONS
from tests.layers import REPO, path_layer

PACKAGES = ("networks", "data_tools", "trainer", "webui", "generations")
# The registry and the one recognition rule: the only places that may name a generation's version.
ALLOWED = ("generations/", "networks/generation_rule.py")
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
# A generation marker in a file, function or class name: v15 / v2 / v25 as a snake_case word (``data_v25``,
# ``v2_speech``), V15 / V2 / V25 closing a CamelCase word (``V2Backend``, ``SynthesizerV25``), 15 / 25 glued to a
# word (``MelSettings25``, ``gpt25``), or the generation's name (``indextts2``, ``IndexTTS25``).
GENERATION_MARKER = re.compile(r"(?:^|_)[vV](?:15|2|25)(?:_|$)|V(?:15|2|25)(?=[A-Z_]|$)|(?<=[a-z])(?:15|25)(?=[A-Z_]|$)"
                               r"|(?i:indextts_?(?:15|2|25))")
NAMING_SCOPE = ("trainer", "webui", "demo", "data_tools")  # the layers the naming rule covers (outside generations/)
# Commands README documents and users type, each a few lines handing over to its generation's folder
# (``python -m data_tools.prepare_v2`` runs generations/indextts2/data/prepare.py): their file names keep the
# generation's marker so no user's command line breaks; what they define is still held to the rule.
USER_COMMANDS = frozenset({"data_tools/prepare_v2.py", "data_tools/prepare_v25.py"})
GENERATION_PACKAGES = "generations/"


def _names_generation(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        return text in VERSION_STRINGS or text.startswith(NAME_PREFIXES) or text.startswith("2.5")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_generation(element) for element in node.elts)
    return False


# Issue 37: a name that stands for a generation (``FORMAT_V25``, ``ID_15``, ``V2_MARK_FIELDS``, ``PairItemV25``)
# is never compared with, ``in``-tested on or a table's key outside generations/: ask the entry or the format.
GENERATION_CONSTANT = re.compile(r"^ID_(?:15|2|25)$")
# Table-file suffixes: telling a SentencePiece model from IndexTTS-2.5's table is the entries' ``reads_tokenizer``.
TABLE_SUFFIXES = frozenset({".tiktoken", ".model"})
GENERATION_FOLDERS = frozenset(path.parent.name for path in (REPO / "generations").glob("*/__init__.py"))


def _stands_for_generation(node: ast.AST) -> bool:
    """A name (or attribute, or a tuple/list/set of them) that stands for one generation."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_stands_for_generation(element) for element in node.elts)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name is not None and bool(GENERATION_CONSTANT.match(name) or GENERATION_MARKER.search(name))


def _generation_imports(tree: ast.AST) -> set[str]:
    """The local names a module binds to something of a generation's folder (``from generations.indextts25.dataset
    import PairItemV25``, ``from generations.indextts25.data import manifest as m``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "generations" and len(parts) > 1 and parts[1] in GENERATION_FOLDERS:
                names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if alias.asname and parts[0] == "generations" and len(parts) > 1 and parts[1] in GENERATION_FOLDERS:
                    names.add(alias.asname)
    return names


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(inner, ast.Name) and inner.id in names for inner in ast.walk(node))


def _names_one(node: ast.AST, names: set[str]) -> bool:
    """The node is one of ``names`` (or a tuple/list/set holding one): ``preset == GPU80``, ``x in (A, B)``."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_one(element, names) for element in node.elts)
    return isinstance(node, ast.Name) and node.id in names


def _equates_with(node: ast.Compare, names: set[str]) -> bool:
    """An equality or identity test with one of ``names``, or an ``in`` test whose element is one or whose literal
    container holds one (``preset == GPU80``, ``x in (GPU80, LORA24)``); an order test (``rank < BASE_COUNT``) or a
    lookup in a generation's collection (``code in LANGUAGE_CODES``) tells no generations apart."""
    sides = [node.left, *node.comparators]
    for (left, right), op in zip(pairwise(sides), node.ops, strict=True):
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) and (_names_one(left, names)
                                                                       or _names_one(right, names)):
            return True
        if isinstance(op, (ast.In, ast.NotIn)) and (_names_one(left, names) or (
                isinstance(right, (ast.Tuple, ast.List, ast.Set)) and _names_one(right, names))):
            return True
    return False


def _table_suffix(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in TABLE_SUFFIXES
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(map(_table_suffix, node.elts))


def _tests_table_suffix(node: ast.AST) -> bool:
    """``x.endswith(".tiktoken")``, ``path.suffix == ".model"``: a table's kind told by its suffix."""
    if isinstance(node, ast.Compare):
        return any(map(_table_suffix, [node.left, *node.comparators]))
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith") and bool(node.args) and _table_suffix(node.args[0]))


def offences(source: str, where: str) -> list[str]:
    """Each generation branch of one module's source, as 'where:line: what'."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source, where)
    generation_names = _generation_imports(tree)
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Compare) and any(map(_names_generation, [node.left, *node.comparators])):
            what = "compares against a generation's version or name"
        elif isinstance(node, ast.Compare) and any(map(_stands_for_generation, [node.left, *node.comparators])):
            what = "compares with a name that stands for a generation (ask the registry entry or its format)"
        elif isinstance(node, ast.Compare) and _equates_with(node, generation_names):
            what = "compares with a name of a generation's folder (a preset, a format, an id: ask the entry)"
        elif isinstance(node, ast.Dict) and any(key is not None and _stands_for_generation(key) for key in node.keys):
            what = "keys a table by a name that stands for a generation (ask the registry entry or its format)"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2 and _uses(node.args[1], generation_names)):
            what = "tells generations apart by a class of a generation's folder"
        elif _tests_table_suffix(node):
            what = "tells text tables apart by their suffix (ask the entries' reads_tokenizer)"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and node.args and _names_generation(node.args[0])):
            what = "tests a string for a generation's version"
        elif isinstance(node, ast.Dict) and sum(key is not None and _names_generation(key) for key in node.keys) >= 2:
            what = "keeps a table keyed by generation versions"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2 and "Tokenizer" in ast.unparse(node.args[1])):
            what = "tells generations apart by the tokenizer's type"
        elif _spells_demo_folder(node):
            what = "spells a generation's demo folder (ask generations.registry.demo_folders)"
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
    assert found == [], "ask the generation's registry entry (generations.registry) instead:\n" + "\n".join(found)


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


def test_the_guard_finds_each_kind_of_format_branch():
    planted = '''
from data_tools.manifest import FORMAT_V2, FORMAT_V25
from generations.indextts25.dataset import PairItemV25
from generations.indextts25.data import manifest as indextts25_manifest
from networks.generation_rule import ID_15
if fmt in (FORMAT_V2, FORMAT_V25):
    pass
same = fmt == FORMAT_V25
parsers = {FORMAT_V2: parse_pair_line, "other": parse}
is_pair = isinstance(items[0], PairItemV25)
is_entry = isinstance(entry, indextts25_manifest.PairEntry)
not_15 = project.generation != ID_15
table_25 = str(tokenizer).endswith(".tiktoken")
sentencepiece = path.suffix == ".model"
either = name.endswith((".model", ".bin"))
fine = fmt == found.id and isinstance(entry, ManifestLine) and entry.format in formats() and "x".endswith(".npy")
also_fine = {found.id: parse, "v": 1} and longest_seconds(max_codes, generation_id(cfg))
from generations.indextts25.presets import GPU80, LANGUAGE_CODES, BASE_RANK_COUNT
lora_preset = preset in (GPU80, "other")
fine_too = code in LANGUAGE_CODES and rank < BASE_RANK_COUNT
'''
    lines = [line.split(": ", 1)[0] for line in offences(planted, "planted.py")]
    assert lines == [f"planted.py:{line}" for line in [*range(6, 16), 19] if line != 7]


def generation_named(files: dict[str, str]) -> list[str]:
    """Each file of a layer the rule covers, outside generations/, named for a generation ('path';
    ``USER_COMMANDS`` excepted), and each function or class defined in one whose name is ('path:line: name');
    ``files``: repository path -> source."""
    found: list[str] = []
    for where, source in sorted(files.items()):
        if path_layer(where) not in NAMING_SCOPE or where.startswith(GENERATION_PACKAGES):
            continue
        if GENERATION_MARKER.search(Path(where).stem) and where not in USER_COMMANDS:
            found.append(f"{where}: a file named for a generation")
        for node in ast.walk(ast.parse(source, where)):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and GENERATION_MARKER.search(node.name)):
                found.append(f"{where}:{node.lineno}: {node.name} is named for a generation")
    return found


def test_no_file_or_definition_outside_the_generation_packages_is_named_for_one():
    files = {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
             for scope in NAMING_SCOPE for path in sorted((REPO / scope).rglob("*.py"))}
    assert all(sum(where.startswith(f"{scope}/") for where in files) > 5 for scope in NAMING_SCOPE)  # each was read
    assert (REPO / GENERATION_PACKAGES).is_dir() and all((REPO / command).is_file() for command in USER_COMMANDS)
    found = generation_named(files)
    assert found == [], ("move it into its generation's package (generations/<name>/: web-UI pieces in ui/, demo "
                         "code in demo/) under a plain name, or give a shared engine a neutral one:\n"
                         + "\n".join(found))


def test_the_naming_guard_finds_each_kind_of_generation_name():
    planted = {
        "trainer/v25.py": "",
        "trainer/data_v25.py": "",
        "trainer/synthesis/pipeline_v2.py": "",
        "trainer/samples_v15.py": "",
        "trainer/indextts2_kit.py": "",
        "trainer/samples.py": """
def sample_plan_v15(): pass
def v2_speech(): pass
class V2Backend: pass
class _V25Speaker: pass
class SynthesizerV25: pass
class MelSettings25: pass
def load_gpt25_checkpoint(): pass
def indextts2_folder(): pass
async def speak_v2(): pass
def sample_plan(): pass
class S2MelSynthesizer: pass
def w2v_bert_of(): pass
def conv2d_block(): pass
def sha256_file(): pass
def top_k_of(): pass
""",
        "trainer/synthesis/s2mel_pipeline.py": "class Fine: pass",
        "generations/indextts25/model.py": "def is_v25_table(): pass",  # inside its package: allowed
        "generations/indextts25/ui/section_v25.py": "def build_v25(): pass",  # its web UI, in its folder: allowed
        "demo/v25_synthesis.py": "def synthesis_ready_v25(): pass\nclass DemoV2Paths: pass\ndef build_demo(): pass",
        "demo/paired_paths.py": "class PairedDemoPaths: pass",
        "webui/data/prepare_v25_section.py": "def build_v25(): pass",
        "webui/testing/text_coverage.py": "def is_v25_table(): pass\ndef untrained_marks(): pass",
        "data_tools/check_pairs_v25.py": "",
        "data_tools/tokenizer/tiktoken25.py": "class Tiktoken25: pass",
        "data_tools/item_files.py": "class PairFactsV25: pass\ndef inspect_pair(): pass",
        "data_tools/prepare_v2.py": "from generations.indextts2.data.prepare import main",  # a user's command
        "data_tools/prepare_v25.py": "def prepare_v25(): pass",  # a user's command, but its definitions are held
        "data_tools/prepare_v15.py": "",  # not one of the commands
    }
    found = generation_named(planted)
    assert found == [
        "data_tools/check_pairs_v25.py: a file named for a generation",
        "data_tools/item_files.py:1: PairFactsV25 is named for a generation",
        "data_tools/prepare_v15.py: a file named for a generation",
        "data_tools/prepare_v25.py:1: prepare_v25 is named for a generation",
        "data_tools/tokenizer/tiktoken25.py: a file named for a generation",
        "data_tools/tokenizer/tiktoken25.py:1: Tiktoken25 is named for a generation",
        "demo/v25_synthesis.py: a file named for a generation",
        "demo/v25_synthesis.py:1: synthesis_ready_v25 is named for a generation",
        "demo/v25_synthesis.py:2: DemoV2Paths is named for a generation",
        "trainer/data_v25.py: a file named for a generation",
        "trainer/indextts2_kit.py: a file named for a generation",
        "trainer/samples.py:2: sample_plan_v15 is named for a generation",
        "trainer/samples.py:3: v2_speech is named for a generation",
        "trainer/samples.py:4: V2Backend is named for a generation",
        "trainer/samples.py:5: _V25Speaker is named for a generation",
        "trainer/samples.py:6: SynthesizerV25 is named for a generation",
        "trainer/samples.py:7: MelSettings25 is named for a generation",
        "trainer/samples.py:8: load_gpt25_checkpoint is named for a generation",
        "trainer/samples.py:9: indextts2_folder is named for a generation",
        "trainer/samples.py:10: speak_v2 is named for a generation",
        "trainer/samples_v15.py: a file named for a generation",
        "trainer/synthesis/pipeline_v2.py: a file named for a generation",
        "trainer/v25.py: a file named for a generation",
        "webui/data/prepare_v25_section.py: a file named for a generation",
        "webui/data/prepare_v25_section.py:1: build_v25 is named for a generation",
        "webui/testing/text_coverage.py:1: is_v25_table is named for a generation",
    ]
