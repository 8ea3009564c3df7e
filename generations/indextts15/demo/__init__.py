"""IndexTTS-1.5's demo: the demo workspace's own checkpoints/, tokenizers/ and data/ (``build``); ``python -m demo``
builds it through the entry's demo facet."""
