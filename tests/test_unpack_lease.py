"""scripts/unpack_lease.py: a lease's archive unpacked without losing an earlier lease's records of other code."""

import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "unpack_lease.py"
spec = importlib.util.spec_from_file_location("unpack_lease", SCRIPT)
unpack_lease = importlib.util.module_from_spec(spec)
spec.loader.exec_module(unpack_lease)


def archive(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def record(commit: str, seconds: float) -> bytes:
    return json.dumps({"commit": commit, "seeds": [{"seed": 2, "seconds_to_target": seconds}]}).encode()


def repository(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A repository root holding `files` (paths under results/)."""
    root = tmp_path / "repo"
    (root / "results").mkdir(parents=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


def test_a_record_of_another_commit_is_kept_under_its_commit_s_name(tmp_path):
    name = "results/gpu-time-to-dev-bleu50-lease-seed2-h200.json"
    root = repository(tmp_path, {name: record("4f81733", 84.1),
                                 "results/gpu-bench-transformer-eager-h200.json": record("7076217", 1.0)})
    tgz = archive(tmp_path / "lease.tgz", {name: record("b438195", 74.0),
                                           "results/gpu-bench-transformer-eager-h200.json": record("7076217", 2.0),
                                           "gpu-session/lease/seed2.h200.b438195.done": b""})
    said = unpack_lease.unpack(tgz, root)
    kept = root / "results/gpu-time-to-dev-bleu50-lease-seed2-4f81733-h200.json"
    assert json.loads(kept.read_text())["seeds"][0]["seconds_to_target"] == 84.1
    assert json.loads((root / name).read_text())["commit"] == "b438195"
    # the same commit's record, a step run again, is replaced, not kept
    assert json.loads((root / "results/gpu-bench-transformer-eager-h200.json").read_text())["seeds"][0][
        "seconds_to_target"] == 2.0
    assert said == [f"{name} (4f81733) kept as results/gpu-time-to-dev-bleu50-lease-seed2-4f81733-h200.json"]
    assert (root / "gpu-session/lease/seed2.h200.b438195.done").exists()


def test_a_member_outside_the_repository_is_refused_before_anything_moves(tmp_path):
    name = "results/gpu-bench-transformer-eager-h200.json"
    root = repository(tmp_path, {name: record("4f81733", 1.0)})
    tgz = archive(tmp_path / "evil.tgz", {name: record("b438195", 2.0), "../outside.txt": b"x"})
    with pytest.raises(tarfile.FilterError):
        unpack_lease.unpack(tgz, root)
    assert not (tmp_path / "outside.txt").exists()
    assert json.loads((root / name).read_text())["commit"] == "4f81733"  # not moved aside
    assert sorted(p.name for p in (root / "results").iterdir()) == ["gpu-bench-transformer-eager-h200.json"]


def test_a_kept_record_is_never_replaced_and_nothing_moves(tmp_path):
    name = "results/gpu-bench-transformer-eager-h200.json"
    movable = "results/gpu-bench-transformer-compiled-h200.json"  # before the refused one: must not move either
    root = repository(tmp_path, {movable: record("4f81733", 3.0), name: record("4f81733", 1.0),
                                 "results/gpu-bench-transformer-eager-4f81733-h200.json": record("4f81733", 0.5)})
    tgz = archive(tmp_path / "lease.tgz", {movable: record("b438195", 4.0), name: record("b438195", 2.0)})
    with pytest.raises(SystemExit, match="exists"):
        unpack_lease.unpack(tgz, root)
    kept = json.loads((root / "results/gpu-bench-transformer-eager-4f81733-h200.json").read_text())
    assert kept["seeds"][0]["seconds_to_target"] == 0.5
    assert sorted(p.name for p in (root / "results").iterdir()) == [
        "gpu-bench-transformer-compiled-h200.json", "gpu-bench-transformer-eager-4f81733-h200.json",
        "gpu-bench-transformer-eager-h200.json"]
    assert json.loads((root / movable).read_text())["seeds"][0]["seconds_to_target"] == 3.0
