"""IndexTTS2's demo: ``<workspace>/v2/`` (``build``), with the rest of its tiny download folder (``synthesis``);
``python -m demo`` builds it through the entry's demo facet."""
