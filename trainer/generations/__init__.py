"""The IndexTTS generations the studio knows: one registry entry each (see ``registry`` and ``spec``)."""
