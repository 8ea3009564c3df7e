"""Temporary shim (issue 37 step B): the IndexTTS2 demo moved to ``generations.indextts2.demo.build``.

Only webui/data/prepare_v2_section.py and prepare_v25_section.py still import this name (another step moves them
into generations/<name>/ui/); the lead deletes this file when it rewrites those two imports to
``from generations.indextts2.demo.build import DemoPaths``.
"""

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths

__all__ = ["DemoV2Paths"]
