"""Every generation x every capability (issue 27): each row either works on the demo workspace or is refused
in one line that names the generation and the capability, by the pre-flight (train, resume, LoRA, samples at
saves, evaluation at saves) or by the command that would do it (synthesize, export, demo).

The pre-flight rows plan each generation's own demo run (``demo.workspace.demo_of``: the demo in its registry
entry's ``demo_folder``) with the capability asked for. The command rows check that the entry's code is there (the demos are synthesized, exported and
prepared end to end by test_synthesis_cli / test_synthesis_v25_cli, test_checkpoint_toolkit /
test_export_v25, test_prepare_v2 / test_prepare_v25 and test_preprocess). A "bare" generation registered here,
lacking every capability but training, shows each refusal.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo.workspace import demo_of
from generations.registry import (
    CAPABILITIES,
    DEMO_CHECKPOINTS,
    DEMO_RUNS,
    GENERATIONS,
    by_id,
    demo_folders,
    demo_paths,
    register,
    unregister,
)
from generations.spec import Capability, Generation
from networks.generation_rule import gpt_section
from trainer.options_parser import parse_argv
from trainer.plan import RunPlan, make_plan

SHIPPED = ("1.5", "2", "2.5")
PREFLIGHT_ROWS = {  # capability -> (the options that ask for it, the pre-flight check that answers)
    Capability.TRAIN: ({}, "config"),
    Capability.RESUME: ({"resume": "auto"}, "resume"),
    Capability.LORA: ({"lora": True}, "LoRA and languages"),
    Capability.SAMPLES: ({}, "samples"),  # every demo's command asks for samples at its saves
    Capability.EVALUATE: ({"eval_at_saves": True, "eval_asr": "facebook/mms-1b-all"}, "evaluation"),
    Capability.DEMO: ({}, "config"),
}
COMMAND_CODE: dict[Capability, Callable[[Generation], Any]] = {  # capability -> the entry's code for it
    Capability.SYNTHESIZE: lambda entry: entry.speech.synthesize,
    Capability.EXPORT: lambda entry: entry.export.build if entry.export is not None else None,
}


def demo_plan(generation: Generation, root: Path, out: Path, **asked: Any) -> RunPlan:
    demo = demo_of(generation, root)
    assert demo is not None
    opts = parse_argv(demo.train_argv())
    opts.update(output_dir=str(out), max_steps=4, **asked)
    return make_plan(opts)


def lazy_target(function: Callable[..., Any]) -> Any:
    """The function an entry's ``lazy`` reference names (importing its module), or the function itself."""
    module, _, name = function.__name__.rpartition(".")
    return getattr(importlib.import_module(module), name) if module else function


def one_refusal(plan: RunPlan) -> tuple[str, str]:
    failed = [check for check in plan.checks if not check.ok]
    assert len(failed) == 1, plan.lines()
    return failed[0].name, failed[0].message


def test_the_matrix_covers_every_capability():
    s2mel = {Capability.TRAIN_S2MEL}  # its pre-flight row: tests/test_s2mel_cli.py::test_s2mel_preflight_rows
    assert set(PREFLIGHT_ROWS) | set(COMMAND_CODE) | {Capability.PREPARE} | s2mel == set(CAPABILITIES)
    assert [entry.id for entry in GENERATIONS][-3:] == list(reversed(SHIPPED))


@pytest.mark.parametrize("capability", list(PREFLIGHT_ROWS), ids=str)
@pytest.mark.parametrize("version", SHIPPED)
def test_preflight_rows(version, capability, demo_workspace, tmp_path):
    generation = by_id(version)
    asked, check = PREFLIGHT_ROWS[capability]
    plan = demo_plan(generation, demo_workspace.root, tmp_path / "run", **asked)
    if generation.can(capability):
        assert plan.ok, plan.lines()
        if capability is Capability.SAMPLES:
            assert plan.samples is not None and plan.samples.enabled, plan.samples
    else:
        name, message = one_refusal(plan)
        assert name == check and generation.name in message and capability.value in message
        assert message.endswith(generation.refusal(capability) or "?") and "\n" not in message


def test_indextts25_evaluates_through_its_own_folder_not_a_vocoder(demo_workspace, tmp_path):
    plan = demo_plan(by_id("2.5"), demo_workspace.root, tmp_path / "run", eval_at_saves=True,
                     eval_asr="facebook/mms-1b-all", vocoder=str(tmp_path / "bigvgan_generator.pth"))
    assert by_id("2.5").can(Capability.EVALUATE) and plan.ok, plan.lines()
    message = next(check.message for check in plan.checks if check.name == "evaluation")
    assert "speech through the IndexTTS-2.5 folder" in message and "LoRA adapters" in message
    assert "--vocoder" not in message and "IndexTTS-1.5" not in message


@pytest.mark.parametrize("capability", [*COMMAND_CODE, Capability.PREPARE], ids=str)
@pytest.mark.parametrize("version", SHIPPED)
def test_command_rows(version, capability):
    generation = by_id(version)
    assert generation.can(capability)  # every shipped generation synthesizes, exports and prepares
    if capability is Capability.PREPARE:
        assert generation.prepare is not None and importlib.util.find_spec(generation.prepare) is not None
        assert callable(importlib.import_module(generation.prepare).main)
    else:
        assert callable(lazy_target(COMMAND_CODE[capability](generation)))


