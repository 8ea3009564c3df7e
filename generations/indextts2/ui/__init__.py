"""IndexTTS2's web-UI pieces: its Data-tab preparation section (named by its registry entry's ``ui`` facet)."""
