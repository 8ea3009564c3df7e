"""Base models from the Hugging Face Hub, and publishing an export back to it (``python -m trainer.models``).

- ``catalog``: what each generation (and each suggested speech model) needs, as data;
- ``hub``: what the Hub says about it now (commits, real sizes, checksums, licence tags);
- ``fetch``: resumable, checksum-verified downloads into upstream's folder layout, recorded in
  ``hub_download.json`` beside the files;
- ``record_file`` / ``record``: that record, and ``downloaded_model_dirs(workspace)`` for the studio's path fields;
- ``integrity``: whether a folder still matches its record (pre-flight, offline check, model lists);
- ``publish``: an export uploaded to a (private by default) model repository.
"""
