"""The IndexTTS generations the studio knows: one registry entry each (see ``registry`` and ``spec``), and one
folder each (indextts15/, indextts2/, indextts25/) holding the entry (its ``__init__.py``) and that generation's
own code. The folder spans layers by place (tests/layers.py): the registry and the entries sit in the data tools'
layer, so they import only data_tools/, networks/ and each other; ``<gen>/data/`` sits there too, ``<gen>/demo/``
in the demo's, ``<gen>/ui/`` in the web UI's, every other module in the trainer's."""
