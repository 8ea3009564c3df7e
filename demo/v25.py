"""Temporary shim (issue 37 step B): the IndexTTS-2.5 demo moved to ``generations.indextts25.demo.build``.

Only webui/data/prepare_v25_section.py still imports this name (another step moves it into
generations/indextts25/ui/); the lead deletes this file when it rewrites that import to
``from generations.indextts25.demo.build import DemoPaths``.
"""

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths

__all__ = ["DemoV25Paths"]
