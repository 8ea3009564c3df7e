"""Training the S2Mel flow-matching decoder of IndexTTS2 and 2.5 (full or LoRA), kept only when it helps.

What a hub calls:
- data: ``data_tools.s2mel_clip.add_missing_s2mel_files`` (preparation), :func:`trainer.s2mel.dataset.load_clips`
  (+ ``gpt_latent_teacher_forced`` for IndexTTS2);
- training: :class:`trainer.s2mel.loop.S2MelTrainer` (``resume_if_any``, ``run(on_save=...)``,
  ``validation_loss``) with :class:`~trainer.s2mel.train_settings.S2MelTrainSettings`;
- use: :mod:`trainer.s2mel.export` (stock ``s2mel.pth`` with adapters merged, adapter only, the trained model
  for synthesis), :func:`trainer.s2mel.keep.decide_adapter`, :mod:`trainer.s2mel.checkpoint` (kind, inspect).
"""
