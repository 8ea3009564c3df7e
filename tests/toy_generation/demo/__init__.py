"""The toy's demo folder (``<workspace>/toy/``), built from the IndexTTS-1.5 demo's files."""
