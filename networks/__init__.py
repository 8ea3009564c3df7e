"""Every IndexTTS network, the bottom layer of the studio.

One module per network (GPTs of each generation and their building blocks, DVAE, vocoders, speaker encoders,
semantic codec, S2Mel, the w2v-BERT wrapper, and the fixed audio front-ends they are fed by), and one module
per model generation (``indextts15``, ``indextts2``, ``indextts25``) that says how they are assembled and loads
the real files strictly. Plain PyTorch (+ transformers where upstream uses it): no training logic, no files
but weights. Data preparation (data_tools), training and synthesis (trainer) import it; it imports none of them.
"""
