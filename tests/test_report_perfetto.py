"""``--format perfetto`` on the real clock: a structural check against the Trace Event Format, on
every fixture (absolute unix-epoch timestamps inside the recording's span, real pids with their
names, per-process counters, stack instants adding up to the folded totals), and Chromium's own
JSON parser reading the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_report_render import FIXTURE_PARAMS, render, report_for, synth  # noqa: E402,F401

from dpuprof.categories import CATEGORIES  # noqa: E402
from dpuprof.recording import load  # noqa: E402
from dpuprof.render.formats.folded import parse_folded  # noqa: E402
from dpuprof.render.view import RECORDER_LABEL  # noqa: E402

# The Trace Event Format (Google, "Trace Event Format" document): the phases this checker knows
# and what each requires beyond name/ph/pid/tid.
PHASES = {"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"}
METADATA = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
            "thread_name": "name", "thread_sort_index": "sort_index"}


def check_trace_event_format(trace) -> list[str]:
    """Problems found in ``trace`` (the JSON Object Format of the Trace Event Format); [] if none."""
    bad = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents array"]
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        bad.append("displayTimeUnit must be ms or ns")
    last: dict = {}
    for n, e in enumerate(trace["traceEvents"]):
        where = f"event {n} {str(e)[:80]}"
        if not isinstance(e, dict) or e.get("ph") not in PHASES or not isinstance(e.get("name"), str):
            bad.append(f"{where}: needs a name and a known ph")
            continue
        if not all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in ("pid", "tid")):
            bad.append(f"{where}: pid and tid must be integers")
        ph = e["ph"]
        if ph == "M":
            key = METADATA.get(e["name"])
            if key is None or key not in e.get("args", {}):
                bad.append(f"{where}: unknown metadata event or missing args.{key}")
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            bad.append(f"{where}: ts must be a non-negative number of microseconds")
        if ph == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            bad.append(f"{where}: X needs dur >= 0")
        if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
            bad.append(f"{where}: instant scope must be g, p or t")
        if ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()):
                bad.append(f"{where}: a counter's args must be numbers")
            track = (e["pid"], e["name"])
            if e["ts"] < last.get(track, -1):
                bad.append(f"{where}: counter track goes back in time")
            last[track] = e["ts"]
    return bad


def test_checker_finds_broken_events():
    assert check_trace_event_format({"traceEvents": [{"name": "x", "ph": "C", "pid": 1, "tid": 1, "ts": 5,
                                                       "args": {"v": "high"}}]})
    assert check_trace_event_format({"traceEvents": [{"name": "x", "ph": "Q", "pid": 1, "tid": 1, "ts": 5}]})
    assert check_trace_event_format({"traceEvents": [{"name": "nope", "ph": "M", "pid": 1, "tid": 1}]})
    assert check_trace_event_format({"traceEvents": [{"name": "x", "ph": "i", "pid": "1", "tid": 1, "ts": 1}]})
    assert check_trace_event_format({"events": []})


@pytest.mark.parametrize("fixture", FIXTURE_PARAMS)
def test_trace_lines_up_with_the_recording(fixture):
    rep = report_for(fixture)
    trace = json.loads(render(rep, "perfetto").main)
    assert check_trace_event_format(trace) == []
    rec = load(fixture)
    events = trace["traceEvents"]
    iv = rec.table("intervals")
    lo, hi = float(iv["t_start"].min()) * 1e6, float(iv["t_end"].max()) * 1e6
    start, end = rec.meta["start_time"] * 1e6, (rec.meta.get("end_time") or iv["t_end"].max()) * 1e6
    timed = [e["ts"] for e in events if "ts" in e]
    assert lo - 1 <= min(timed) and max(timed) <= hi + 1  # microseconds since the epoch, not from 0
    assert start - 2e6 <= min(timed) and max(timed) <= end + 2e6
    procs = rec.table("processes").set_index("pid")["comm"]
    rpid = rec.meta["recorder_pid"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert set(names) - {0} <= set(procs.index) and 0 in names
    for pid, name in names.items():
        if pid:
            assert name == (RECORDER_LABEL if pid == rpid else procs[pid] or f"pid {pid}")
    assert {e["pid"] for e in events} <= set(names)
    # per-process CPU counters, one series per category, for the workload's processes
    cpu_pids = {e["pid"] for e in events if e["ph"] == "C" and e["name"] == "cpu (cores)"}
    assert rec.workload_pids & set(procs.index) & cpu_pids
    assert all(set(e["args"]) == set(CATEGORIES) for e in events if e["name"] == "cpu (cores)")
    assert any(e["name"] == "host cpu (cores)" for e in events)
    assert {"host net (MB/s)", "host disk (MB/s)", "host IOPS"} <= {e["name"] for e in events}
    # stack samples: instants on the process's main thread, adding up to the folded totals
    stacks = [e for e in events if e["ph"] == "i" and e.get("cat") == "stack"]
    assert stacks and all(e["pid"] == e["tid"] and e["pid"] != rpid for e in stacks)
    folded = parse_folded(render(rep, "folded").main.decode())
    counted = sum(e["args"]["samples"] for e in stacks)
    assert counted <= sum(folded.values())  # processes outside the processes table have no track
    in_table = sum(n for k, n in folded.items() if k.split(";")[0] in set(procs) | {RECORDER_LABEL})
    assert counted >= 0.9 * in_table


def test_several_runs_never_share_a_pid(synth):
    trace = json.loads(render(report_for(synth, synth, mode="compare"), "perfetto").main)
    assert check_trace_event_format(trace) == []
    hosts = [e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name" and e["args"]["name"].startswith("HOST")]
    assert len(set(hosts)) == 2 and hosts[0] == 0


def test_chromium_parses_the_trace(tmp_path):
    from test_report_chromium import CHROMIUM, Chromium

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    rep = report_for(FIXTURE_PARAMS[0].values[0]) if FIXTURE_PARAMS[0].values[0] else None
    if rep is None:
        pytest.skip("no fixture")
    data = render(rep, "perfetto").main
    path = tmp_path / "run.trace.json"
    path.write_bytes(data)
    browser = Chromium()
    try:
        browser.load(path)
        got = browser.evaluate("""(() => {
            const t = JSON.parse(document.querySelector('pre').textContent);
            return {n: t.traceEvents.length, ph: [...new Set(t.traceEvents.map(e => e.ph))].sort(),
                    minTs: Math.min(...t.traceEvents.filter(e => 'ts' in e).map(e => e.ts))};
        })()""")
    finally:
        browser.close()
    want = json.loads(data)["traceEvents"]
    assert got["n"] == len(want) and got["ph"] == sorted({e["ph"] for e in want})
    assert got["minTs"] == min(e["ts"] for e in want if "ts" in e)


def test_gpu_threads_and_markers_become_tracks(synth):
    """Schema-v2 tables and NVML rows the fixtures lack (recorded on a host without a GPU), added
    in memory to a real synthetic recording."""
    import pandas as pd

    from dpuprof.render.view import Report, build_view

    rec = load(synth)
    iv = rec.table("intervals")
    rec._frames["gpu"] = pd.DataFrame({"interval": list(iv["interval"]) * 2, "gpu_index": [0] * len(iv) + [1] * len(iv),
                                       "util_pct": [50.0] * len(iv) * 2, "mem_used_bytes": [2 ** 30] * len(iv) * 2})
    rec._frames["threads"] = pd.DataFrame({"tid": [1000, 1005], "pid": [1000, 1000], "comm": ["python3", "pt_main_thread"],
                                           "first_seen": [0.0, 0.0], "last_seen": [0.0, 0.0]})
    rec._frames["thread_time"] = pd.DataFrame({"interval": list(iv["interval"]), "tid": [1005] * len(iv),
                                               "on_cpu_ns": [250_000_000] * len(iv), "runq_ns": [0] * len(iv),
                                               "off_cpu_ns": [0] * len(iv)})
    t_mid = float(iv["t_start"].iloc[3])
    rec._frames["markers"] = pd.DataFrame({"pid": [1000], "tid": [1005], "kind": ["step"], "t": [t_mid]})
    view = build_view(rec)
    view.recording = rec
    trace = json.loads(render(Report("single", [view]), "perfetto").main)
    assert check_trace_event_format(trace) == []
    ev = trace["traceEvents"]
    gpu = [e for e in ev if e["name"] == "gpu 1 util (%)" and e["ph"] == "C"]
    assert gpu and gpu[0]["args"] == {"util": 50.0} and gpu[0]["pid"] == 0
    mem = [e for e in ev if e["name"] == "gpu 1 memory (MiB)" and e["ph"] == "C"]
    assert mem and mem[0]["args"] == {"used": 1024.0}  # no mem_total_bytes column: total left out
    assert {"pid": 1000, "tid": 1005, "name": "pt_main_thread"} in [
        {"pid": e["pid"], "tid": e["tid"], "name": e["args"]["name"]} for e in ev if e["name"] == "thread_name"]
    th = [e for e in ev if e["name"] == "thread 1005 pt_main_thread (cores)"]
    assert th and th[0]["pid"] == 1000 and th[0]["args"]["on_cpu"] == pytest.approx(0.25 / 0.5)  # 0.5-s intervals
    step = [e for e in ev if e["name"] == "step"]
    assert step and step[0]["ts"] == round(t_mid * 1e6) and step[0]["tid"] == 1005
