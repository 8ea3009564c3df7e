"""IndexTTS-2.5's data code (the data tools' layer): its paired manifest (``manifest``) and that manifest's checker
(``check``), its tiktoken table (``tiktoken_table``) and text front-end (``text_table``), and its preparation from
audio (``prepare``) with the networks it runs (``prepare_models``)."""
