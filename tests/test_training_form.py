"""The training form: form values -> argv -> trainer (and torchrun) parser -> the same values, for every option;
the launcher fields and the torchrun command; presets; YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generations.registry import by_id
from trainer import options as trainer_options
from trainer.options_parser import parse_argv
from webui.jobs import launcher
from webui.training import training_form as tf

DEMO_V2_PRESET = by_id("2").form.demo_preset
DEMO_V25_PRESET = by_id("2.5").form.demo_preset
GPU24_PRESET = by_id("2").presets.names[0]
GPU80_V25_PRESET, LORA24_V25_PRESET = by_id("2.5").presets.names


def unusual_value(option: trainer_options.Option) -> Any:
    """A valid value different from the default, with spaces and dashes where a path could have them."""
    if option.repeatable:
        return [f"data dir/{option.name} a.jsonl", f"-{option.name}-b.jsonl"]
    if option.kind == "bool":
        return not option.default
    if option.kind == "int":
        return int(option.default) + 7
    if option.kind == "float":
        return float(option.default) * 3 + 0.125
    if option.kind == "choice":
        return next(choice for choice in option.choices if choice != option.default)
    if option.name in ("device", "eval_device"):
        return "cuda:1"
    if option.name == "resume":
        return "runs/x y/model_step40.pth"
    return f"some dir/{option.name}.bin"


def round_trip(values: dict[str, Any]) -> dict[str, Any]:
    """What the trainer (and torchrun's options) parse from the argv Start would run for the form showing
    ``values``."""
    fields, resume_ticked, resume_from = tf.form_from_values(values)
    from_form = tf.values_from_form(fields, resume_ticked, resume_from)
    argv = tf.run_argv(from_form, python="python")
    split = launcher.split_command(argv)
    assert split is not None
    launch, trainer_args = split
    assert argv[:3] == (["python", "-m", "trainer.train"] if not launch.distributed
                        else ["python", "-m", "torch.distributed.run"])
    return {**parse_argv(trainer_args), **launcher.values_of(launch)}


def test_every_form_option_survives_the_round_trip() -> None:
    values = tf.default_values()
    for option in trainer_options.OPTIONS:
        if option.form:
            values[option.name] = unusual_value(option)
    assert round_trip(values) == values
    covered = {o.name for o in tf.FORM_OPTIONS} | {tf.RESUME}
    assert covered == {o.name for o in trainer_options.OPTIONS if o.form}


def test_the_form_offers_dora_beside_lora() -> None:
    dora = trainer_options.option_by_name("lora_dora")
    assert dora in tf.FORM_OPTIONS and dora.group == trainer_options.GROUP_LORA and dora.default is False
    values = {**tf.workspace_values(_files(Path("/ws"))), "lora": True, "lora_dora": True}
    fields, resume_ticked, resume_from = tf.form_from_values(values)
    assert "--lora-dora" in tf.run_argv(tf.values_from_form(fields, resume_ticked, resume_from), python="python")


@pytest.mark.parametrize("name", [o.name for o in trainer_options.OPTIONS if o.form])
def test_each_option_alone_round_trips(name: str) -> None:
    values = {**tf.workspace_values(_files(Path("/ws"))), name: unusual_value(trainer_options.option_by_name(name))}
    assert round_trip(values) == {**tf.default_values(), **values}


def test_resume_checkbox_builds_resume_auto_or_the_chosen_checkpoint() -> None:
    values = tf.workspace_values(_files(Path("/ws")))
    fields, _, _ = tf.form_from_values(values)
    assert "--resume" not in tf.trainer_argv(tf.values_from_form(fields, False, "auto"))
    argv = tf.trainer_argv(tf.values_from_form(fields, True, tf.RESUME_AUTO))
    assert argv[argv.index("--resume") + 1] == "auto"
    argv = tf.trainer_argv(tf.values_from_form(fields, True, "/ws/runs/demo/model_step20.pth"))
    assert argv[argv.index("--resume") + 1] == "/ws/runs/demo/model_step20.pth"
    assert tf.form_from_values({**values, "resume": "auto"})[1:] == (True, "auto")


def test_number_fields_from_the_browser() -> None:
    steps = trainer_options.option_by_name("max_steps")
    assert tf.from_field(steps, 40.0) == 40 and tf.from_field(steps, None) == steps.default
    with pytest.raises(tf.FormError, match="--max-steps"):
        tf.from_field(steps, 2.5)
    lr = trainer_options.option_by_name("learning_rate")
    assert tf.from_field(lr, 2e-5) == 2e-5 and tf.from_field(lr, "") == lr.default
    manifests = trainer_options.option_by_name("train_manifest")
    assert tf.from_field(manifests, " a.jsonl \n\n b c.jsonl\n") == ["a.jsonl", "b c.jsonl"]


def _files(root: Path) -> tf.WorkspaceFiles:
    return tf.WorkspaceFiles(train_manifest=root / "data/train.jsonl", val_manifest=root / "data/val.jsonl",
                             tokenizer=root / "tokenizers/t.model", config=root / "checkpoints/config.yaml",
                             base_checkpoint=root / "checkpoints/gpt.pth", output_dir=root / "runs/demo")


@pytest.mark.parametrize("preset", tf.preset_names())
def test_presets_make_commands_the_trainer_accepts(preset: str) -> None:
    current = {**tf.workspace_values(_files(Path("/mine"))), "output_dir": "/mine/runs/big"}
    values = tf.apply_preset(preset, current, _files(Path("/ws")))
    assert round_trip(values) == values
    if preset in tf.demo_presets():
        assert values["output_dir"] == "/ws/runs/demo" and values["device"] == "cpu"
    elif values["train"] == "s2mel":  # the S2Mel trainer takes no --amp: its presets show fp32
        assert values["output_dir"] == "/mine/runs/big" and values["amp"] == "off" and values["device"] == "cuda"
    else:
        assert values["output_dir"] == "/mine/runs/big" and values["amp"] == "bf16"  # paths kept


def test_s2mel_presets_train_the_decoder_and_a_gpt_preset_trains_the_gpt_again() -> None:
    current = {**tf.workspace_values(_files(Path("/mine"))), "output_dir": "/mine/runs/s2mel"}
    lora = tf.apply_preset(tf.S2MEL_LORA12_PRESET, current, _files(Path("/ws")))
    parsed = parse_argv(tf.trainer_argv(lora, python="python")[3:])  # what the trainer reads from Start's command
    assert (parsed["train"], parsed["lora"], parsed["lora_rank"], parsed["batch_size"]) == ("s2mel", True, 16, 8)
    full = tf.apply_preset(tf.S2MEL_FULL24_PRESET, lora, _files(Path("/ws")))
    assert full["train"] == "s2mel" and full["lora"] is False
    for preset in (GPU24_PRESET, LORA24_V25_PRESET, DEMO_V2_PRESET):
        assert tf.apply_preset(preset, full, _files(Path("/ws")))["train"] == "gpt"


def test_demo_preset_matches_the_demo_workspace(demo_workspace) -> None:
    files = tf.WorkspaceFiles(
        train_manifest=demo_workspace.train_manifest, val_manifest=demo_workspace.val_manifest,
        tokenizer=demo_workspace.extended_tokenizer, config=demo_workspace.config,
        base_checkpoint=demo_workspace.base_checkpoint, output_dir=demo_workspace.output_dir,
        vocoder=demo_workspace.vocoder)
    values = tf.apply_preset(tf.DEMO_PRESET, {}, files)
    demo = parse_argv(demo_workspace.train_argv())
    for name in ("train_manifest", "val_manifest", "tokenizer", "config", "base_checkpoint", "output_dir",
                 "learning_rate", "batch_size", "device", "vocoder"):
        assert values[name] == demo[name], name


def test_indextts2_demo_preset_matches_the_v2_demo_workspace(demo_workspace) -> None:
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths

    assert tf.preset_names()[:2] == (tf.DEMO_PRESET, DEMO_V2_PRESET)  # offered next to the IndexTTS-1.5 demo
    v2 = DemoV2Paths.under(demo_workspace.root)
    files = tf.demo_preset_files(demo_workspace.root, DEMO_V2_PRESET)
    values = tf.apply_preset(DEMO_V2_PRESET, {"resume": "auto"}, files)
    demo = parse_argv(v2.train_argv())
    for name in ("train_manifest", "val_manifest", "tokenizer", "config", "base_checkpoint", "output_dir",
                 "max_steps", "learning_rate", "batch_size", "warmup_steps", "log_interval", "val_interval",
                 "save_interval", "device", "amp", "sample_model_dir"):
        assert values[name] == demo[name], name
    assert values["sample_model_dir"] == str(v2.config.parent)  # the demo IndexTTS2 speaks at every save
    assert values["resume"] == "" and round_trip(values) == values


def test_what_the_form_offers_follows_the_model_version() -> None:
    option = trainer_options.option_by_name
    assert tf.field_label(option("train_manifest"), "2") == "Training data * (IndexTTS2 paired manifest)"
    assert tf.field_label(option("val_manifest"), "1.5") == "Validation data (IndexTTS-1.5 codes manifest)"
    assert tf.field_label(option("train_manifest"), None) == "Training data *"
    assert not tf.applies(option("vocoder"), "2") and tf.applies(option("vocoder"), "1.5")
    assert tf.field_info(option("vocoder"), "2") == by_id("2").form.not_for and "\n" not in by_id("2").form.not_for
    assert tf.field_info(option("vocoder"), "1.5") == f"--vocoder: {option('vocoder').help}"
    for name in ("sample_model_dir", "sample_steps"):  # IndexTTS2's samples
        assert tf.applies(option(name), "2") and not tf.applies(option(name), "1.5")
        assert tf.field_info(option(name), "1.5") == by_id("1.5").form.not_for and tf.field_info(option(name), "2") == f"{option(name).flag}: {option(name).help}"
    for name in tf.SAMPLE_OPTIONS:
        assert tf.applies(option(name), None)
    assert all(tf.applies(o, "2") for o in tf.FORM_OPTIONS if o.name not in (*tf.SAMPLE_OPTIONS, *tf.GENERATION_OPTIONS))
    assert all(tf.applies(o, "1.5") for o in tf.FORM_OPTIONS if o.name not in (*tf.SAMPLE_OPTIONS, *tf.GENERATION_OPTIONS))


def test_form_yaml_round_trip_and_train_config(tmp_path: Path) -> None:
    values = tf.workspace_values(_files(tmp_path))
    values.update(batch_size=3, learning_rate=1.5e-4, resume="auto", amp="bf16", val_manifest=[])
    loaded, notes = tf.values_from_yaml(tf.form_yaml(values))
    assert loaded == values and notes == []
    config = tmp_path / "train_config.yaml"
    trainer_options.write_train_config(values, config)  # a run's resolved options load into the form too
    assert tf.values_from_yaml(config.read_text())[0] == values


def test_form_yaml_reports_what_it_cannot_use() -> None:
    loaded, notes = tf.values_from_yaml("batch_size: 4\nno_such_option: 1\ntrain-manifest: a.jsonl\n")
    assert loaded["batch_size"] == 4 and loaded["train_manifest"] == ["a.jsonl"]
    assert notes == ["ignored unknown option 'no_such_option'"]
    current = {**tf.workspace_values(_files(Path("/ws"))), "epochs": 3}
    overlaid, _ = tf.values_from_yaml("batch_size: 4\n", base=current)  # a partial file changes only its keys
    assert overlaid == {**current, "batch_size": 4}
    for bad, message in [("[1, 2]", "mapping"), ("a: [", "not valid YAML"), ("amp: fp8", "--amp"),
                         ("grad_checkpointing: maybe", "--grad-checkpointing"), ("epochs: 1.5", "--epochs")]:
        with pytest.raises(tf.FormError, match=message):
            tf.values_from_yaml(bad)


def test_recorded_trainer_command_gives_the_form_back() -> None:
    values = {**tf.workspace_values(_files(Path("/ws"))), "resume": "auto", "max_steps": 12}
    assert tf.values_from_trainer_argv(tf.trainer_argv(values, python="/py")) == values
    assert tf.values_from_trainer_argv(["/py", "other.py", "--x"]) is None
    assert tf.values_from_trainer_argv(["/py", "-m", "trainer.train", "--no-such-flag"]) is None


# -- paths typed in the form: one rule shared with the trainer and the supervisor -------------------------
def test_tilde_means_the_same_folder_for_form_trainer_and_supervisor(tmp_path: Path, monkeypatch) -> None:
    from webui.jobs.supervisor import RunSupervisor
    from webui.jobs.supervisor_registry import SupervisorRegistry

    monkeypatch.setenv("HOME", str(tmp_path))
    fields, _, _ = tf.form_from_values({**tf.workspace_values(_files(Path("/ws"))), "output_dir": "~/runs/a",
                                        "train_manifest": ["~/data/t.jsonl"]})
    values = tf.values_from_form(fields, False, "")
    assert values["output_dir"] == str(tmp_path / "runs/a")
    assert values["train_manifest"] == [str(tmp_path / "data/t.jsonl")]
    argv = tf.trainer_argv(values, python="python")
    assert "~" not in " ".join(argv)  # the command shown is the folder the trainer writes to
    parsed = parse_argv(["--train-manifest", "~/data/t.jsonl", "--tokenizer", "t", "--config", "c",
                                         "--output-dir", "~/runs/a"])
    assert parsed["output_dir"] == values["output_dir"] and parsed["train_manifest"] == values["train_manifest"]
    assert RunSupervisor("~/runs/a").output_dir == (tmp_path / "runs/a").resolve()
    assert SupervisorRegistry(tmp_path).get("~/runs/a").output_dir == (tmp_path / "runs/a").resolve()


def test_unknown_user_and_line_breaks_are_refused_in_one_line(capsys) -> None:
    output_dir = trainer_options.option_by_name("output_dir")
    with pytest.raises(tf.FormError, match=r"^--output-dir: cannot expand '~nosuchuser_x/r': no user") as err:
        tf.from_field(output_dir, "~nosuchuser_x/r")
    assert "\n" not in str(err.value)
    with pytest.raises(tf.FormError, match=r"^--output-dir: one path only, got a line break"):
        tf.from_field(output_dir, "runs/a\nruns/b")
    with pytest.raises(tf.FormError, match=r"^--device: one line only"):
        tf.from_field(trainer_options.option_by_name("device"), "cpu\ncuda")
    with pytest.raises(SystemExit):
        parse_argv(["--train-manifest", "a", "--tokenizer", "t", "--config", "c",
                                    "--output-dir", "~nosuchuser_x/r"])
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "--output-dir" in lines[0] and "nosuchuser_x" in lines[0]
    with pytest.raises(SystemExit):
        parse_argv(["--train-manifest", "a\nb", "--tokenizer", "t", "--config", "c",
                                    "--output-dir", "o"])
    assert "--train-manifest: one path only" in capsys.readouterr().err.replace("argument ", "")


def test_multi_path_fields_take_one_path_per_line_and_say_so() -> None:
    manifests = trainer_options.option_by_name("train_manifest")
    assert tf.from_field(manifests, "a.jsonl\n\n  \nb c.jsonl\r\n") == ["a.jsonl", "b c.jsonl"]
    assert "one path per line" in tf.field_info(manifests)
    assert "one path per line" not in tf.field_info(trainer_options.option_by_name("output_dir"))
    with pytest.raises(tf.FormError, match="--train-manifest: cannot expand"):
        tf.from_field(manifests, "a.jsonl\n~nosuchuser_x/b.jsonl")


def test_expand_path_rules() -> None:
    from data_tools.paths import PathError, expand_path, expand_text

    assert expand_text("", "x") == "" and expand_text("rel/a", "x") == "rel/a"
    assert expand_path("~", "x") == Path.home()
    with pytest.raises(PathError, match=r"^x: no path given"):
        expand_path("  ", "x")


# -- processes and nodes: the torchrun command ------------------------------------------------------------
def _launch_values(**launch: Any) -> dict[str, Any]:
    return {**tf.workspace_values(_files(Path("/ws"))), "max_steps": 12, **launch}


def test_one_process_on_one_node_is_the_plain_trainer_command() -> None:
    values = _launch_values()
    assert tf.run_argv(values, python="py") == tf.trainer_argv(values, python="py")
    assert tf.run_argv(values, python="py")[:3] == ["py", "-m", "trainer.train"]


@pytest.mark.parametrize("launch", [
    {"nproc_per_node": 2},
    {"nproc_per_node": 8, "nnodes": 2, "rdzv_endpoint": "node0.example:29500", "node_rank": 1},
    {"nproc_per_node": 1, "nnodes": 3, "rdzv_endpoint": "[fd00::1]:29400", "node_rank": 2},
])
def test_launcher_fields_survive_the_round_trip_and_torchrun_accepts_the_command(launch: dict[str, Any]) -> None:
    from torch.distributed.run import get_args_parser

    values = {**tf.default_values(), **_launch_values(**launch)}
    assert round_trip(values) == values
    argv = tf.run_argv(values, python="py")
    assert argv[:3] == ["py", "-m", "torch.distributed.run"]
    parsed = get_args_parser().parse_args(argv[3:])  # torch's own parser: every flag exists in this torch
    assert (int(parsed.nproc_per_node), int(parsed.nnodes)) == (values["nproc_per_node"], values["nnodes"])
    assert parsed.module and parsed.training_script == "trainer.train"
    assert parsed.training_script_args == tf.trainer_argv(values, python="py")[3:]
    assert parsed.log_dir == "/ws/runs/demo/ranks" and parsed.tee == "3"
    assert parsed.shutdown_timeout == launcher.STOP_GRACE_S  # torchrun never kills a save before the studio would
    if values["nnodes"] > 1:
        assert not parsed.standalone and parsed.rdzv_backend == "static"
        assert (parsed.rdzv_endpoint, parsed.node_rank) == (values["rdzv_endpoint"], values["node_rank"])
    else:
        assert parsed.standalone


@pytest.mark.parametrize("fields, message", [
    ({"nnodes": 2}, r"^--rdzv-endpoint: 2 nodes need the rendezvous address HOST:PORT of node 0$"),
    ({"nproc_per_node": 0}, r"^--nproc-per-node: processes per node must be at least 1, got 0$"),
    ({"nproc_per_node": 1.5}, r"^--nproc-per-node: expected a whole number, got 1\.5$"),
    ({"nnodes": "two"}, r"^--nnodes: expected a number, got 'two'$"),
    ({"nnodes": 0}, r"^--nnodes: nodes must be at least 1, got 0$"),
    ({"nnodes": 2, "rdzv_endpoint": "node0"}, r"^--rdzv-endpoint: expected HOST:PORT \(port 1-65535\), got 'node0'$"),
    ({"nnodes": 2, "rdzv_endpoint": "node0:70000"}, r"^--rdzv-endpoint: expected HOST:PORT"),
    ({"nnodes": 2, "rdzv_endpoint": "node0:29500", "node_rank": 2}, r"^--node-rank: expected 0 \.\. 1 for 2 nodes"),
])
def test_launcher_combinations_torchrun_cannot_run_are_refused_in_one_line(fields: dict[str, Any],
                                                                          message: str) -> None:
    form, ticked, resume_from = tf.form_from_values(_launch_values())
    names = [option.name for option in tf.FIELD_OPTIONS]
    for name, raw in fields.items():
        form[names.index(name)] = raw
    with pytest.raises(tf.FormError, match=message) as refused:
        tf.values_from_form(form, ticked, resume_from)
    assert "\n" not in str(refused.value)


def test_saved_form_presets_and_recorded_commands_keep_the_launcher_fields() -> None:
    values = _launch_values(nproc_per_node=4, nnodes=2, rdzv_endpoint="10.0.0.5:29500", node_rank=1)
    text = tf.form_yaml(values)
    assert "launcher:\n  nproc_per_node: 4\n  nnodes: 2\n" in text
    assert tf.values_from_yaml(text)[0] == values
    assert tf.values_from_yaml("launcher:\n  nproc_per_node: 2\n  gpus: 3\n")[1] == ["ignored unknown launcher field 'gpus'"]
    with pytest.raises(tf.FormError, match=r"^--rdzv-endpoint: 2 nodes need"):
        tf.values_from_yaml("launcher:\n  nnodes: 2\n")
    for preset in tf.preset_names():
        kept = tf.apply_preset(preset, values, _files(Path("/ws")))
        assert {key: kept[key] for key in launcher.LAUNCH_KEYS} == launcher.values_of(launcher.launch_of(values))
    assert tf.values_from_trainer_argv(tf.run_argv(values, python="/py")) == values  # a reload shows it again
    assert tf.values_from_trainer_argv(["/py", "-m", "torch.distributed.run", "--nproc-per-node", "2", "x.py"]) is None


def test_preflight_plans_for_every_process_start_would_launch(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    single = tf.preflight_argv(_launch_values(), report, python="py")
    assert "--preflight-processes" not in single and single[-3:] == ["--preflight", "--preflight-json", str(report)]
    several = tf.preflight_argv(_launch_values(nproc_per_node=4, nnodes=2, rdzv_endpoint="node0:29500",
                                               node_rank=0), report, python="py")
    assert several[-2:] == ["--preflight-processes", "8"]
    assert parse_argv(several[3:])["preflight_processes"] == 8


def test_indextts25_presets_and_fields(demo_workspace) -> None:
    """The 2.5 demo preset is the 2.5 demo's command; the text-scheme fields apply to 2.5 runs only."""
    from generations.indextts25.demo.build import DemoPaths as DemoV25Paths

    assert {DEMO_V25_PRESET, GPU80_V25_PRESET, LORA24_V25_PRESET} <= set(tf.preset_names())
    ws = DemoV25Paths.under(demo_workspace.root)
    files = tf.demo_preset_files(demo_workspace.root, DEMO_V25_PRESET)
    values = tf.apply_preset(DEMO_V25_PRESET, {"resume": "auto"}, files)
    demo = parse_argv(ws.train_argv())
    for name in ("train_manifest", "val_manifest", "tokenizer", "config", "base_checkpoint", "output_dir",
                 "max_steps", "learning_rate", "batch_size", "device", "amp", "text_scheme"):
        assert values[name] == demo[name], name
    assert values["resume"] == "" and round_trip(values) == values
    for preset in (GPU80_V25_PRESET, LORA24_V25_PRESET):
        assert tf.apply_preset(preset, values, files)["text_scheme"] == "merges"
    option = trainer_options.option_by_name
    for name in ("text_scheme", "text_merges"):
        assert tf.applies(option(name), "2.5") and tf.applies(option(name), None)
        assert not tf.applies(option(name), "2") and not tf.applies(option(name), "1.5")
        assert tf.field_info(option(name), "1.5").endswith("applies to IndexTTS-2.5 runs only")
    # the S2Mel decoder's prompt: IndexTTS2 and 2.5 have one, IndexTTS-1.5 not
    assert tf.applies(option("s2mel_prompt"), "2") and tf.applies(option("s2mel_prompt"), "2.5")
    assert not tf.applies(option("s2mel_prompt"), "1.5")
    assert tf.field_info(option("s2mel_prompt"), "1.5").endswith("applies to IndexTTS2 and IndexTTS-2.5 runs only")
    for name in ("sample_model_dir", "sample_steps"):  # 2.5 speaks samples through a download folder, as v2
        assert tf.applies(option(name), "2.5") and tf.field_info(option(name), "2.5") == f"{option(name).flag}: {option(name).help}"
    assert not tf.applies(option("vocoder"), "2.5") and tf.field_info(option("vocoder"), "2.5") == by_id("2.5").form.not_for
    assert values["sample_model_dir"] == str(ws.config.parent) == demo["sample_model_dir"]  # the demo speaks
    assert tf.field_label(option("train_manifest"), "2.5") == "Training data * (IndexTTS-2.5 paired manifest)"


def test_every_field_reads_as_plain_words_with_its_flag_under_it_once() -> None:
    """Issue 40: a newcomer reads what a field decides, not a flag; the flag is in the small text under it, where
    a person who knows the CLI looks. Every option the form offers appears once, with both."""
    import collections

    shown = collections.Counter(option.name for option in tf.FIELD_OPTIONS)
    assert [name for name, count in shown.items() if count > 1] == []
    labels = [tf.field_label(option, None) for option in tf.FIELD_OPTIONS]
    assert len(set(labels)) == len(labels)
    for option, label in zip(tf.FIELD_OPTIONS, labels):
        assert not label.startswith("-") and "--" not in label, label
        assert label[0].isupper() and len(label) <= 60, label
        assert tf.field_info(option, None).startswith(f"{option.flag}: "), option.name
