"""The toy codes manifest: one JSON object per line, IndexTTS-1.5's codes entry under other field names.

- ``uid`` (str, required): unique utterance id;
- ``sentence`` (str, required): the transcript;
- ``tokens_file`` (str, required): path to an ``.npy`` of integer DVAE codes;
- ``voice_file`` (str, required): the speaker prompt, an ``.npy`` log-mel or an audio file;
- ``talker``, ``lang`` (str) and ``seconds`` (float): optional.

Relative paths are resolved against the manifest's folder. The items and the dataset are IndexTTS-1.5's (a parsed
line is its ``ManifestEntry``), so only the reading of a line is the toy's own.
"""

from __future__ import annotations

from generations.indextts15.data.format import CODES
from generations.spec import lazy

FORMAT_ID = "toy-codes"
REQUIRED_FIELDS = ("uid", "sentence", "tokens_file", "voice_file")
OPTIONAL_FIELDS = ("talker", "lang")
DURATION_FIELD = "seconds"
PATH_FIELDS = ("tokens_file", "voice_file")
MARKS = ("tokens_file",)  # a toy line names its codes file by this field (a 1.5 line by ``codes``)
FIELDS_HINT = "toy codes manifests (uid, sentence, tokens_file, voice_file)"

TOY_FORMAT = CODES.renamed(
    id=FORMAT_ID, name="a toy codes manifest", marks=MARKS, path_fields=PATH_FIELDS,
    parse_object=lazy("tests.toy_generation.data.manifest", "parse_toy_object"),
    text_field="sentence", language_field="lang",
)
