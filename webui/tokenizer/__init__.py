"""The Tokenizer tab: train, extend and verify tokenizers."""
