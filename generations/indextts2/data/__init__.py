"""IndexTTS2's data code (the data tools' layer): its preparation from audio (``prepare``) and the networks that
preparation runs (``prepare_models``)."""
