"""``python -m data_tools.prepare_v2``: the command README documents and the Data tab runs; IndexTTS2's
preparation itself is ``generations.indextts2.data.prepare``."""

from __future__ import annotations

from generations.indextts2.data.prepare import main

if __name__ == "__main__":
    raise SystemExit(main())
