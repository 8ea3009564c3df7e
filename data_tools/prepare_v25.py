"""``python -m data_tools.prepare_v25``: the command README documents and the Data tab runs; IndexTTS-2.5's
preparation itself is ``generations.indextts25.data.prepare``."""

from __future__ import annotations

from generations.indextts25.data.prepare import main

if __name__ == "__main__":
    raise SystemExit(main())
