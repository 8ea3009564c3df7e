"""What the run plan (and so the pre-flight) says about evaluation at saves, and when it refuses the run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from generations.spec import Capability, Generation
from trainer.evaluation.errors import EvaluationError
from trainer.run_options import RunOptions, as_run_options


def evaluation_plan(opts: RunOptions | Mapping[str, Any], generation: Generation) -> tuple[bool, str]:
    """(ok, the pre-flight's line) for ``--eval-at-saves`` and ``--best-by``; not ok refuses the run.

    ``generation`` (the run's registry entry) says how its evaluation speaks, or why it cannot evaluate."""
    opts = as_run_options(opts)
    from trainer.evaluation.eval_set import EvalSetSpec, candidate

    best_by = str(opts.best_by or "val_loss")
    if not opts.eval_at_saves:
        if best_by == "val_loss":
            return True, "no evaluation at saves (--eval-at-saves measures CER, WER and speaker similarity)"
        return True, (f"best.pth follows {best_by} from python -m trainer.evaluate on this run (no evaluation at "
                      "saves); until a checkpoint is measured there is no best.pth")
    refusal = generation.refusal(Capability.EVALUATE)
    if refusal is not None or generation.speech.evaluation_speech is None:
        return False, f"--eval-at-saves: {refusal or f'{generation.name} has no evaluation'}"
    ok, speech = generation.speech.evaluation_speech(opts)
    if not ok:
        return False, speech
    if not str(opts.eval_asr or "").strip():
        return False, ("--eval-at-saves needs a speech recogniser: give --eval-asr (a CTC model folder or id, e.g. "
                       "facebook/mms-1b-all with --eval-asr-lang amh)")
    try:
        eval_set = candidate(EvalSetSpec.from_options(opts))
    except EvaluationError as exc:
        return False, f"--eval-at-saves: {exc}"
    speaker = str(opts.eval_speaker_model or "") or "none (no similarity)"
    no_audio = [v.id for v in eval_set.voices if v.audio is None]
    if generation.speech.evaluation_needs_audio and no_audio:
        return False, (f"--eval-at-saves: {generation.name} speaks from reference audio and the validation prompts "
                       "are mels: give --eval-reference audio files")
    note = (f"; voice(s) {', '.join(no_audio)} are prompt mels without audio: no similarity for them "
            "(--eval-reference gives audio)" if no_audio and opts.eval_speaker_model else "")
    return True, (f"evaluation at saves on {opts.eval_device or 'cpu'}: {eval_set.summary()}; ASR "
                  f"{opts.eval_asr}; speaker model {speaker}{speech}; best.pth by {best_by}{note}")
