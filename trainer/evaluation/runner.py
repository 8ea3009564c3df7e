"""Measure checkpoints: speak the evaluation set, transcribe it, compare voices, record the scores.

    evaluator = Evaluator(settings, eval_set, scorer)
    evaluator.evaluate_run()            # every model_step file not yet measured (oldest first), and the base
    evaluator.follow(sys.stdin)         # the trainer's saves, one step number per line, until end of input

For each checkpoint: every sentence is spoken in every reference voice with each of the eval set's seeds
(fixed decoding; beam search by default), transcribed by the CTC recogniser, scored with CER and WER after
the language's scoring normaliser (``data_tools.scoring``) over the whole set, and each clip's x-vector is
compared with its voice's reference audio (mean cosine). Every item (text x voice x seed) keeps its error
counts, so two checkpoints compare item by item with paired bootstrap intervals (``stats``): the result
carries each score's interval and the difference against the base model and against the best so far. The
clips of the first seed are kept under ``<run>/eval/audio/<model>/`` for the listening page. Each result
carries the checkpoint's ``health`` (``trainer.evaluation.health``: runaway items, speaking rate against the
prepared data's real clips, whether a LoRA adapter changes anything, the differences against zero-shot); a
checkpoint whose health disqualifies it is never best.pth. The result
goes to ``model_step<N>.eval.json`` and an ``eval`` event (``trainer.evaluation.results``); with
``--best-by cer|sim`` best.pth then follows the rule of ``trainer.evaluation.best`` and the event says why.
A checkpoint whose result matches its identity and the eval set is skipped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import UsageError
from trainer.evaluation.audio_store import save_clips
from trainer.evaluation.backend_choice import synthesis_backend
from trainer.evaluation.best import BestRule, Decision, apply_best, base_result, best_of, pin_lock, replay
from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.eval_set import EvalSet, Sentence
from trainer.evaluation.health import (
    ADAPTER_PROBE_ITEMS,
    RealSpeech,
    adapter_of,
    adapter_weights_zero,
    generation_fields,
    health_of,
    real_speech,
    same_speech_without_adapter,
    with_zero_shot,
)
from trainer.evaluation.results import (
    append_event,
    base_result_path,
    checkpoint_identity,
    event_fields,
    is_measured,
    metric_text,
    result_path,
    scores_line,
    write_result,
)
from trainer.evaluation.scorers import Scorer
from trainer.evaluation.stats import METRICS, compare, interval_of
from trainer.evaluation.synthesizers import SynthesisBackend


@dataclass
class EvalSettings:
    run_dir: Path
    config: Path
    tokenizer: Path
    vocoder: Path | None
    version: str  # the generation id: its registry entry's evaluation backend speaks
    device: str = "cpu"
    best_by: str = "val_loss"
    base_checkpoint: Path | None = None  # measured once when given
    model_dir: Path | None = None  # IndexTTS2: the download folder (None: the folder of config, when it is one)
    w2v_bert: str | None = None  # IndexTTS2: a w2v-BERT folder or id (None: the folder's w2v-bert-2.0/)
    cer_limit: float = 0.02  # best-by: CER no more than this above the best so far's
    sim_limit: float = 0.03  # best-by: SIM no more than this below the base model's
    keep_clips: bool = True  # keep the first seed's clips for the listening page
    floor_manifests: list[str] = field(default_factory=list)  # held-out manifests: the recogniser's floor
    real_manifests: list[str] = field(default_factory=list)  # the prepared data: the speakers' real rate and length

    @property
    def rule(self) -> BestRule:
        return BestRule(self.best_by, self.cer_limit, self.sim_limit)


def _mean(values: Iterable[float]) -> float | None:
    kept = [v for v in values if isinstance(v, float) and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def _counts(rates: Any) -> tuple[int, int]:
    """(errors, reference length) of one utterance's ErrorRates."""
    return rates.substitutions + rates.deletions + rates.insertions, rates.reference_length


