"""Checkpoint evaluation: intelligibility (CER, WER) and voice similarity of every save, on one fixed set.

    eval_set.py      the evaluation set (sentences, reference voices, seed, decoding), stored with the run
    synthesizers.py  what the backends share (each generation's own: generations.<name>.evaluation)
    scorers.py       the CTC ASR and the x-vector speaker model of data_tools, loaded once
    results.py       per-checkpoint result files beside the checkpoints, ``eval`` events, reading them back
    best.py          --best-by: which checkpoint best.pth points at, the pinned best few, the pin lock
    runner.py        measure one checkpoint / every unmeasured checkpoint of a run / follow a training run
    process.py       the trainer's side of evaluation at saves: a supervised child process fed by a pipe

CLI: ``python -m trainer.evaluate RUN_DIR`` (trainer/evaluate.py).
"""

from trainer.evaluation.errors import EvaluationError

__all__ = ["EvaluationError"]
