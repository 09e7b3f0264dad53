"""benchmarks/hot_loads.py's pure helpers (issue 32): --tree parsing, the rotated order, per-program
BPF rates, the cost formulas, the summary's medians and verdicts and its Markdown; hot_workloads.py's
fio JSON parsing, ``losetup -j`` parsing and the recording's counts; together.py's /proc/stat busy
ticks; and suite/runner.py's /proc/PID/stat reader. Synthetic numbers, no measuring, no timing bounds."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import hot_loads as hl
import hot_workloads as hw
import together
from suite.runner import stat_cpu


def test_parse_trees_labels_and_default(tmp_path):
    assert hl.parse_trees(None, default=tmp_path) == {"dpuprof": tmp_path}
    (tmp_path / "old").mkdir()
    got = hl.parse_trees([f"base={tmp_path / 'old'}", str(tmp_path)])
    assert got == {"base": (tmp_path / "old").resolve(), tmp_path.name: tmp_path.resolve()}
    with pytest.raises(ValueError):
        hl.parse_trees([f"a={tmp_path}", f"a={tmp_path / 'old'}"])


def test_rotated():
    conds = ["bare", "dpuprof:a", "dpuprof:b", "perf"]
    assert hl.rotated(conds, 0) == conds
    assert hl.rotated(conds, 1) == ["dpuprof:a", "dpuprof:b", "perf", "bare"]
    assert hl.rotated(conds, 4) == conds
    assert hl.rotated([], 3) == []


def test_program_rows_deltas_sum_by_name_and_new_programs():
    first = {1: {"type": 17, "run_time_ns": 1000, "run_cnt": 10}, 2: {"type": 5, "run_time_ns": 0, "run_cnt": 0}}
    last = {1: {"type": 17, "run_time_ns": 5000, "run_cnt": 20},
            2: {"type": 5, "run_time_ns": 2000, "run_cnt": 10},
            3: {"type": 5, "run_time_ns": 1000, "run_cnt": 10},   # same name as 2, loaded later
            4: {"type": 7, "run_time_ns": 0, "run_cnt": 0}}
    rows = hl.program_rows(first, last, {1: "sw_switch", 2: "fork", 3: "fork"}, span_s=2.0)
    assert rows["sw_switch"] == {"type": "raw_tracepoint", "run_time_ns": 4000, "run_cnt": 10,
                                 "ns_per_event": 400.0, "events_per_s": 5.0, "core_pct": 100 * 4000 / 1e9 / 2}
    assert rows["fork"]["run_cnt"] == 20 and rows["fork"]["ns_per_event"] == 150.0
    assert rows["prog4"]["ns_per_event"] is None and rows["prog4"]["type"] == "perf_event"
    assert hl.program_rows({}, last, {}, 0.0)["prog1"]["events_per_s"] is None


def test_cost_pct():
    assert hl.cost_pct(1.0, 1.0, 11.0) == pytest.approx(20.0)   # (1 + 1) / (11 - 1)
    assert hl.cost_pct(0.0, 0.5, 10.0) == pytest.approx(5.0)    # perf: own CPU over the workload's
    assert hl.cost_pct(None, None, 10.0) is None
    assert hl.cost_pct(2.0, 1.0, 2.0) is None


def _run(load, cond, rnd, **kw):
    return {"load": load, "condition": cond, "round": rnd, **kw}


def test_summarize_medians_vs_bare_and_verdicts():
    prog = lambda ns: {"p": {"type": "tracepoint", "events_per_s": 100.0, "ns_per_event": ns, "core_pct": 1.0}}  # noqa: E731
    runs = [
        _run("iperf3", "bare", 0, throughput=10.0), _run("iperf3", "bare", 1, throughput=8.0),
        _run("iperf3", "dpuprof:new", 0, throughput=9.0, cost_pct=1.0, programs=prog(100)),
        _run("iperf3", "dpuprof:new", 1, throughput=8.0, cost_pct=3.0, programs=prog(300)),
        _run("iperf3", "dpuprof:new", 2, error="boom"),
        _run("wake-2x8", "dpuprof:new", 0, mb_per_min=1.0),
        _run("wake-4x128", "dpuprof:new", 0, mb_per_min=5.0, cost_pct=0.8),
    ]
    s = hl.summarize(runs)
    cell = s["loads"]["iperf3"]["dpuprof:new"]
    assert cell["rounds"] == 2 and cell["cost_pct"] == 2.0
    assert cell["vs_bare"] == pytest.approx((0.9 + 1.0) / 2)
    assert cell["programs"]["p"]["ns_per_event"] == 200
    # issue 32: cost <= 1 % (iperf3 2.0 and wake 0.8), MB/min ratio <= 3 (5x)
    assert [x["met"] for x in s["verdicts"]] == [False, True, False]
    assert s["verdicts"][2]["value"] == 5.0
    md = hl.render(s, {"rounds": 2, "duration_s": 3, "units": {"iperf3": "GB/s"}})
    assert "| iperf3 | dpuprof:new | 8.5 GB/s | 0.950 |" in md
    assert "| p | tracepoint | 100 | 200 | 1.00 |" in md
    assert "**no**" in md


def test_make_loads_names():
    loads = hl.make_loads(["iperf3", "wake-3x16"], 2)
    assert [x.name for x in loads] == ["iperf3", "wake-3x16"]
    assert "--threads 16" in loads[1].what
    with pytest.raises(SystemExit):
        hl.make_loads(["fi0"], 2)


def test_fio_load_command_and_count_query():
    (load,) = hl.make_loads(["fio"], 3, fio_device="/dev/loop7")
    assert load.unit == "IOPS" and load.counted[2] == ("loop7",)
    for flag in ("--filename=/dev/loop7", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                 "--iodepth=32", "--runtime=3", "--output-format=json"):
        assert flag in load.what
    (unset,) = hl.make_loads(["fio"], 3)  # named before the loop device exists: make() refuses
    with pytest.raises(RuntimeError):
        unset.make(Path("/nonexistent"))


def test_parse_fio_iops_total_ios_and_fallback():
    job = {"jobname": "randread", "read": {"iops": 201234.5, "total_ios": 603703, "runtime": 3000}}
    text = "fio: warning before the JSON\n" + json.dumps({"jobs": [job]}, indent=1) + "\ntrailing note\n"
    assert hw.parse_fio(text) == {"iops": 201234.5, "total_ios": 603703, "runtime_s": 3.0}
    del job["read"]["iops"]
    assert hw.parse_fio(json.dumps({"jobs": [job]}))["iops"] == pytest.approx(603703 / 3.0)


def test_loop_devices_from_losetup_j():
    out = ("/dev/loop3: []: (/tmp/dpuprof-hot-x/tmpfs/fio.img)\n"
           "/dev/loop12: [0045]:7 (/tmp/dpuprof-hot-x/tmpfs/fio.img)\n")
    assert hw.loop_devices(out) == ["/dev/loop3", "/dev/loop12"]
    assert hw.loop_devices("") == []


def test_recorded_count_reads_the_recording(tmp_path):
    rec = tmp_path / "x.rec"
    con = sqlite3.connect(rec)
    con.execute("CREATE TABLE block_io (interval INTEGER, dev TEXT, op TEXT, bytes INTEGER, ios INTEGER)")
    con.executemany("INSERT INTO block_io VALUES (?, ?, ?, ?, ?)",
                    [(0, "loop0", "read", 4096 * 10, 10), (1, "loop0", "read", 4096 * 5, 5),
                     (1, "loop0", "write", 4096, 1), (1, "sda", "read", 4096, 1)])
    con.commit()
    con.close()
    (fio,) = hl.make_loads(["fio"], 3, fio_device="/dev/loop0")
    assert hw.recorded_count(rec, *fio.counted[1:]) == 15
    (other,) = hl.make_loads(["fio"], 3, fio_device="/dev/loop9")
    assert hw.recorded_count(rec, *other.counted[1:]) == 0     # the table is there, nothing counted
    (iperf,) = hl.make_loads(["iperf3"], 3)
    assert hw.recorded_count(rec, *iperf.counted[1:]) is None  # no net_io table
    (tmp_path / "junk.rec").write_text("not sqlite")
    assert hw.recorded_count(tmp_path / "junk.rec", *fio.counted[1:]) is None


def test_machine_cost_pct_and_count_ratio():
    # busy 10 s: recorder 1 s in the window (1.5 s in all), script 0.5 s, BPF 0.5 s -> rest 8 s
    assert hl.machine_cost_pct(0.5, 1.5, 1.0, 10.0, 0.5) == pytest.approx(100 * 2.0 / 8.0)
    assert hl.machine_cost_pct(0.5, 1.5, None, 10.0) == pytest.approx(100 * 2.0 / 8.0)  # all 1.5 s taken out
    assert hl.machine_cost_pct(None, 1.0, 1.0, 11.0) == pytest.approx(10.0)   # perf: no BPF
    assert hl.machine_cost_pct(0.5, None, None, 10.0) is None
    assert hl.machine_cost_pct(0.5, 1.0, 1.0, None) is None
    assert hl.machine_cost_pct(5.0, 5.0, 5.0, 10.0) is None
    assert hl.count_ratio(101, 100) == pytest.approx(1.01)
    assert hl.count_ratio(None, 100) is None and hl.count_ratio(5, 0) is None


def test_verdicts_fio_light_and_counts():
    runs = [_run("fio", "dpuprof:new", 0, cost_pct=0.9, tool_count=1000, recorded_count=1011, count_ratio=1.011),
            _run("fio", "dpuprof-light:new", 0, cost_pct=0.4),
            _run("fio", "perf", 0, cost_pct=0.1, tool_count=1000)]
    s = hl.summarize(runs)
    got = {(v["target"], v["condition"]): v["met"] for v in s["verdicts"]}
    assert got == {("fio cost <= 1 % of the machine's busy CPU", "dpuprof:new"): True,
                   ("fio cost <= 0.3 % of the machine's busy CPU", "dpuprof-light:new"): False,
                   ("fio: counted / the tool's own within 1 %", "dpuprof:new"): False}
    md = hl.render(s, {"counted": {"fio": "reads on the loop device"}})
    assert "| fio | dpuprof:new | reads on the loop device | 1,011 | 1,000 | 1.0110 |" in md


def test_busy_ticks_of_proc_stat():
    text = ("cpu  100 5 50 1000 20 3 2 7 11 0\n"
            "cpu0 50 2 25 500 10 1 1 3 5 0\n"
            "intr 12345\n")
    assert together.busy_ticks(text) == 100 + 5 + 50 + 3 + 2   # not idle, iowait, steal; guest is in user
    assert together.busy_ticks(Path("/proc/stat").read_text()) > 0


def test_stat_cpu_own_and_reaped():
    text = "1234 (a) b) Z 1 2 3 4 5 6 7 8 9 10 150 50 300 100 20 0 1 0 5 6 7"
    own, reaped = stat_cpu(text, 100)
    assert own == pytest.approx(2.0) and reaped == pytest.approx(4.0)
    assert stat_cpu(Path("/proc/self/stat").read_text(), 100)[0] >= 0


def test_loop_device_setup_failure_is_one_line():
    with pytest.raises(SystemExit, match=r"^hot_loads.py: fio's loop device: `false` failed: exit 1$"):
        hw._setup(["false"])
