"""``--format pprof``: the gzipped profile.proto parses back, with the same stacks and totals as the
folded output, on every fixture; ``go tool pprof`` (a real pprof reader) reads it where Go is
installed; the run-time schema equals protoc's compilation of the vendored profile.proto."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_report_render import FIXTURE_PARAMS, render, report_for, synth  # noqa: E402,F401

from dpuprof.categories import CATEGORIES  # noqa: E402
from dpuprof.render.formats.folded import parse_folded  # noqa: E402
from dpuprof.render.formats.pprof import TYPES  # noqa: E402

pytest.importorskip("google.protobuf")
from dpuprof.render.formats.pprof_schema import file_descriptor, profile_class  # noqa: E402

GO = shutil.which("go")


def parse(data: bytes):
    prof = profile_class()()
    prof.ParseFromString(gzip.decompress(data))
    return prof


def folded_of(prof) -> dict[str, int]:
    """{folded stack: samples} rebuilt from the profile (locations are leaf first)."""
    st = prof.string_table
    names = {f.id: st[f.name] for f in prof.function}
    loc = {l.id: names[l.line[0].function_id] for l in prof.location}
    out: dict[str, int] = {}
    for s in prof.sample:
        key = ";".join(loc[i] for i in reversed(s.location_id))
        out[key] = out.get(key, 0) + s.value[0]
    return out


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_pprof_parses_back_with_the_folded_totals(fixture):
    rep = report_for(fixture)
    prof = parse(render(rep, "pprof").main)
    folded = parse_folded(render(rep, "folded").main.decode())
    st = prof.string_table
    assert [st[t.type] for t in prof.sample_type] == list(TYPES)
    assert st[prof.default_sample_type] == "cpu" and prof.period > 0
    assert folded_of(prof) == folded
    samples = sum(s.value[0] for s in prof.sample)
    assert samples == sum(folded.values()) > 0
    cpu = sum(s.value[1] for s in prof.sample)
    assert cpu == samples * prof.period
    per_cat = [sum(s.value[2 + i] for s in prof.sample) for i in range(len(CATEGORIES))]
    assert sum(per_cat) == cpu
    # each category column holds exactly that category's samples (labels agree)
    for i, cat in enumerate(CATEGORIES):
        want = sum(s.value[1] for s in prof.sample
                   if any(st[lb.key] == "category" and st[lb.str] == cat for lb in s.label))
        assert per_cat[i] == want
    assert abs(prof.time_nanos / 1e9 - rep.main.meta.start_time) < 1e-3


def test_pprof_of_a_comparison_names_both_runs(synth):
    prof = parse(render(report_for(synth, synth, mode="compare"), "pprof").main)
    roots = {k.split(";")[0] for k in folded_of(prof)}
    assert roots == {"A: run#1", "B: run#2"}  # display_names of two equal paths


def _go_traces(path: Path) -> dict[str, int]:
    """{folded: samples} as ``go tool pprof -traces`` prints them (leaf first under each count)."""
    out = subprocess.run([GO, "tool", "pprof", "-sample_index=samples", "-traces", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stacks: dict[str, int] = {}
    for block in out.stdout.split("-----------+")[1:]:
        lines = [ln for ln in block.splitlines() if ln.strip() and not set(ln.strip()) <= {"-"}]
        for i, ln in enumerate(lines):
            m = re.match(r"^\s*(\d+)\s{3}(\S.*)$", ln)
            if m:
                frames = [m.group(2).strip()] + [x.strip() for x in lines[i + 1:]]
                key = ";".join(reversed(frames))
                stacks[key] = stacks.get(key, 0) + int(m.group(1))
                break
    return stacks


@pytest.mark.skipif(GO is None, reason="go is not installed (apt-get install golang-go): go tool pprof")
@pytest.mark.parametrize("fixture", FIXTURE_PARAMS[:2])
def test_go_tool_pprof_reads_the_same_stacks(fixture, tmp_path):
    rep = report_for(fixture)
    path = tmp_path / "run.pb.gz"
    path.write_bytes(render(rep, "pprof").main)
    folded = parse_folded(render(rep, "folded").main.decode())
    assert _go_traces(path) == folded


def test_runtime_schema_equals_protoc_compilation(tmp_path):
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools not installed")
    from google.protobuf import descriptor_pb2

    proto = Path(__file__).resolve().parents[1] / "dpuprof" / "render" / "formats" / "profile.proto"
    out = tmp_path / "profile.desc"
    assert protoc.main(["protoc", f"-I{proto.parent}", f"--descriptor_set_out={out}", str(proto)]) == 0
    ref = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    mine = file_descriptor(proto.read_text())
    assert mine.package == ref.package and mine.syntax == ref.syntax

    def fields(fdp):
        return {m.name: [(f.name, f.number, f.type, f.label, f.type_name) for f in m.field] for m in fdp.message_type}

    assert fields(mine) == fields(ref)


def test_schema_reader_refuses_what_it_does_not_understand():
    with pytest.raises(ValueError):
        file_descriptor('syntax = "proto3"; message A { map<string, int64> m = 1; }')
    with pytest.raises(ValueError):
        file_descriptor('syntax = "proto3"; message A { enum E { X = 0; } }')
