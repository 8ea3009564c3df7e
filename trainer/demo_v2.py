"""Transitional: ``demo.v2`` under its old path, for webui/tab_testing.py until it imports ``demo.v2`` itself.

The demo builders live in the top-level ``demo`` package; nothing else in trainer/ imports it (remove this file
once tab_testing.py's import is changed).
"""

from demo.v2 import DemoV2Paths

__all__ = ["DemoV2Paths"]
