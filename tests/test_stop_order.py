"""Stop in seconds (issue 28, item 5): on a stop the stopping save is committed and the run ends; its samples
are owed (listed in the end event), never synthesised in the stopping process. Order of events, not a time:
the timing is bench/stop_time.py's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.trainer_helpers import events, load, run_main, subset_manifest, tiny_args


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("stop_order")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 6),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2)}


def test_stop_commits_the_save_then_ends_without_speaking_samples(demo_workspace, data, tmp_path, capsys,
                                                                  monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("STUDIO_TEST_STOP_AFTER_STEP", "3")  # between saves: the stopping save is a new one
    argv = tiny_args(demo_workspace, data, out, max_steps=8, save_interval=2, vocoder=demo_workspace.vocoder)
    assert run_main(argv) == 130
    log = capsys.readouterr().out
    kinds = [(e["event"], e["step"]) for e in events(out)]
    stop = kinds.index(("stop", 3))
    saved = kinds.index(("save", 3))
    assert stop < saved < len(kinds) - 1 and kinds[-1] == ("end", 3)  # requested -> committed -> the end
    assert ("sample", 2) in kinds[:stop]  # samples were on: the save before the stop spoke them
    assert not [kind for kind in kinds[stop:] if kind[0] == "sample"]  # nothing spoken after the request
    assert not (out / "samples" / "step_3").exists()
    assert load(out / "latest.pth")["step"] == 3
    end = events(out, "end")[-1]
    assert end["status"] == "stopped" and end["saved_step"] == 3 and end["samples_owed"] == [3]
    assert events(out, "stop")[0]["requested_at"] <= events(out, "save")[-1]["time"]
    assert "samples of step 3 left for later" in log
    _owed_samples_are_made_later(out, capsys)


def _owed_samples_are_made_later(out, capsys):
    """``python -m trainer.owed_samples RUN`` speaks what the stop left, as the run would have, once."""
    import json

    from trainer.owed_samples import main as owed_main
    from trainer.owed_samples import owed_steps
    from webui.checkpoints.rows import samples_owed

    assert owed_steps(out) == samples_owed(out) == [3]
    assert owed_main([str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["made"] == [3] and report["failed"] == {}
    made = events(out, "sample")[-1]
    assert made["step"] == 3 and len(made["files"]) == len(list((out / "samples" / "step_3").glob("*.wav"))) > 0
    assert owed_steps(out) == []  # spoken: not owed any more, and a rerun speaks nothing again
    assert owed_main([str(out)]) == 0 and "no samples owed" in capsys.readouterr().out


def test_owed_samples_refuse_a_missing_run_in_one_line(tmp_path, capsys):
    from trainer.owed_samples import main as owed_main

    assert owed_main([str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope'}: run folder not found"


def test_samples_stop_between_texts_and_leave_nothing_half_made(tmp_path, monkeypatch):
    """A stop that arrives while a save's samples are spoken abandons them before the next text."""
    from trainer import samples
    from trainer.sample_plan import SamplePlan

    spoken: list[str] = []

    def fake_speaker(_plan, _model, _tokenizer):
        def speak(text):
            spoken.append(text)
            return SimpleNamespace(waveform=np.zeros(240, dtype=np.float32), sample_rate=24000, audio_seconds=0.01,
                                   hit_stop=True)
        return speak

    class Metrics:
        def __init__(self):
            self.recorded: list[str] = []

        def audio(self, *_args):
            pass

        def event(self, kind, *_args, **_fields):
            self.recorded.append(kind)

    monkeypatch.setattr(samples, "_speaker", lambda _plan: fake_speaker)
    plan = SamplePlan(True, "", texts=[("a", "one"), ("b", "two"), ("c", "three")])
    metrics = Metrics()
    made = samples.make_samples(plan, None, None, 4, 0, tmp_path, metrics, lambda _line: None,
                                stop_requested=lambda: len(spoken) >= 1)
    assert made is False and spoken == ["one"] and metrics.recorded == []
    assert not (tmp_path / "samples" / "step_4").exists()


def test_a_stop_signal_cuts_the_text_being_spoken_short(tmp_path, monkeypatch):
    """Inside ``GracefulStop.interruptible()`` the signal itself ends synthesis: Stop waits for no text."""
    import os
    import signal

    from trainer import samples
    from trainer.sample_plan import SamplePlan
    from trainer.signals import GracefulStop

    stop = GracefulStop(lambda _line: None).install()
    finished: list[str] = []

    def fake_speaker(_plan, _model, _tokenizer):
        def speak(text):
            if text == "two":
                os.kill(os.getpid(), signal.SIGINT)  # Stop pressed while this text is spoken
                for _ in range(10_000_000):  # the long synthesis the signal must cut short
                    pass
            finished.append(text)
            return SimpleNamespace(waveform=np.zeros(240, dtype=np.float32), sample_rate=24000, audio_seconds=0.01,
                                   hit_stop=True)
        return speak

    monkeypatch.setattr(samples, "_speaker", lambda _plan: fake_speaker)
    recorded: list[str] = []
    metrics = SimpleNamespace(audio=lambda *_args: None, event=lambda kind, *_a, **_k: recorded.append(kind))
    try:
        made = samples.make_samples(SamplePlan(True, "", texts=[("a", "one"), ("b", "two"), ("c", "three")]), None,
                                    None, 6, 0, tmp_path, metrics, lambda _line: None,
                                    stop_requested=lambda: stop.requested is not None,
                                    interruptible=stop.interruptible())
    finally:
        stop.restore()
    assert made is False and finished == ["one"] and recorded == [] and stop.requested == "SIGINT"
    assert not (tmp_path / "samples" / "step_6").exists()  # the wav of "one" went with the rest
