"""IndexTTS-2.5's demo: ``<workspace>/v25/`` (``build``), with the rest of its tiny download folder
(``synthesis``), and random 2.5 preparation networks for tests and benchmarks (``prep_kit``); ``python -m demo``
builds it through the entry's demo facet."""