@pytest.mark.parametrize("version", SHIPPED)
def test_an_entry_without_the_code_for_a_capability_says_why(version):
    generation = by_id(version)
    speech, export = generation.speech, generation.export
    code = {Capability.SAMPLES: speech.sample_plan, Capability.EVALUATE: speech.evaluation_backend,
            Capability.SYNTHESIZE: speech.synthesize, Capability.EXPORT: export,
            Capability.DEMO: generation.demo_folder, Capability.PREPARE: generation.prepare,
            Capability.TRAIN_S2MEL: generation.s2mel}
    for capability, field in code.items():
        assert (field is None) <= (not generation.can(capability)), (generation.name, capability)
    for field in (speech.sample_plan, speech.sample_speaker, speech.evaluation_backend, speech.synthesize,
                  export and export.build, generation.start):
        assert field is None or callable(lazy_target(field))


# ----- a generation that lacks every capability but training ----------------------------------------------
BARE_MARK = "bare_generation"
WHY = "a bare test generation"


@pytest.fixture
def bare(demo_workspace, tmp_path) -> Iterator[tuple[Generation, Path]]:
    v15 = by_id("1.5")
    entry = v15.renamed(id="bare", name="IndexTTS-Bare",
                        recognises=lambda config, keys=(): bool(gpt_section(config).get(BARE_MARK)),
                        missing={cap: WHY for cap in CAPABILITIES if cap is not Capability.TRAIN})
    config = yaml.safe_load(demo_workspace.config.read_text(encoding="utf-8"))
    config["gpt"][BARE_MARK] = True
    path = demo_workspace.config.parent / f"bare_{tmp_path.name}.yaml"  # beside the demo's files it names
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    register(entry)
    try:
        yield entry, path
    finally:
        unregister(entry.id)
        path.unlink()


@pytest.mark.parametrize("capability", [c for c in PREFLIGHT_ROWS if c not in (Capability.TRAIN, Capability.DEMO)],
                         ids=str)
def test_bare_preflight_refusals(capability, bare, demo_workspace, tmp_path):
    _entry, config = bare
    asked, check = PREFLIGHT_ROWS[capability]
    opts = parse_argv(demo_workspace.train_argv(max_steps=4))
    opts.update(output_dir=str(tmp_path / "run"), config=str(config), **asked)
    if capability is not Capability.SAMPLES:
        opts["vocoder"] = ""  # one refusal at a time: the demo's command asks for samples
    name, message = one_refusal(make_plan(opts))
    assert (name, message) == (check, f"{'--eval-at-saves: ' if capability is Capability.EVALUATE else ''}"
                                      f"IndexTTS-Bare cannot {capability.value}: {WHY}")


def test_bare_command_refusals(bare, demo_workspace, tmp_path, capsys):
    from demo.workspace import main as demo_main
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.export import export_checkpoint
    from trainer.synthesis import SynthesisError
    from trainer.synthesize import build_parser, synthesize

    entry, config = bare
    refusal = f"IndexTTS-Bare cannot {{}}: {WHY}"
    reference = tmp_path / "voice.wav"
    reference.write_bytes(b"RIFF")
    args = build_parser().parse_args(["--checkpoint", str(demo_workspace.base_checkpoint), "--config", str(config),
                                      "--tokenizer", str(demo_workspace.extended_tokenizer), "--reference",
                                      str(reference), "--text", "ሰላም", "--out", str(tmp_path / "x.wav")])
    with pytest.raises(SynthesisError, match=refusal.format(Capability.SYNTHESIZE.value)):
        synthesize(args)
    with pytest.raises(CheckpointError, match=refusal.format(Capability.EXPORT.value)):
        export_checkpoint(demo_workspace.base_checkpoint, tmp_path / "export", config=config,
                          tokenizer=demo_workspace.extended_tokenizer)
    assert demo_main(["--out", str(demo_workspace.root), "--version", "bare"]) == 2
    assert capsys.readouterr().err.strip() == "error: " + refusal.format(Capability.DEMO.value)
    assert not entry.can(Capability.PREPARE) and entry.refusal(Capability.PREPARE) == refusal.format(
        Capability.PREPARE.value)


def test_each_demo_sits_in_the_folder_its_entry_names(demo_workspace):
    root = demo_workspace.root
    for version in SHIPPED:
        entry = by_id(version)
        demo = demo_of(entry, root)
        assert demo is not None and demo.config == root / str(entry.demo_folder) / DEMO_CHECKPOINTS / "config.yaml"
        assert demo.config.is_file() and demo.val_manifest.is_file()
    assert demo_paths(root, DEMO_CHECKPOINTS) == [demo_of(by_id(version), root).config.parent for version in SHIPPED]
    register(by_id("1.5").renamed(id="no-demo", name="IndexTTS-NoDemo", demo_folder=None))
    try:
        assert demo_of(by_id("no-demo"), root) is None
        assert demo_folders(DEMO_RUNS) == tuple(f"{by_id(v).demo_folder}/runs".lstrip("/") for v in SHIPPED)
    finally:
        unregister("no-demo")


def test_the_25_entry_names_the_table_its_download_folder_holds():
    from networks.indextts25 import TABLE_NAME

    assert by_id("2.5").test.folder_table == TABLE_NAME and TABLE_NAME in by_id("2.5").tokenizer_file
