"""``python -m demo --out DIR``: build the demo workspace (``demo.workspace.main``)."""

from demo.workspace import main

if __name__ == "__main__":
    raise SystemExit(main())
