"""dpuprof report: every renderer on every fixture, the exports' formats, compare and merge.

Fixture tests parametrize over fixtures/*/recording.rec, and read private copies of them (conftest
``fixture_copy``). A synthetic recording (written at test time with the real RecordingWriter, see
test_report_synth.py) covers the edge cases the fixtures lack.
"""

from __future__ import annotations

import glob
import html.parser
import io
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_report_synth import make_projection, make_recording

from dpuprof.categories import CATEGORIES, INFRASTRUCTURE
from dpuprof.errors import UserError
from dpuprof.recording import load
from dpuprof.recording.summary import summarize
from dpuprof.render import registry
from dpuprof.render.build import build_report
from dpuprof.recording.folded import parse as parse_folded

ROOT = Path(__file__).resolve().parents[1]
# DPUPROF_FIXTURES: another glob of recordings to run these tests on (e.g. scratch recordings)
FIXTURES = sorted(Path(p) for p in glob.glob(os.environ.get("DPUPROF_FIXTURES",
                                                            str(ROOT / "fixtures/*/recording.rec"))))
NO_FIXTURE = pytest.param(None, marks=pytest.mark.skip(
    reason="no fixtures/*/recording.rec yet: the fixtures are recorded by the record issue"))
FIXTURE_PARAMS = [pytest.param(p, id=p.parent.name if p.name == "recording.rec" else p.stem)
                  for p in FIXTURES] or [NO_FIXTURE]
FORMATS = registry.names()

# speedscope's file format schema, https://www.speedscope.app/file-format-schema.json
# (jlfwong/speedscope, file-format-schema.json at commit e341b0a4), compacted.
_N = {"type": "number"}
SPEEDSCOPE_SCHEMA = {
    "$schema": "http://json-schema.org/draft-06/schema#",
    "definitions": {
        "FileFormat.File": {
            "type": "object",
            "properties": {
                "$schema": {"type": "string", "enum": ["https://www.speedscope.app/file-format-schema.json"]},
                "shared": {"type": "object", "properties": {
                    "frames": {"type": "array", "items": {"$ref": "#/definitions/FileFormat.Frame"}}},
                    "required": ["frames"]},
                "profiles": {"type": "array", "items": {"anyOf": [
                    {"$ref": "#/definitions/FileFormat.EventedProfile"},
                    {"$ref": "#/definitions/FileFormat.SampledProfile"}]}},
                "name": {"type": "string"}, "activeProfileIndex": _N, "exporter": {"type": "string"}},
            "required": ["$schema", "profiles", "shared"]},
        "FileFormat.Frame": {"type": "object", "properties": {
            "name": {"type": "string"}, "file": {"type": "string"}, "line": _N, "col": _N},
            "required": ["name"]},
        "FileFormat.EventedProfile": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["evented"]}, "name": {"type": "string"},
            "unit": {"$ref": "#/definitions/FileFormat.ValueUnit"}, "startValue": _N, "endValue": _N,
            "events": {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/OpenFrameEvent"},
                                                            {"$ref": "#/definitions/CloseFrameEvent"}]}}},
            "required": ["endValue", "events", "name", "startValue", "type", "unit"]},
        "FileFormat.SampledProfile": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["sampled"]}, "name": {"type": "string"},
            "unit": {"$ref": "#/definitions/FileFormat.ValueUnit"}, "startValue": _N, "endValue": _N,
            "samples": {"type": "array", "items": {"type": "array", "items": _N}},
            "weights": {"type": "array", "items": _N}},
            "required": ["endValue", "name", "samples", "startValue", "type", "unit", "weights"]},
        "FileFormat.ValueUnit": {"type": "string", "enum": ["bytes", "microseconds", "milliseconds",
                                                            "nanoseconds", "none", "seconds"]},
        "OpenFrameEvent": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["O"]}, "frame": _N, "at": _N}, "required": ["at", "frame", "type"]},
        "CloseFrameEvent": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["C"]}, "frame": _N, "at": _N}, "required": ["at", "frame", "type"]},
    },
    "$ref": "#/definitions/FileFormat.File",
}


