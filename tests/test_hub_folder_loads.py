"""Issue 31 item 1, last acceptance point: a folder downloaded from the (local, Hub-like) server loads strictly.

The demo's tiny IndexTTS-1.5, IndexTTS2 and IndexTTS-2.5 download folders are served under the real repository ids and file
names (IndexTeam/IndexTTS-2, amphion/MaskGCT, funasr/campplus, nvidia/bigvgan_v2_22khz_80band_256x,
facebook/w2v-bert-2.0), fetched with ``trainer.models`` into upstream's layout, and then loaded by the same
strict loaders synthesis uses; the IndexTTS2 and 1.5 folders' config.yaml and gpt.pth also start a training run
(the IndexTTS2 run's export is then published (item 2) to a new private repository on the same kind of server).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts2.hub import MODEL_SET as INDEXTTS_2
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.indextts25.hub import MODEL_SET as INDEXTTS_25
from tests.hub_server import FakeHub, serve
from tests.trainer_helpers import events, run_main
from trainer.checkpoints import export_checkpoint
from trainer.models.catalog import ModelSet
from trainer.models.fetch import fetch_set
from trainer.models.publish import publish_export
from trainer.models.record import downloaded_model_dirs, read_record


def hub_serving(folder: Path, model_set: ModelSet, flat: bool = False) -> FakeHub:
    """The set's repositories, their files read from a demo folder (``flat``: the hub's files sit at its root)."""
    repos: dict[str, dict[str, bytes]] = {}
    for source in model_set.sources:
        locals_ = {name: source.local_path(name).removeprefix("hf_cache/" if flat else "") for name in source.files}
        repos[source.repo_id] = {name: (folder / local).read_bytes() for name, local in locals_.items()
                                 if (folder / local).is_file()}
    return FakeHub(repos, licences={"facebook/w2v-bert-2.0": "mit"})


@pytest.fixture
def hub_env(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return monkeypatch


def test_downloaded_indextts2_folder_loads_strictly_and_trains(hub_env, demo_workspace, tmp_path):
    from networks.indextts2 import load_indextts2

    demo = DemoV2Paths.under(demo_workspace.root)
    workspace = tmp_path / "ws"
    folder = workspace / "models" / INDEXTTS_2.folder
    with serve(hub_serving(demo.config.parent, INDEXTTS_2)) as url:
        hub_env.setenv("HF_ENDPOINT", url)
        fetch_set(INDEXTTS_2, folder, progress=False, say=lambda line: None)
    assert read_record(folder)["sources"]["facebook/w2v-bert-2.0@w2v-bert-2.0"]["licence"] == "mit"
    networks = load_indextts2(folder, local_files_only=True)  # every network strictly, w2v-BERT from w2v-bert-2.0/
    assert networks.gpt is not None and networks.files.semantic_codec == folder / "semantic_codec" / "model.safetensors"
    assert [(m.set_name, m.path, m.complete) for m in downloaded_model_dirs(workspace, "generation")] == [
        ("indextts-2", folder, True)]

    out = tmp_path / "run"
    code = run_main(["--train-manifest", str(demo.train_manifest), "--val-manifest", str(demo.val_manifest),
                     "--tokenizer", str(demo.extended_tokenizer), "--config", str(folder / "config.yaml"),
                     "--base-checkpoint", str(folder / "gpt.pth"), "--output-dir", str(out), "--max-steps", "2",
                     "--batch-size", "2", "--val-interval", "1000", "--save-interval", "2", "--num-workers", "0",
                     "--device", "cpu", "--amp", "off", "--max-val-batches", "1"])
    assert code == 0
    assert [e["step"] for e in events(out, "train")][-1] == 2 and (out / "latest.pth").is_file()

    # item 2: the run's export goes up to a repository the user names, private by default
    bundle = tmp_path / "export"
    export_checkpoint(out / "latest.pth", bundle, config=folder / "config.yaml")
    publish_hub = FakeHub({})
    with serve(publish_hub) as url:
        hub_env.setenv("HF_ENDPOINT", url)
        report = publish_export(bundle, "me/indextts2-amharic", token="hf_test_token")
    uploaded = publish_hub.repos["me/indextts2-amharic"]
    assert publish_hub.private["me/indextts2-amharic"] is True and report.private
    files = [p for p in bundle.iterdir() if p.is_file()]  # the base model's folders (bigvgan/, ...) stay home
    assert sorted(uploaded) == sorted([p.name for p in files] + ["README.md"])
    assert {"gpt.pth", "config.yaml", "LICENSE-NOTICE", "MODEL_CARD.md"} <= set(uploaded)
    assert all(uploaded[p.name] == p.read_bytes() for p in files)
    assert uploaded["README.md"].decode().startswith("---\nlicense: other\n")


def test_downloaded_indextts25_folder_loads_strictly_from_its_hf_cache(hub_env, demo_workspace, tmp_path):
    from networks.indextts25 import load_indextts25

    demo = DemoV25Paths.under(demo_workspace.root)
    folder = tmp_path / INDEXTTS_25.folder
    with serve(hub_serving(demo.config.parent, INDEXTTS_25, flat=True)) as url:
        hub_env.setenv("HF_ENDPOINT", url)
        fetch_set(INDEXTTS_25, folder, progress=False, say=lambda line: None)
    assert (folder / "hf_cache" / "bigvgan" / "bigvgan_generator.pt").is_file()
    assert not (folder / "bigvgan").exists()  # upstream's layout: what it fetches at run time sits in hf_cache/
    networks = load_indextts25(folder, local_files_only=True)
    assert networks.gpt is not None and networks.files.campplus == folder / "hf_cache" / "campplus_cn_common.bin"


def test_downloaded_indextts15_folder_loads_its_dvae_strictly_and_trains(hub_env, demo_workspace, tmp_path):
    import yaml

    from generations.indextts15.hub import MODEL_SET as INDEXTTS_15
    from networks.indextts15 import load_dvae

    folder = tmp_path / INDEXTTS_15.folder
    with serve(hub_serving(demo_workspace.config.parent, INDEXTTS_15)) as url:
        hub_env.setenv("HF_ENDPOINT", url)
        fetch_set(INDEXTTS_15, folder, progress=False, say=lambda line: None)
    assert sorted(p.name for p in folder.iterdir()) == ["bigvgan_generator.pth", "bpe.model", "config.yaml",
                                                        "dvae.pth", "gpt.pth", "hub_download.json"]
    load_dvae(folder / "dvae.pth", yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")))
    out = tmp_path / "run"
    code = run_main(["--train-manifest", str(demo_workspace.train_manifest), "--val-manifest",
                     str(demo_workspace.val_manifest), "--tokenizer", str(demo_workspace.extended_tokenizer),
                     "--config", str(folder / "config.yaml"), "--base-checkpoint", str(folder / "gpt.pth"),
                     "--output-dir", str(out), "--max-steps", "1", "--batch-size", "2", "--val-interval", "1000",
                     "--save-interval", "1", "--num-workers", "0", "--device", "cpu", "--amp", "off"])
    assert code == 0 and (out / "latest.pth").is_file()
