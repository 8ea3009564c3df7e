"""The speech server's parts (``python -m trainer.serve``): audio formats, voices, request slots, the web app and
the model it speaks with."""