# ----------------------------------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("synth")
    rec = make_recording(d / "run.rec")
    make_projection(rec)
    return rec


_REPORTS: dict = {}


def report_for(*paths: Path, mode=None):
    key = (tuple(paths), mode)
    if key not in _REPORTS:
        _REPORTS[key] = build_report(list(paths), mode=mode)
    return _REPORTS[key]


def render(rep, fmt: str, tmp_path: Path | None = None):
    return registry.get(fmt)(rep, stem="report" if tmp_path else None)


def raw_stack_samples(path: Path) -> int:
    """Busy (non-idle) stack samples of every process but the recorder, straight from the SQLite file."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'recorder_pid'").fetchone()
        rpid = json.loads(row[0]) if row else -1
        return db.execute("SELECT COALESCE(SUM(ss.samples), 0) FROM stack_samples ss "
                          "JOIN stacks s USING (stack_id) WHERE s.category != 'idle' AND ss.pid != ?",
                          (rpid if isinstance(rpid, int) else -1,)).fetchone()[0]
    finally:
        db.close()


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpuprof", "report", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


class _Loads(html.parser.HTMLParser):
    """Collects every URL an HTML document makes the browser fetch (not the URLs it merely cites)."""

    #: (tag, attribute) pairs that load what they name; <a href> and xmlns only point or declare.
    LOADING = {("script", "src"), ("img", "src"), ("img", "srcset"), ("iframe", "src"),
               ("embed", "src"), ("source", "src"), ("source", "srcset"), ("audio", "src"),
               ("video", "src"), ("video", "poster"), ("track", "src"), ("input", "src"),
               ("object", "data"), ("link", "href"), ("image", "href"), ("image", "xlink:href"),
               ("use", "href"), ("use", "xlink:href"), ("feimage", "href"), ("frame", "src")}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if (tag, name) in self.LOADING and value:
                self.urls += [v.strip().split()[0] for v in value.split(",") if v.strip()] \
                    if name == "srcset" else [value.strip()]
            if name == "style" and value:
                self.urls += css_loads(value)
        kind = (dict(attrs).get("type") or "").lower()
        runs = tag == "script" and kind in ("", "module", "text/javascript", "application/javascript")
        self._in = "style" if tag == "style" else ("script" if runs else None)  # JSON data never runs

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "style":
            self.urls += css_loads(data)
        elif self._in == "script":
            self.urls += js_loads(data)


def css_loads(css: str) -> list[str]:
    """URLs a stylesheet fetches: url(...) and @import."""
    found = re.findall(r"""url\(\s*['"]?([^'")\s]+)""", css, flags=re.I)
    found += re.findall(r"""@import\s+(?:url\()?\s*['"]?([^'");\s]+)""", css, flags=re.I)
    return found


def js_loads(js: str) -> list[str]:
    """URLs a script fetches by itself: import, import(), importScripts, fetch, new Worker."""
    pattern = (r"""(?:\bimport\s*\(|\bimport\s[^;'"]*?\bfrom\s*|\bimport\s*|importScripts\s*\(|"""
               r"""\bfetch\s*\(|new\s+(?:Shared)?Worker\s*\()\s*['"`]([^'"`]+)['"`]""")
    return re.findall(pattern, js)


def external_loads(document: str) -> list[str]:
    """What an HTML report would fetch from anywhere but itself (data: URLs and #fragments are inline)."""
    parser = _Loads()
    parser.feed(document)
    parser.close()
    return [u for u in parser.urls if not u.lower().startswith(("data:", "#"))]


def check_output(fmt: str, rendered, rec_path: Path) -> None:
    """Format-specific checks of one rendered report."""
    data = rendered.main
    if fmt == "html":
        text = data.decode()
        assert text.startswith("<!doctype html>") and "data:image/png;base64," in text
        assert external_loads(text) == []
    elif fmt == "json":
        assert json.loads(data)["host_cpu"] == summarize(load(rec_path))["host_cpu"]
    elif fmt == "markdown":
        text = data.decode()
        assert "| Metric |" in text
        assert all(name.endswith(".png") and png[:8] == b"\x89PNG\r\n\x1a\n" for name, png in rendered.extra.items())
        assert all(f"]({name})" in text for name in rendered.extra)
    elif fmt == "png":
        assert rendered.binary and data[:8] == b"\x89PNG\r\n\x1a\n"
    elif fmt == "folded":
        parsed = parse_folded(data.decode())
        assert sum(parsed.values()) == raw_stack_samples(rec_path)
    elif fmt == "speedscope":
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(json.loads(data), SPEEDSCOPE_SCHEMA)
    elif fmt == "perfetto":
        events = json.loads(data)["traceEvents"]
        assert events and all(e["ph"] in ("C", "M", "i") for e in events)
    elif fmt == "pprof":
        assert rendered.binary and data[:2] == b"\x1f\x8b"  # gzip (tests/test_report_pprof.py parses it)
    elif fmt == "terminal":
        assert "Measured, not claimed" in data.decode()


# ----------------------------------------------------------------------------- every renderer x fixture

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_renderer_on_fixture(fixture, fmt, tmp_path, fixture_copy):
    fixture = fixture_copy(fixture)
    rep = report_for(fixture)
    rendered = render(rep, fmt, tmp_path if fmt == "markdown" else None)
    check_output(fmt, rendered, fixture)


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_html_with_its_projection_loads_nothing_external(fixture, fixture_copy, tmp_path):
    """The report a user gets after README's commands: the projection's cited sources (https://...)
    are text, and the file still fetches nothing."""
    rec = fixture_copy(fixture, into=tmp_path)
    res = subprocess.run([sys.executable, "-m", "dpuprof", "project", str(rec), "--dpu", "bluefield",
                          "--format", "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "recording.proj.json").exists()
    rep = build_report([rec])
    assert rep.main.projection is not None
    text = render(rep, "html").main.decode()
    assert "https://" in text  # the cited sources are shown ...
    assert external_loads(text) == []  # ... and nothing is fetched


def test_external_loads_tells_a_load_from_a_citation():
    cited = ('<p>source: https://docs.nvidia.com/x</p><a href="https://example.org">x</a>'
             '<svg xmlns="http://www.w3.org/2000/svg"></svg><img src="data:image/png;base64,AA">'
             '<script type="application/json">{"u": "import(\'https://x\')"}</script>'
             '<style>a{color:red}</style><script>const s = "see https://a.b";</script>')
    assert external_loads(cited) == []
    for loads in ('<script src="https://cdn/x.js"></script>', '<link rel="stylesheet" href="r.css">',
                  '<style>body{background:url("https://x/y.png")}</style>', '<style>@import "x.css";</style>',
                  '<div style="background: url(x.png)"></div>', '<img srcset="a.png 1x, b.png 2x">',
                  '<script type="module">import {a} from "https://x/m.js";</script>',
                  '<script>import("./m.js"); fetch("https://x/d")</script>', '<svg><image href="p.png"/></svg>'):
        assert external_loads(loads), loads


@pytest.mark.parametrize("fmt", FORMATS)
def test_renderer_on_synthetic(synth, fmt, tmp_path):
    rendered = render(report_for(synth), fmt, tmp_path if fmt == "markdown" else None)
    check_output(fmt, rendered, synth)


@pytest.mark.parametrize("mode", ["compare", "merge"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_renderer_on_several_recordings(synth, tmp_path, fmt, mode):
    other = tmp_path / "other.rec"
    make_recording(other, seed=7, host="other-host")
    make_projection(other)
    rep = report_for(synth, other, mode=mode)
    rendered = render(rep, fmt, tmp_path if fmt == "markdown" else None)
    assert rendered.main
    if fmt == "speedscope":
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(json.loads(rendered.main), SPEEDSCOPE_SCHEMA)
    if fmt == "folded":
        assert sum(parse_folded(rendered.main.decode()).values()) == (
            raw_stack_samples(synth) + raw_stack_samples(other))


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_cli_json_is_the_summary_contract(fixture, fixture_copy):
    from click.testing import CliRunner

    fixture = fixture_copy(fixture)
    from dpuprof.cli import cli as dpuprof_cli

    res = CliRunner().invoke(dpuprof_cli, ["report", str(fixture), "--format", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    want = summarize(load(fixture))
    # the report adds lost_shares and recorder (and window, projection) to the recording summary
    added = ("projection", "lost_shares", "recorder", "observer_cost", "window", "gpu", "gpu_note", "steps",
             "kernel_by_cause")
    assert {k: v for k, v in got.items() if k not in added} == json.loads(json.dumps(want))
    assert [x["kind"] for x in got["lost_shares"]] and got["recorder"]["pid"] == load(fixture).meta["recorder_pid"]


def test_cli_writes_html(synth, tmp_path):
    out = tmp_path / "r.html"
    res = cli(synth, "-q", "-o", out)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == "", res.stderr
    assert out.stat().st_size > 10_000 and not out.stat().st_mode & 0o002  # never world-writable
    assert not list(tmp_path.glob(".r.html.*.tmp"))


# ----------------------------------------------------------------------------- format details

def test_speedscope_validates_and_weights_add_up(synth):
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(render(report_for(synth), "speedscope").main)
    jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    rep = report_for(synth)
    hz = rep.main.meta.sample_freq_hz
    everything = doc["profiles"][0]
    assert everything["unit"] == "seconds"
    assert math.isclose(sum(everything["weights"]), rep.main.stacks["samples"].sum() / hz, rel_tol=1e-6)
    names = [p["name"] for p in doc["profiles"]]
    assert set(names[1:]) <= set(INFRASTRUCTURE)
    for p in doc["profiles"]:
        assert len(p["samples"]) == len(p["weights"])
        assert all(0 <= i < len(doc["shared"]["frames"]) for s in p["samples"] for i in s)


def test_speedscope_schema_rejects_a_broken_file():
    jsonschema = pytest.importorskip("jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"$schema": "https://www.speedscope.app/file-format-schema.json", "shared": {"frames": []},
                             "profiles": [{"type": "sampled", "name": "x", "unit": "cycles", "startValue": 0,
                                           "endValue": 1, "samples": [], "weights": []}]}, SPEEDSCOPE_SCHEMA)


def test_folded_round_trips_through_the_parser(synth):
    rep = report_for(synth)
    text = render(rep, "folded").main.decode()
    parsed = parse_folded(text)
    want = rep.main.stacks.groupby("folded")["samples"].sum()
    assert parsed == {k: int(v) for k, v in want.items()}
    # flamegraph.pl's own reading: the count is what follows the last space
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        assert count.isdigit() and "\n" not in stack and stack.split(";")[0] in ("python3", "pt_data_worker",
                                                                                   "ksoftirqd/0")
    # re-serialising the parse gives the same text
    assert "".join(f"{k} {v}\n" for k, v in sorted(parsed.items())) == text
    with pytest.raises(ValueError):
        parse_folded("a;b;c\n")


def test_perfetto_has_a_counter_track_per_category(synth):
    events = json.loads(render(report_for(synth), "perfetto").main)["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    host = [e for e in events if e["name"] == "host cpu (cores)"]
    assert host and all(set(e["args"]) == set(CATEGORIES) for e in host)
    assert {"host net (MB/s)", "host disk (MB/s)", "host IOPS", "cpu (cores)"} <= counters
    ts = [e["ts"] for e in host]
    assert ts == sorted(ts) and ts[-1] > ts[0]


def test_json_carries_the_projection_when_there_is_one(synth, tmp_path):
    got = json.loads(cli(synth, "--format", "json").stdout)
    assert got["projection"]["projection_version"] == 1
    bare = tmp_path / "bare.rec"
    bare.write_bytes(synth.read_bytes())
    got = json.loads(cli(bare, "--format", "json").stdout)
    assert "projection" not in got


def test_vendor_table_rows(synth):
    from dpuprof.render.tables import vendor_rows

    rows = {r.metric: r for r in vendor_rows(report_for(synth).main)}
    for metric in ("CPU cores available for AI", "Infrastructure share of host CPU", "Network CPU", "Storage CPU",
                   "Crypto CPU", "Compression CPU", "Network bytes moved", "Storage bytes moved", "IOPS",
                   "Job speedup"):
        assert metric in rows
        assert rows[metric].range != "—" and rows[metric].assumptions
    assert any(m.startswith("All-reduce time") for m in rows)
    assert rows["Network CPU"].change == "-80 %"
    assert "rdma" in "; ".join(rows["Network CPU"].assumptions)
    assert rows["Job speedup"].range == "model bounds 1.00x–1.25x (not a CI)"


def test_markdown_writes_pngs_beside_it(synth, tmp_path):
    out = tmp_path / "r.md"
    res = cli(synth, "-q", "-o", out)
    assert res.returncode == 0, res.stderr
    pngs = sorted(p.name for p in tmp_path.glob("r.*.png"))
    assert "r.cpu-by-category.png" in pngs and "r.savings-waterfall.png" in pngs
    assert all(f"]({p})" in out.read_text() for p in pngs)


# ----------------------------------------------------------------------------- compare and merge

@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_compare_fixture_with_itself_is_zero(fixture, fixture_copy):
    fixture = fixture_copy(fixture)
    rep = report_for(fixture, fixture, mode="compare")
    cmp = rep.comparison
    assert (cmp["diff_pp"] == 0).all() and (cmp["a_s"] == cmp["b_s"]).all()
    assert not cmp["significant"].any()
    busy = cmp[cmp["a_samples"] > 0]
    assert (busy["z"] == 0).all() and (busy["p"] == 1).all()


def test_compare_synthetic_with_itself_is_zero_in_every_output(synth, tmp_path):
    res = cli(synth, synth, "--compare", "--format", "json")
    assert res.returncode == 0, res.stderr
    for cat, row in json.loads(res.stdout)["comparison"]["by_category"].items():
        assert row["diff_pp"] == 0 and row["significant"] is False, cat
    text = cli(synth, synth, "--compare").stdout
    assert "+0.0 pp" in text and "yes" not in text.split("Share of busy CPU, A -> B")[1].split("\n\n")[0]


def test_compare_detects_a_real_difference(tmp_path):
    from dpuprof.render import compare

    a = make_recording(tmp_path / "a.rec", seed=1)
    b = make_recording(tmp_path / "b.rec", seed=2, intervals=40)
    db = sqlite3.connect(b)
    with db:  # B: network samples x4 (schema v3 packs cpu_category, a view: edit what it unpacks)
        from dpuprof.recording.packing import pack_ids, unpack_ids

        net = {r[0] for r in db.execute("SELECT subcategory_id FROM subcategories WHERE category = 'network'")}
        for interval, blob in db.execute("SELECT interval, counts FROM cpu_counts").fetchall():
            v = unpack_ids(blob)  # (pid, subcategory_id, samples, cpu_ns) per row
            for i in range(0, len(v), 4):
                if v[i + 1] in net:
                    v[i + 2] *= 4
                    v[i + 3] *= 4
            db.execute("UPDATE cpu_counts SET counts = ? WHERE interval = ?", (pack_ids(v), interval))
    db.close()
    cmp = report_for(a, b, mode="compare").comparison
    assert cmp.loc["network", "diff_pp"] > 10 and cmp.loc["network", "significant"]
    assert cmp.loc["network", "p"] < compare.THRESHOLD


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_merging_two_copies_of_a_fixture_doubles_the_totals(fixture, fixture_copy):
    check_merge_doubles(fixture_copy(fixture))


def test_merging_two_copies_of_synthetic_doubles_the_totals(synth):
    check_merge_doubles(synth)


def check_merge_doubles(path: Path) -> None:
    one = report_for(path).main
    rep = report_for(path, path, mode="merge")
    total = rep.total
    assert rep.kind == "merge" and len(total.nodes) == 2
    s1, s2 = one.summary.contract, total.summary.contract
    # the job summary rounds its sums to 6 decimals once, a node's summary its own: 2 x round(x)
    # and round(2 x) may differ by one unit in the 6th decimal, hence abs_tol=2e-6
    assert s2["cpu_count"] == 2 * s1["cpu_count"]
    assert s2["duration_s"] == s1["duration_s"]
    assert math.isclose(s2["host_cpu"]["total_s"], 2 * s1["host_cpu"]["total_s"], rel_tol=1e-9, abs_tol=2e-6)
    assert math.isclose(s2["workload_cpu"]["total_s"], 2 * s1["workload_cpu"]["total_s"], rel_tol=1e-9, abs_tol=2e-6)
    if s1["host_cpu"]["by_category"]:
        for c in CATEGORIES:
            assert math.isclose(s2["host_cpu"]["by_category"][c], 2 * s1["host_cpu"]["by_category"][c],
                                rel_tol=1e-9, abs_tol=2e-6)
    for key in ("read_bytes", "write_bytes", "read_ios", "write_ios"):
        assert s2["io"][key] == 2 * s1["io"][key]
    for key in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"):
        assert s2["net"][key] == 2 * s1["net"][key]
    assert s2["lost_samples"] == 2 * s1["lost_samples"]
    assert len(s2["processes"]) == 2 * len(s1["processes"])
    assert (total.cats == 2 * one.cats).all().all()
    assert math.isclose(total.timeline.to_numpy().sum(), 2 * one.timeline.to_numpy().sum(), rel_tol=1e-9)
    assert math.isclose(total.io.to_numpy().sum(), 2 * one.io.to_numpy().sum(), rel_tol=1e-9)
    assert total.stacks["samples"].sum() == 2 * one.stacks["samples"].sum()
    # shares are unchanged
    assert total.cores_for_ai_pct == pytest.approx(one.cores_for_ai_pct) if one.category_split else True


def test_merge_sums_projections_and_takes_the_slowest_speedup(synth, tmp_path):
    other = tmp_path / "node2.rec"
    make_recording(other, seed=5, host="node2")
    make_projection(other, freed_fraction=0.5)
    proj = json.loads(synth.with_name("run.proj.json").read_text())
    proj2 = json.loads(other.with_name("node2.proj.json").read_text())
    proj2["speedup"]["expected"] = 1.02
    other.with_name("node2.proj.json").write_text(json.dumps(proj2))
    total = build_report([synth, other], mode="merge").total
    p = total.projection
    assert p.speedup.expected == 1.02 and p.speedup.regime is None  # no one regime for the job
    assert p.by_category["network"].freed_s == pytest.approx(
        proj["by_category"]["network"]["freed_s"] + proj2["by_category"]["network"]["freed_s"])
    assert {r.node for r in p.rows} == {"run", "node2"}


def test_two_nodes_of_one_job_merge_automatically(tmp_path):
    t0 = 1_700_000_000.0
    a = make_recording(tmp_path / "node1.rec", host="node1", t0=t0)
    b = make_recording(tmp_path / "node2.rec", host="node2", t0=t0 + 1)
    assert build_report([a, b]).kind == "merge"
    c = make_recording(tmp_path / "later.rec", host="node1", t0=t0 + 3600)
    assert build_report([a, c]).kind == "compare"
    with pytest.raises(UserError, match="not at the same time"):  # three, not one job: refused
        build_report([a, b, c])
    assert build_report([a, b, c], mode="merge").kind == "merge"
    with pytest.raises(UserError):
        build_report([a, b, c], mode="compare")


# ----------------------------------------------------------------------------- edge cases

def test_psutil_mode_renders_everything(tmp_path):
    rec = make_recording(tmp_path / "ps.rec", category_split=False)
    rep = build_report([rec])
    assert not rep.main.category_split
    for fmt in FORMATS:
        if fmt in ("folded", "speedscope", "pprof"):  # stack exports need stacks: one clear error
            with pytest.raises(UserError, match="psutil mode"):
                render(rep, fmt)
            continue
        rendered = render(rep, fmt, tmp_path if fmt == "markdown" else None)
        assert rendered.main
    assert "no category split" in render(rep, "terminal").main.decode()
    assert list(rep.main.timeline.columns)[:3] == ["user", "nice", "system"]


def test_a_recording_cut_short_is_named_in_the_report(tmp_path):
    rec = make_recording(tmp_path / "cut.rec", complete=False)
    rep = build_report([rec])
    assert any("cut short" in w for w in rep.main.warnings)
    assert "cut short" in render(rep, "html").main.decode()
    assert "cut short" in render(rep, "terminal").main.decode()


def test_hostile_names_are_escaped_in_text_outputs(tmp_path):
    evil = "<img src=x onerror=alert(1)>\x1b[31m|*_"
    rec = make_recording(tmp_path / "evil.rec", comm=evil, frame_suffix=";</script><b>x</b>")
    rep = build_report([rec])
    html = render(rep, "html").main.decode()
    assert "<img src=x" not in html and "</script><b>" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    term = render(rep, "terminal").main.decode()
    assert "\x1b" not in term
    md = render(rep, "markdown").main.decode()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    # the embedded JSON escapes < > & and still decodes to the literal name
    from dpuprof.render.formats.html import script_json

    blob = script_json({"comm": evil + "&"})
    assert "<" not in blob and ">" not in blob and "&" not in blob
    assert json.loads(blob)["comm"] == evil + "&"


def test_projection_loader(synth, tmp_path):
    from dpuprof.render import projection_file as projection

    rec = tmp_path / "x.rec"
    rec.write_bytes(synth.read_bytes())
    assert projection.load(rec) == (None, [])
    side = projection.path_for(rec)
    assert side.name == "x.proj.json"
    side.write_text("{not json")
    proj, warns = projection.load(rec)
    assert proj is None and "not a usable projection" in warns[0]
    with pytest.raises(UserError):
        projection.load(rec, explicit=side)
    res = cli(rec, "--projection", side)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    make_projection(rec, sha256="0" * 64)
    proj, warns = projection.load(rec)
    assert proj is not None and any("different version of this recording" in w for w in warns)
    side.write_text(json.dumps({"projection_version": 99}))
    assert projection.load(rec)[0] is None


def test_projection_is_found_in_the_current_directory_when_it_is_this_recordings(synth, tmp_path, monkeypatch):
    from dpuprof.render import projection_file as projection

    runs, work, elsewhere = tmp_path / "runs", tmp_path / "work", tmp_path / "elsewhere"
    for d in (runs, work, elsewhere):
        d.mkdir()
    rec = runs / "dpuprof.rec"
    rec.write_bytes(synth.read_bytes())
    res = subprocess.run([sys.executable, "-m", "dpuprof", "project", str(rec), "--format", "json"],
                         capture_output=True, text=True, timeout=120, cwd=work)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in work.iterdir()) == ["dpuprof.proj.json"] and not (runs / "dpuprof.proj.json").exists()
    monkeypatch.chdir(work)
    proj, warns = projection.load(rec)
    assert proj.as_json() == json.loads(res.stdout) and warns == []
    # Another run's recording with the same default name: the file here is not its projection.
    other = elsewhere / "dpuprof.rec"
    make_recording(other, seed=3)
    proj, warns = projection.load(other)
    assert proj is None and len(warns) == 1 and "made from another recording" in warns[0]
    # ... and one beside that recording is used for it, without a word about the other file.
    make_projection(other)
    proj, warns = projection.load(other)
    assert proj is not None and proj.recording_sha256 != json.loads(res.stdout)["recording_sha256"]
    assert not any("another recording" in w for w in warns)
    # From the recording's own folder the two rules name one file.
    monkeypatch.chdir(elsewhere)
    assert projection.candidates(other) == [(other.with_name("dpuprof.proj.json"), False)]


def test_format_is_chosen_by_name_or_extension():
    assert registry.choose(None, None) == "terminal"
    assert registry.choose(None, "a/b.html") == "html"
    assert registry.choose(None, "run.speedscope.json") == "speedscope"
    assert registry.choose(None, "run.trace.json") == "perfetto"
    assert registry.choose(None, "run.json") == "json"
    assert registry.choose(None, "run.MD") == "markdown"
    assert registry.choose(None, "run.folded") == "folded"
    assert registry.choose("json", "run.html") == "json"
    assert registry.stem("run.speedscope.json") == "run"
    with pytest.raises(ValueError):
        registry.choose(None, "run.docx")
    for name in registry.names():
        assert callable(registry.get(name))


def test_cli_refuses_bad_requests_with_one_line(synth, tmp_path):
    for args in ([synth, "-o", tmp_path / "x.docx"], [synth, "--format", "png"],
                 [tmp_path / "missing.rec"], [synth, "-o", synth.with_suffix(".rec")]):
        res = cli(*args)
        assert res.returncode == 2, args
        assert res.stderr.startswith("dpuprof: error:") and res.stderr.count("\n") == 1, res.stderr


def test_output_never_follows_a_symlink(synth, tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    link = tmp_path / "out.html"
    os.symlink(target, link)
    res = cli(synth, "-q", "-o", link)
    assert res.returncode == 2 and "symbolic link" in res.stderr
    assert target.read_text() == "keep me"


def test_progress_line_only_when_asked():
    from dpuprof.render.progress import Progress

    buf = io.StringIO()
    p = Progress(enabled=True, stream=buf, delay_s=0)
    p.step("chart 1/5")
    p.done()
    assert "chart 1/5" in buf.getvalue() and buf.getvalue().endswith("\033[2K")  # erased when done
    quiet = io.StringIO()
    Progress(enabled=None, stream=quiet).step("x")  # StringIO is not a TTY
    assert quiet.getvalue() == ""


def test_two_proportion_z_test_known_values():
    from dpuprof.render.stats import share_ci, two_proportion_z

    z, p = two_proportion_z(50, 100, 70, 100)
    assert z == pytest.approx(2.8868, abs=1e-3) and p == pytest.approx(0.00389, abs=1e-4)
    assert two_proportion_z(5, 10, 5, 10) == (0.0, 1.0)
    assert all(math.isnan(x) for x in two_proportion_z(0, 0, 1, 2))
    lo, hi = share_ci(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)


def test_unbounded_speedup_and_missing_keys_are_shown_not_crashed(synth, tmp_path):
    """The contract allows null speedup.expected/high (unbounded) and extra or missing keys."""
    from dpuprof.render.tables import vendor_rows

    rec = tmp_path / "u.rec"
    rec.write_bytes(synth.read_bytes())
    side = make_projection(rec)
    proj = json.loads(side.read_text())
    proj["speedup"].update(expected=None, high=None)
    proj["allreduce"] = None
    del proj["cores_for_ai"]
    proj["future_key"] = {"anything": [1, 2]}
    side.write_text(json.dumps(proj))
    rep = build_report([rec])
    rows = {r.metric: r for r in vendor_rows(rep.main)}
    assert rows["Job speedup"].projected == "unbounded" and rows["Job speedup"].range == "model bounds 1.00x–∞ (not a CI)"
    assert not any(m.startswith("All-reduce") for m in rows)
    for fmt in ("html", "terminal", "json"):
        assert render(rep, fmt).main
