"""The Projection seam (dpuprof.projection): schema, atomic write, validated read."""

from __future__ import annotations

import json

import pytest

from dpuprof.projection.schema import PROJECTION_VERSION, Projection
from dpuprof.projection.store import path_for, read, write


def minimal(**kw):
    obj = {"projection_version": PROJECTION_VERSION, "recording": "r.rec",
           "by_category": {"crypto": {"before_s": 2.0, "after_s": 0.5, "freed_s": 1.5}},
           "speedup": {"low": 1.0, "expected": 1.2, "high": 1.4, "regime": "inline"}}
    obj.update(kw)
    return obj


def test_round_trip_and_typed_fields(tmp_path):
    out = write(minimal(future_key=[1, 2]), tmp_path / "r.proj.json")
    p = read(out)
    assert p.speedup.expected == 1.2 and p.speedup.regime == "inline"
    assert p.by_category["crypto"].freed_s == 1.5
    assert json.loads(out.read_text())["future_key"] == [1, 2]  # extra keys are kept
    assert [f.name for f in tmp_path.iterdir()] == ["r.proj.json"]  # no temporary file left


@pytest.mark.parametrize("bad, why", [
    (minimal(projection_version=99), "projection_version"),
    (minimal(by_category={"gpu": {"before_s": 1, "after_s": 1, "freed_s": 0}}), "unknown categories"),
    (minimal(speedup={"expected": "fast"}), "speedup.expected"),
    (minimal(rows=[{"category": "crypto"}]), "rows.0.subcategory"),
])
def test_bad_projections_fail_with_one_line(tmp_path, bad, why):
    f = tmp_path / "bad.proj.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(ValueError) as err:
        read(f)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_nan_is_refused(tmp_path):
    f = tmp_path / "nan.proj.json"
    f.write_text(json.dumps(minimal()).replace("1.2", "NaN"))
    with pytest.raises(ValueError, match="NaN"):
        read(f)


def test_version_1_files_still_read(tmp_path):
    f = tmp_path / "v1.proj.json"
    f.write_text(json.dumps(minimal(projection_version=1, speedup={"low": 1.0, "expected": 1.3, "high": 1.3})))
    p = read(f)
    assert p.speedup.regime == "unknown" and p.speedup.expected == 1.3


def test_json_schema_and_path_rule():
    schema = Projection.model_json_schema()
    assert "speedup" in schema["properties"] and "projection_version" in schema["required"]
    assert path_for("dir/run.rec").name == "run.proj.json"


def test_what_the_command_line_adds_is_typed_and_old_files_default_it(tmp_path):
    """``--set`` and the all-reduce block are schema fields: the renderers read them without
    guards; a file written before they were typed reads with the defaults."""
    old = read(write(minimal(), tmp_path / "old.proj.json"))
    assert old.set is None and old.allreduce is None and old.dpu.name is None and old.capacity == []
    ar = {"nodes": 4, "gpus_per_node": 8, "tcp_us": 3582.9, "rdma_us": 380.0, "assumptions": ["ring"],
          "vendor_comparison": None, "future": 1}
    cap = {"resource": "arm_cores", "unit": "cores", "demand": 0.5, "limit": 16.0, "bottleneck": False}
    p = read(write(minimal(set=["rdma.mode=sync"], allreduce=ar, capacity=[cap],
                           dpu={"name": "bluefield-3", "description": "BlueField-3", "aliases": ["bluefield"]}),
                   tmp_path / "new.proj.json"))
    assert p.set == ["rdma.mode=sync"] and p.allreduce.nodes == 4 and p.allreduce.rdma_us == 380.0
    assert p.capacity[0].limit == 16.0 and p.dpu.name == "bluefield-3"
    # extra keys of the typed blocks are kept, in the order written
    assert list(p.as_json()["allreduce"])[-1] == "future" and p.as_json()["dpu"]["aliases"] == ["bluefield"]
    bad = tmp_path / "bad.proj.json"
    bad.write_text(json.dumps(minimal(allreduce={"nodes": "many"})))
    with pytest.raises(ValueError, match="allreduce.nodes"):
        read(bad)
