"""The toy's own manifest format: a codes manifest whose fields are spelt otherwise (``format.py`` names them,
``manifest.py`` reads a line and converts IndexTTS-1.5's lines)."""