class Evaluator:
    def __init__(self, settings: EvalSettings, eval_set: EvalSet, scorer: Scorer,
                 backend: SynthesisBackend | None = None, say: Callable[[str], None] = print) -> None:
        self.settings, self.eval_set, self.scorer, self.say = settings, eval_set, scorer, say
        self._backend = backend
        self._real: tuple[RealSpeech | None] | None = None

    @property
    def backend(self) -> SynthesisBackend:
        if self._backend is None:
            s = self.settings
            self._backend = synthesis_backend(s.version, s.config, s.tokenizer, s.vocoder, s.device,
                                              self.eval_set.language, model_dir=s.model_dir, w2v_bert=s.w2v_bert)
        return self._backend

    # ----- one checkpoint --------------------------------------------------------------------------

    def measure(self, checkpoint: Path, model: str = "checkpoint") -> dict[str, Any]:
        """Speak, transcribe and compare with ``checkpoint``; the result (nothing written)."""
        from trainer.checkpoints.format import CheckpointError
        from trainer.checkpoints.metadata import read_metadata
        from trainer.checkpoints.store import step_of

        started = time.perf_counter()
        asr0, speaker0 = self.scorer.seconds["asr"], self.scorer.seconds["speaker"]
        identity = checkpoint_identity(checkpoint)
        try:
            meta = read_metadata(checkpoint)
            step, epoch = meta.step or 0, meta.epoch or 0
        except CheckpointError:
            step, epoch = step_of(Path(checkpoint)) or 0, 0
        synthesis = time.perf_counter()
        speaker = self.backend.for_checkpoint(Path(checkpoint), base=model == "base")
        groups = [(self.eval_set.language, self.eval_set.sentences)]
        if self.eval_set.second_sentences:
            groups.append((self.eval_set.second_language, self.eval_set.second_sentences))
        seeds = self.eval_set.all_seeds
        clips: list[list[list[list[np.ndarray]]]] = []  # [group][seed][voice][sentence]
        generated: list[dict[str, Any]] = []  # per item, in the items' order: what generation did
        first_codes: list[tuple[np.ndarray, bool]] | None = None  # the first voice and seed's, for the adapter
        for language, sentences in groups:
            group_clips = []
            for seed in seeds:
                seed_clips = []
                for voice in self.eval_set.voices:
                    seed_clips.append(speaker.speak([s.text for s in sentences], self.eval_set.path_of(voice.prompt),
                                                    self.eval_set.decode_settings(seed), language))
                    codes = getattr(speaker, "generated", None) or []
                    first_codes = codes if first_codes is None else first_codes
                    generated += [generation_fields(*codes[k]) if len(codes) == len(sentences) else {}
                                  for k in range(len(sentences))]
                group_clips.append(seed_clips)
            clips.append(group_clips)
        adapter = None if model == "base" else self._adapter_health(Path(checkpoint), groups[0], clips[0][0][0],
                                                                   first_codes)
        synthesis = time.perf_counter() - synthesis
        rate = self.backend.sample_rate
        if self.settings.keep_clips:
            label = "base" if model == "base" else f"model_step{step}"
            save_clips(self.settings.run_dir, label, self.eval_set, groups, [group[0] for group in clips], rate)
        scores = [self._merge_seeds([self._score_group(language, sentences, seed_clips, rate, seed)
                                     for seed, seed_clips in zip(seeds, group_clips)])
                  for (language, sentences), group_clips in zip(groups, clips)]
        main = scores[0]
        seconds = {"synthesis": round(synthesis, 3),
                   "asr": round(self.scorer.seconds["asr"] - asr0, 3),
                   "speaker": round(self.scorer.seconds["speaker"] - speaker0, 3),
                   "total": round(time.perf_counter() - started, 3)}
        items = [item for group in scores for item in group["items"]]
        for item, fields in zip(items, generated):
            item.update(fields)
        result = {"checkpoint": Path(checkpoint).name, "model": model, "step": int(step), "epoch": int(epoch),
                "identity": identity, "eval_set": self.eval_set.fingerprint, "device": self.settings.device,
                "language": self.eval_set.language, "cer": main["cer"], "wer": main["wer"], "sim": main["sim"],
                "second": ({"language": groups[1][0], **{k: scores[1][k] for k in ("cer", "wer", "sim")}}
                           if len(scores) > 1 else None),
                "models": {"asr": getattr(self.scorer, "asr_model", None),
                           "speaker": getattr(self.scorer, "speaker_model", None) or None},
                "seconds": seconds, "items": items, "time": round(time.time(), 3)}
        result["health"] = health_of(result, self.real_speech, adapter)
        return result

    @property
    def real_speech(self) -> RealSpeech | None:
        """The prepared data's real clips of the set's speakers (health's measure of length and rate)."""
        if self._real is None:
            from generations.registry import by_id

            self._real = (real_speech(self.settings.real_manifests, {v.speaker for v in self.eval_set.voices},
                                      self.eval_set.language, by_id(self.settings.version).codes_per_second),)
        return self._real[0]

    def _adapter_health(self, checkpoint: Path, group: tuple[str | None, list[Sentence]], spoken: list[np.ndarray],
                        generated: Any) -> dict[str, Any] | None:
        """Whether a LoRA checkpoint's adapter changes anything: its B matrices, then the first voice and seed's
        first items spoken again without it (None: no adapter)."""
        zero = adapter_weights_zero(checkpoint)
        if zero is None or zero:
            return adapter_of(zero, None)
        language, sentences = group
        count = min(ADAPTER_PROBE_ITEMS, len(sentences))
        voice, seed = self.eval_set.voices[0], self.eval_set.all_seeds[0]
        generated = list(generated)[:count] if generated else None
        same = same_speech_without_adapter(self.backend, checkpoint, [s.text for s in sentences[:count]],
                                           self.eval_set.path_of(voice.prompt), self.eval_set.decode_settings(seed),
                                           language, spoken[:count], generated)
        return adapter_of(False, same)

    @staticmethod
    def _merge_seeds(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
        """The scores of one group over all seeds: corpus rates over every item, the mean similarity."""
        items = [item for group in per_seed for item in group["items"]]

        def rate(metric: str) -> float | None:
            errors = sum(float(i[f"{metric}_errors"]) for i in items)
            length = sum(float(i[f"{metric}_length"]) for i in items)
            return errors / length if length else (float(errors > 0) if items else None)

        return {"cer": rate("cer"), "wer": rate("wer"), "sim": _mean(float(i["sim"]) for i in items), "items": items}

    def _score_group(self, language: str | None, sentences: list[Sentence], clips: list[list[np.ndarray]],
                     rate: int, seed: int | None = None) -> dict[str, Any]:
        from data_tools.scoring import ScoringError, cer, wer

        flat = [clip for voice_clips in clips for clip in voice_clips]
        refs = [s.text for _voice in self.eval_set.voices for s in sentences]
        hyps = self.scorer.transcribe(flat, rate, language)
        try:
            char_rates, word_rates = cer(refs, hyps, language), wer(refs, hyps, language)
            counts = [(_counts(cer([ref], [hyp], language)), _counts(wer([ref], [hyp], language)))
                      for ref, hyp in zip(refs, hyps)]
        except ScoringError as exc:
            raise EvaluationError(f"scoring: {exc}") from None
        sims: list[float] = []
        for voice, voice_clips in zip(self.eval_set.voices, clips):
            if voice.audio is None:
                sims += [float("nan")] * len(voice_clips)
            else:
                sims += self.scorer.similarity(voice_clips, rate, self.eval_set.path_of(voice.audio))
        items = []
        index = 0
        for voice in self.eval_set.voices:
            for sentence in sentences:
                items.append({"sentence": sentence.id, "voice": voice.id, "language": language, "text": sentence.text,
                              "transcript": hyps[index], "cer": char_rates.per_utterance[index],
                              "wer": word_rates.per_utterance[index], "sim": sims[index],
                              "cer_errors": counts[index][0][0], "cer_length": counts[index][0][1],
                              "wer_errors": counts[index][1][0], "wer_length": counts[index][1][1],
                              "seed": seed, "audio_seconds": round(flat[index].size / rate, 3)})
                index += 1
        return {"cer": char_rates.corpus, "wer": word_rates.corpus, "sim": _mean(sims), "items": items}

    def _with_intervals(self, result: dict[str, Any]) -> dict[str, Any]:
        """The result with each score's interval and its paired differences against the base and the best so far
        (the best as the rule picks it among the results already written)."""
        from trainer.evaluation.results import results_by_step

        run_dir = self.settings.run_dir
        result["intervals"] = {m: (i.to_dict() if (i := interval_of(result, m)) else None) for m in METRICS}
        if result["model"] != "checkpoint":
            return result
        base = base_result(run_dir, result["eval_set"])
        if base is not None:
            result["vs_base"] = {m: (c.to_dict() if (c := compare(result, base, m)) else None) for m in METRICS}
        if isinstance(result.get("health"), dict):
            with_zero_shot(result["health"], result.get("vs_base"))
        best_step = best_of(replay(run_dir, self.settings.rule)) if self.settings.best_by != "val_loss" else None
        best = results_by_step(run_dir).get(best_step) if best_step is not None else None
        if best is not None and best.get("eval_set") == result["eval_set"] and best_step != result["step"]:
            result["vs_best"] = {"step": best_step,
                                 **{m: (c.to_dict() if (c := compare(result, best, m)) else None) for m in METRICS}}
        return result

    def record(self, checkpoint: Path, result: dict[str, Any], result_file: Path) -> dict[str, Any]:
        """Write the result, append its event, and move best.pth when the rule makes it the new best (under the pin
        lock); the event carries the rule's reason."""
        run_dir = self.settings.run_dir
        decision: Decision | None = None
        with pin_lock(run_dir):
            self._with_intervals(result)
            write_result(result_file, result)
            moved = None
            if result["model"] == "checkpoint":
                moved, decisions = apply_best(run_dir, self.settings.rule)
                decision = next((d for d in decisions if d.step == result["step"]), None)
        event = append_event(run_dir, result["step"], result["epoch"], **event_fields(result),
                             best=bool(moved and moved[0] == result["step"]),
                             best_reason=decision.reason if decision is not None else None)
        second = result.get("second")
        extra = (f" | {second['language']}: CER {metric_text('cer', second['cer'])} WER "
                 f"{metric_text('wer', second['wer'])}" if second else "")
        seconds = result["seconds"]
        self.say(f"eval {result['model']} step {result['step']} ({result['checkpoint']}): "
                 f"{scores_line({k: result[k] for k in ('cer', 'wer', 'sim')})}{extra} | synthesis "
                 f"{seconds['synthesis']:.1f} s, ASR {seconds['asr']:.1f} s, speaker {seconds['speaker']:.1f} s")
        if event.get("health"):
            self.say(f"health of step {result['step']}: {event['health']}")
        if decision is not None:
            self.say(decision.reason)
        elif moved is not None:
            self.say(f"best.pth -> model_step{moved[0]}.pth ({self.settings.best_by} "
                     f"{metric_text(self.settings.best_by, moved[1])})")
        return event

    def evaluate_checkpoint(self, checkpoint: Path) -> dict[str, Any] | None:
        """Measure and record ``checkpoint`` unless already measured on this set; the result or None."""
        checkpoint = Path(checkpoint)
        if is_measured(checkpoint, self.eval_set.fingerprint):
            return None
        result = self.measure(checkpoint)
        if not checkpoint.is_file():
            self.say(f"note: {checkpoint.name} was rotated away while it was measured; its scores are kept")
        self.record(checkpoint, result, result_path(checkpoint))
        return result

    def evaluate_base(self) -> dict[str, Any] | None:
        base = self.settings.base_checkpoint
        if base is None:
            return None
        target = base_result_path(self.settings.run_dir)
        if not base.is_file():
            raise EvaluationError(f"base checkpoint {base}: file not found")
        if is_measured(base, self.eval_set.fingerprint, target):
            return None
        result = self.measure(base, model="base")
        result.update(step=0, epoch=0)
        self.record(base, result, target)
        return result

    def evaluate_floor(self) -> dict[str, Any] | None:
        """The recogniser's CER on the real recordings of the set's sentences (measured once; see ``floor``)."""
        from trainer.evaluation.eval_set import eval_dir
        from trainer.evaluation.floor import measure_floor, read_floor, real_audio_by_id

        if not self.settings.floor_manifests:
            return None
        known = read_floor(eval_dir(self.settings.run_dir), self.eval_set.fingerprint)
        floor = measure_floor(self.scorer, self.eval_set.sentences, self.eval_set.language,
                              real_audio_by_id(self.settings.floor_manifests), self.eval_set.fingerprint,
                              eval_dir(self.settings.run_dir))
        if floor is None:
            self.say("note: the held-out manifest names no real recording of the evaluation sentences: no "
                     "recogniser floor (an audio list, as raw ingest saves it, has them)")
        elif floor is not known:
            self.say(f"recogniser floor: real speech CER {metric_text('cer', floor['cer'])} WER "
                     f"{metric_text('wer', floor['wer'])} on "
                     f"{floor['clips']} recording(s) of the evaluation sentences")
        return floor

    # ----- a run ------------------------------------------------------------------------------------

    def evaluate_run(self) -> list[dict[str, Any]]:
        """The base (when given) and every model_step file not yet measured, oldest first."""
        from trainer.checkpoints.store import step_checkpoints

        done = [r for r in [self.evaluate_base()] if r is not None]
        self.evaluate_floor()
        for _step, path in step_checkpoints(self.settings.run_dir):
            if path.is_file():
                result = self.evaluate_checkpoint(path)
                if result is not None:
                    done.append(result)
        with pin_lock(self.settings.run_dir):  # results written by an earlier version of the set, a lost link
            moved, _decisions = apply_best(self.settings.run_dir, self.settings.rule)
        if moved is not None:
            self.say(f"best.pth -> model_step{moved[0]}.pth ({self.settings.best_by} "
                     f"{metric_text(self.settings.best_by, moved[1])})")
        return done

    def follow(self, lines: Iterable[str]) -> int:
        """Measure each committed save the trainer announces (a step number per line) until end of input.

        A checkpoint that rotation removed before its turn is skipped with a note; one that fails to
        measure is reported and the next one is taken (evaluation never stops training).
        """
        from trainer.checkpoints.store import step_file_name

        measured = 0
        try:
            self.evaluate_base()
        except (UsageError, OSError, RuntimeError, ValueError) as exc:
            self.say(f"warning: evaluation of the base model failed: {exc}")
        try:
            self.evaluate_floor()
        except (UsageError, OSError, RuntimeError, ValueError) as exc:
            self.say(f"warning: the recogniser's floor failed: {' '.join(str(exc).split())}")
        for line in lines:
            text = line.strip()
            if not text.isdigit():
                continue
            path = self.settings.run_dir / step_file_name(int(text))
            if not path.is_file():
                self.say(f"note: {path.name} was rotated away before evaluation reached it")
                continue
            try:
                if self.evaluate_checkpoint(path) is not None:
                    measured += 1
            except (UsageError, OSError, RuntimeError, ValueError) as exc:  # the next save is measured all the same
                self.say(f"warning: evaluation of {path.name} failed: {' '.join(str(exc).split())}")
        return measured
