"""The Test tab's GPT-only vs GPT + S2Mel (issue 30, "Use"): S2Mel runs are offered as the decoder a side speaks
through (never as a GPT), a pick becomes ``--s2mel`` in the side's command, a pick that cannot apply is refused in
one line, and the same model with the stock and the trained S2Mel speaks two different sounds."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.s2mel_demo_run import make_s2mel_run
from webui.context import StudioContext
from webui.jobs.process_tools import wait_until
from webui.testing import listen, listen_s2mel, reference_voices, tab_testing, test_job

SYNTH_TIMEOUT_S = 300  # two CPU synthesis processes (torch import, model load) on 2 busy cores


@pytest.fixture(scope="module")
def ws(demo_workspace, tmp_path_factory) -> Path:
    """A workspace with the demo's 2.5 folder, a 2-step full S2Mel run of it and one of the IndexTTS2 demo."""
    workspace = tmp_path_factory.mktemp("listen_s2mel") / "workspace"
    shutil.copytree(demo_workspace.root / "v25", workspace / "v25", ignore=shutil.ignore_patterns("runs"))
    make_s2mel_run(DemoV25Paths.under(workspace).config.parent, workspace / "v25" / "runs" / "s2mel",
                   learning_rate=1e-2)
    make_s2mel_run(DemoV2Paths.under(demo_workspace.root).config.parent, workspace / "v2" / "runs" / "s2mel")
    return workspace


def test_s2mel_runs_are_decoders_to_pick_never_a_gpt(ws: Path) -> None:
    keys = [choice.key for choice in listen.model_choices(ws)]
    assert not any("/runs/s2mel/" in key for key in keys), keys  # not speakable as a GPT
    choices = listen_s2mel.s2mel_choices(ws)
    by_label = {c.label: c for c in choices}
    assert by_label["S2Mel v25/runs/s2mel · latest.pth (step 2)"].version == "2.5"
    assert by_label["S2Mel v2/runs/s2mel · latest.pth (step 2)"].version == "2"
    entries = listen_s2mel.picker_entries(ws)
    assert entries[0] == (listen_s2mel.STOCK_LABEL, listen_s2mel.STOCK)  # the stock decoder comes first


def test_exported_adapters_are_offered_too(ws: Path, tmp_path: Path) -> None:
    from trainer.s2mel.export import export_adapter

    lora = make_s2mel_run(DemoV25Paths.under(ws).config.parent, tmp_path / "lora", mode="lora")
    adapter = export_adapter(lora, ws / "exports" / "voice" / "s2mel_adapter.pth")
    try:
        listed = {c.label: c.key for c in listen_s2mel.s2mel_choices(ws)}
        assert listed["S2Mel adapter · exports/voice/s2mel_adapter.pth"] == str(adapter)
        base = next(c.key for c in listen.model_choices(ws) if c.kind == "base" and c.version == "2.5")
        spec = listen_s2mel.with_s2mel(listen.resolve_model(base, ws), str(adapter), ws)
        assert spec.s2mel == adapter and spec.problem is None
    finally:
        adapter.unlink()


def test_a_picked_s2mel_goes_into_the_command_and_a_wrong_one_is_refused(ws: Path) -> None:
    base = next(c.key for c in listen.model_choices(ws) if c.kind == "base" and c.version == "2.5")
    spec = listen.resolve_model(base, ws)
    trained = str(ws / "v25" / "runs" / "s2mel" / "latest.pth")
    with_s2mel = listen_s2mel.with_s2mel(spec, trained, ws)
    assert listen_s2mel.with_s2mel(spec, listen_s2mel.STOCK, ws) == spec
    argv = listen.synthesis_argv("python", with_s2mel, "ሰላም", Path("r.wav"), Path("o.wav"), Path("o.json"),
                                 listen.DecodeChoice())
    assert argv[argv.index("--s2mel") + 1] == trained
    assert "--s2mel" not in listen.synthesis_argv("python", spec, "ሰላም", Path("r.wav"), Path("o.wav"),
                                                  Path("o.json"), listen.DecodeChoice())
    assert "S2Mel v25/runs/s2mel/latest.pth" in tab_testing.describe_pick(base, ws, "", trained)
    assert "S2Mel: stock" in tab_testing.describe_pick(base, ws, "", listen_s2mel.STOCK)
    other = str(ws / "v2" / "runs" / "s2mel" / "latest.pth")
    with pytest.raises(listen.ListenError, match=r"is an S2Mel of IndexTTS2; .* is IndexTTS-2\.5"):
        listen_s2mel.with_s2mel(spec, other, ws)
    assert "CANNOT SPEAK" in tab_testing.describe_pick(base, ws, "", other)


