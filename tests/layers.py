"""The layers of the product code, one rule for tests/test_import_cycles.py and tests/test_generation_guard.py.

Bottom to top: networks/ -> data_tools/ -> trainer/ -> demo/ -> webui/ -> app.py; a module may import its own layer
and the ones below. A top-level package is one layer, but generations/ spans them (issue 37: a generation's code is
one folder), so a module there takes its layer from its path:

- the registry (``generations/__init__.py``, ``spec.py``, ``registry.py``, the shared entry fields
  ``sentencepiece_fields.py``, the entry's facets ``*_facts.py``) and each generation's entry ``generations/<gen>/__init__.py``: the data_tools layer,
  so data tools may ask the registry;
- ``generations/<gen>/data/``: the data_tools layer (a ``<gen>/dataset.py`` is the trainer's: trainer layer);
- ``generations/<gen>/demo/``: the demo layer; ``generations/<gen>/ui/``: the webui layer;
- every other module under generations/: the trainer layer.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("networks", "data_tools", "trainer", "demo", "webui", "app")  # bottom to top
PACKAGES = ("trainer", "data_tools", "webui", "networks", "demo", "generations")  # app.py besides
GENERATIONS = "generations"
REGISTRY_LAYER = "data_tools"
# The registry's own modules (an entry, generations/<gen>/__init__.py, is registry layer by its place).
REGISTRY_MODULES = frozenset({"__init__.py", "spec.py", "registry.py", "sentencepiece_fields.py"})
# A generation's subfolders that sit in a layer of their own.
SUBFOLDER_LAYERS = {"data": "data_tools", "demo": "demo", "ui": "webui"}


def path_layer(path: str) -> str:
    """The layer of the product module at ``path`` (repository-relative, ``generations/indextts25/model.py``)."""
    parts = PurePosixPath(path).parts
    if parts[0] == "app.py":
        return "app"
    if parts[0] != GENERATIONS:
        return parts[0]
    if len(parts) == 2:
        return REGISTRY_LAYER if parts[1] in REGISTRY_MODULES or parts[1].endswith("_facts.py") else "trainer"
    if len(parts) == 3 and parts[2] == "__init__.py":
        return REGISTRY_LAYER
    if len(parts) > 3 and parts[2] in SUBFOLDER_LAYERS:
        return SUBFOLDER_LAYERS[parts[2]]
    return "trainer"


@cache
def module_path(module: str) -> str:
    """The repository path of a dotted module name: its package's ``__init__.py`` where it is a folder here, else
    ``<name>.py`` (also for a module that does not exist, so a planted name has a layer)."""
    parts = module.split(".")
    if module == "app":
        return "app.py"
    if (REPO.joinpath(*parts) / "__init__.py").is_file():
        return "/".join([*parts, "__init__.py"])
    return "/".join(parts) + ".py"


def module_layer(module: str) -> str:
    return path_layer(module_path(module))


def layers_above(layer: str) -> tuple[str, ...]:
    """The layers a module of ``layer`` must never import."""
    return LAYERS[LAYERS.index(layer) + 1:]


# Registry entry fields that may name code above the trainer layer: the form and Test-tab facets (and a future ui
# field) name the web UI's, a field named for the demo names the demo builders'.
WEBUI_FIELDS = frozenset({"form", "test", "ui"})


def field_layer(field_name: str) -> str:
    """The highest layer an entry's ``field_name`` may name code in (by ``lazy`` or ``prepare``)."""
    if field_name in WEBUI_FIELDS:
        return "webui"
    if "demo" in field_name.split("_"):
        return "demo"
    # every other field the trainer layer and below: so the manifest-format facet (``generations/<gen>/data/format.py``,
    # itself in the data tools' layer) names its parsers and checker there and its item loader and dataset in the
    # trainer (``generations/<gen>/dataset.py``), never above
    return "trainer"
