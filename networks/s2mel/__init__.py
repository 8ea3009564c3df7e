"""IndexTTS2's S2Mel: semantic codes (+ GPT latents) -> 80-band mel by flow matching with a DiT estimator."""