def test_the_strength_slider_goes_into_the_command_and_is_checked(ws: Path) -> None:
    base = next(c.key for c in listen.model_choices(ws) if c.kind == "base" and c.version == "2.5")
    spec = listen.resolve_model(base, ws)
    trained = str(ws / "v25" / "runs" / "s2mel" / "latest.pth")
    at = listen_s2mel.with_s2mel(spec, trained, ws, 0.6)
    argv = listen.synthesis_argv("python", at, "ሰላም", Path("r.wav"), Path("o.wav"), Path("o.json"),
                                 listen.DecodeChoice())
    assert argv[argv.index("--s2mel-strength") + 1] == "0.6"
    assert "latest.pth at strength 0.6" in tab_testing.describe_pick(base, ws, "", trained, 0.6)
    with pytest.raises(listen.ListenError, match=r"S2Mel adapter strength must be from 0 to 1, got 1\.5"):
        listen_s2mel.with_s2mel(spec, trained, ws, 1.5)


def test_the_checkpoints_tabs_export_form_exports_an_s2mel_run_at_its_strength(ws: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    import torch

    from networks.s2mel import read_s2mel_net
    from webui.checkpoints import tools as ck_tools
    from webui.form_inputs import InputProblem

    trained = str(ws / "v25" / "runs" / "s2mel" / "latest.pth")
    folder = DemoV25Paths.under(ws).config.parent
    argv = ck_tools.export_argv(sys.executable, trained, str(tmp_path / "out"), "fp32", False, "", "", ws,
                                tmp_path / "report.txt", s2mel_strength=0.0)
    assert argv[argv.index("--model-dir") + 1] == str(folder) and argv[argv.index("--strength") + 1] == "0"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    written, stock = read_s2mel_net(tmp_path / "out" / "s2mel.pth"), read_s2mel_net(folder / "s2mel.pth")
    assert all(torch.equal(value, written[part][key]) for part, state in stock.items() for key, value in state.items())
    with pytest.raises(InputProblem, match="applies to S2Mel run checkpoints"):  # a GPT's export has none
        ck_tools.export_argv(sys.executable, str(folder / "gpt.pth"), "", "fp32", False, "", "", ws,
                             tmp_path / "r.txt", s2mel_strength=0.5)


def test_the_same_model_with_the_stock_and_the_trained_s2mel_side_by_side(ws: Path) -> None:
    ctx = StudioContext.create(ws)
    base = next(c.key for c in listen.model_choices(ws) if c.kind == "base" and c.version == "2.5")
    trained = str(ws / "v25" / "runs" / "s2mel" / "latest.pth")
    reference = reference_voices.reference_choices(ws)[0][1]
    form = [base, base, "ሰላም ለዓለም።", reference, None, "greedy", 3, 1.0, 30, 0.8, 0, "", "cpu", 2, None, 1.0, 1.0]
    started = test_job.start_test(ctx, *form, s2mel_a=listen_s2mel.STOCK, s2mel_b=trained)
    assert "STARTED" in started.message, started
    assert wait_until(lambda: not test_job.poll_test(ctx).running, SYNTH_TIMEOUT_S, interval_s=0.5)
    view = test_job.poll_test(ctx)
    waves = {}
    for side in ("A", "B"):
        side_view = view.sides[side]
        assert 'data-tone="ok"' in side_view.status, (side, side_view.status, view.log)
        waves[side], rate = soundfile.read(str(side_view.wav))
        assert rate == 22050 and waves[side].size > 0
    assert "+ S2Mel s2mel/latest.pth" in view.sides["B"].detail and "S2Mel" not in view.sides["A"].detail
    assert view.command.count("--s2mel ") == 1 and f"--s2mel {trained} --s2mel-strength 1" in view.command
    # The same GPT codes (greedy) through another decoder: a different sound.
    assert waves["A"].shape != waves["B"].shape or not np.allclose(waves["A"], waves["B"])
