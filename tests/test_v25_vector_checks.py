"""IndexTTS-2.5 paired manifests with a broken speaker or emotion vector (issue 36): the pre-flight refuses exactly
when the trainer would, with the same one line, because both check the vectors with one function
(``generations.indextts25.data.manifest.pair_vectors_v25``); the data checker reports the same problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from trainer.options import options_to_argv
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight
from trainer.train import main as train_main

FIELDS = {"speaker": "prompt_spk_vec_path", "emotion": "prompt_emo_vec_path"}


def _break(case: str, target: Path, good: np.ndarray) -> str | None:
    """Damage ``target`` (a vector file) as ``case`` says; the manifest path to give instead, if any."""
    if case == "missing":
        target.unlink()
    elif case == "wrong_shape":
        np.save(target, np.zeros(good.size + 3, dtype=np.float32))
    elif case == "wrong_dtype":
        np.save(target, good.astype(np.int32))
    elif case == "nan_inf":
        broken = good.copy()
        broken[0], broken[1] = np.nan, np.inf
        np.save(target, broken)
    elif case == "too_large":  # finite, but far beyond any real feature: NaN losses at the first matmul
        broken = good.copy()
        broken[0] = 1e30
        np.save(target, broken)
    elif case == "empty":
        target.write_bytes(b"")
    elif case == "outside_the_data_folder":  # an intact vector beside the data folder: paths may lead anywhere
        outside = target.parents[2] / f"outside_{target.name}"
        np.save(outside, good)
        return f"../{outside.name}"
    elif case == "not_numpy":
        target.write_bytes(b"PK\x03\x04 a zip, not a .npy file")
    return None


def pair_data(ws: DemoV25Paths, folder: Path) -> tuple[Path, Path, list[dict]]:
    """Four training and two validation pairs of the demo, their files copied into ``folder``."""
    source = ws.train_manifest.parent
    manifests = []
    for name, count in ((ws.train_manifest.name, 4), (ws.val_manifest.name, 2)):
        lines = [json.loads(line) for line in (source / name).read_text(encoding="utf-8").splitlines()[:count]]
        for line in lines:
            for key in ("prompt_spk_vec_path", "prompt_emo_vec_path", "target_codes_path"):
                (folder / line[key]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source / line[key], folder / line[key])
        manifests.append((folder / name, lines))
    for path, lines in manifests:
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return manifests[0][0], manifests[1][0], manifests[0][1]


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("case", ["missing", "wrong_shape", "wrong_dtype", "nan_inf", "too_large", "empty",
                                  "outside_the_data_folder", "not_numpy"])
def test_preflight_refuses_a_broken_vector_exactly_when_the_trainer_does(
        demo_workspace, tmp_path: Path, capsys, case: str, field: str) -> None:
    ws = DemoV25Paths.under(demo_workspace.root)
    train, val, lines = pair_data(ws, tmp_path / "data" / "pairs")
    key = FIELDS[field]
    target = train.parent / lines[1][key]
    replacement = _break(case, target, np.load(target))
    if replacement is not None:
        lines[1][key] = replacement
        train.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    opts = parse_argv(ws.train_argv())
    # Two steps of two: the trainer reads every training item's vectors, whenever it checks them.
    opts.update(train_manifest=[str(train)], val_manifest=[str(val)], output_dir=str(tmp_path / "run"),
                max_steps=2, batch_size=2, save_interval=100, val_interval=1000, num_workers=0, device="cpu")
    refusal = run_preflight(opts).refusal
    capsys.readouterr()
    code = train_main(options_to_argv(opts))
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    if refusal is None:
        assert (code, errors) == (0, []), errors
        assert case == "outside_the_data_folder"  # the only intact vector of these
    else:
        assert (code, errors) == (2, [f"error: {refusal}"])
        assert refusal.startswith(f"{train}:2: ") and str(target.parent) in refusal, refusal
