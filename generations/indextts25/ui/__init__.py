"""IndexTTS-2.5's web-UI pieces: its Data-tab preparation section, its Tokenizer-tab panel and its Test-tab token
coverage (named by its registry entry's ``ui`` facet)."""
