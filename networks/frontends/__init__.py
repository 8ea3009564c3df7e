"""Fixed (weight-free or stats-only) audio front-ends the networks are fed by: resampling as upstream does it,
SeamlessM4T features, Kaldi fbank, the S2Mel log-mel. Plain PyTorch / numpy, shared by preparation and synthesis."""
