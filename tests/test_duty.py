"""The duty cycle (``agent --duty W/P``, issue 23) without root: parsing, the schedule, the weighting
of /metrics, the recorder's re-baselining of thread times, detaching and re-attaching by name, and
how a recording with gaps reads and reports. The probes themselves: tests/test_agent_root.py."""

from __future__ import annotations

import os

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import dpuprof
from dpuprof.agent.metrics import IntervalMetrics
from dpuprof.agent.options import parse_duty
from dpuprof.errors import UserError
from dpuprof.record.duty import DutyCycle
from dpuprof.record.load import attach
from dpuprof.record.load.loaded import Attached
from dpuprof.recording import load
from dpuprof.recording.writer import RecordingWriter

PROCS = [(10, 1, "busy", "", 1, 0.0, 1.0, None, "/system.slice/slurmstepd.scope/job_7/step_0")]


def _busy(cpu_s: float) -> dict:
    return {"cpu_category": [(10, "compute", "compute.other", 5, cpu_s), (0, "idle", "idle", 5, 2.0 - cpu_s)],
            "net_io": [("eth0", "tx", 1000, 2)], "lost": [("samples", 1)]}


def _scrape(metrics: IntervalMetrics) -> dict:
    """{name: total over its series} of the registry, as a scraper parses it."""
    out: dict = {}
    for fam in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in fam.samples:
            if s.name.startswith("dpuprof_") and s.labels.get("category", "compute") == "compute":
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_duty_values_parse_like_durations():
    assert parse_duty("10s/60s") == (10.0, 60.0)
    assert parse_duty(" 1m / 1h ") == (60.0, 3600.0)
    assert parse_duty("0.5/3") == (0.5, 3.0)
    for bad in ("10s", "60s/10s", "10s/10s", "0s/1m", "x/1m", "1s/", "1s/2s/3s"):
        with pytest.raises(UserError, match="--duty"):
            parse_duty(bad)


def test_agent_refuses_a_bad_duty_in_one_line():
    for value in ("1m/30s", "10s"):
        proc = dpuprof("agent", "--duty", value, "-D", "out")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "--duty" in proc.stderr and "Traceback" not in proc.stderr


def test_agent_help_says_how_duty_weights_metrics():
    out = dpuprof("agent", "--help", check=True).stdout
    assert "--duty W/P" in out and "dpuprof_duty_weight" in out and "P/W" in out
    assert "dpuprof agent --duty 10s/60s" in out  # a paste-able example


def test_schedule_keeps_to_its_grid_and_every_on_part_lasts_w():
    d = DutyCycle(1.0, 3.0, start=100.0)
    assert d.weight == 3.0
    assert d.off_at(100.0) == 101.0
    assert d.off_at(103.08, 1.0, 1) == pytest.approx(104.08)  # W after a late start
    assert d.off_at(103.05, 1.3, 1) == pytest.approx(103.75)  # the last part ran 0.3 s long: made up
    assert d.off_at(103.05, 2.5, 1) == 103.05  # more than a whole part: this one records nothing
    assert d.next_on(101.0) == 103.0 and d.next_on(104.2) == 106.0
    assert d.next_on(103.0 - 1e-12) == 106.0  # a deadline read back a hair early is still that period's
    for on, period in ((0.0, 1.0), (2.0, 2.0), (3.0, 1.0)):
        with pytest.raises(UserError):
            DutyCycle(on, period)


def test_each_interval_counts_p_over_w_times_and_the_weight_is_a_gauge():
    m = IntervalMetrics("n", weight=3.0)
    m.add(100.0, 100.5, _busy(0.4), PROCS)
    m.add(100.5, 101.0, _busy(0.5))
    got = _scrape(m)
    assert got["dpuprof_cpu_seconds_total"] == pytest.approx(3 * 0.9)
    assert got["dpuprof_recorded_seconds_total"] == pytest.approx(3 * 1.0)
    assert got["dpuprof_net_bytes_total"] == pytest.approx(3 * 2000)
    assert got["dpuprof_net_packets_total"] == pytest.approx(3 * 4)
    assert got["dpuprof_lost_total"] == pytest.approx(3 * 2)
    assert got["dpuprof_duty_weight"] == 3.0
    assert _scrape(IntervalMetrics("n"))["dpuprof_duty_weight"] == 1.0  # always on: weight 1


def test_weighted_counters_estimate_the_full_time_rate():
    """A job at 0.8 CPU recorded 1 s of every 3: counter increase over whole periods / wall time
    is 0.8, as rate() computes it, and the recorded seconds advance at 1 s per second."""
    w, p, rate = 1.0, 3.0, 0.8
    m = IntervalMetrics("n", weight=p / w)
    for k in range(4):  # each on part as two intervals, nothing in the off part
        t = 1000.0 + k * p
        m.add(t, t + 0.5, _busy(rate * 0.5), PROCS)
        m.add(t + 0.5, t + w, _busy(rate * 0.5))
        got = _scrape(m)
        wall = (k + 1) * p
        assert got["dpuprof_cpu_seconds_total"] / wall == pytest.approx(rate)
        assert got["dpuprof_recorded_seconds_total"] / wall == pytest.approx(1.0)


class _FakeProbes:
    """What detach_events and reattach_events use of a LoadedProbes: the attachment dicts and
    the two attach calls (each opening a new descriptor, as the kernel would)."""

    def __init__(self):
        self.tracepoints, self.raw_tracepoints, self.links, self.uprobe_events, self.calls = {}, {}, {}, {}, []

    def attach_raw_tracepoint(self, key, event, fn):
        assert key not in self.raw_tracepoints  # one attachment under a key
        self.calls.append(("raw", event, fn))
        self.raw_tracepoints[key] = Attached(os.open(os.devnull, os.O_RDONLY), event, fn)

    def attach_tracepoint(self, key, event, fn):
        self.calls.append(("tp", event, fn))
        self.tracepoints[key] = Attached(-1, event, fn)  # never closed here: no tracepoint is detached in these tests


def test_detach_closes_every_raw_attachment_and_reattach_restores_its_key():
    probes = _FakeProbes()
    probes.attach_raw_tracepoint("sched_switch", "sched_switch", "raw_tracepoint__sched_switch")
    probes.attach_raw_tracepoint("sched_waking", "sched_waking", "raw_tracepoint__sched_waking")
    before = dict(probes.raw_tracepoints)
    plan, wait = attach.detach_events(probes)
    wait()
    assert not probes.raw_tracepoints and not probes.tracepoints
    for a in before.values():  # closed: the kernel detaches a program when its last descriptor goes
        with pytest.raises(OSError):
            os.fstat(a.fd)
    probes.calls.clear()
    attach.reattach_events(probes, plan)
    assert set(probes.raw_tracepoints) == set(before) == {"sched_switch", "sched_waking"}
    assert sorted(fn for _k, _ev, fn in probes.calls) == ["raw_tracepoint__sched_switch", "raw_tracepoint__sched_waking"]
    for a in probes.raw_tracepoints.values():
        os.close(a.fd)


def test_reattach_restores_each_tracepoint_under_its_key_with_its_function():
    probes = _FakeProbes()
    attach.reattach_events(probes, [
        (False, "sched:sched_process_fork", Attached(9, "sched:sched_process_fork", "tracepoint__sched__sched_process_fork")),
        (False, "sock:sock_send_length", Attached(10, "sock:sock_send_length", "tracepoint__sock__sock_send_length"))])
    assert set(probes.tracepoints) == {"sched:sched_process_fork", "sock:sock_send_length"}
    assert [fn for _k, _ev, fn in probes.calls] == ["tracepoint__sched__sched_process_fork",
                                                    "tracepoint__sock__sock_send_length"]


def test_detach_refuses_while_uprobes_are_attached():
    probes = _FakeProbes()
    probes.tracepoints["sched:sched_process_exec"] = Attached(12345, "sched:sched_process_exec", "f")
    probes.links[(b"/lib/libz.so.1", 4096, False, "on_inflate_0")] = 7
    with pytest.raises(RuntimeError, match="uprobes"):
        attach.detach_events(probes)
    assert set(probes.tracepoints) == {"sched:sched_process_exec"}  # nothing was closed


def test_thread_times_after_a_pause_start_from_the_resume():
    from dpuprof.record.drain.threads import ThreadRecorder

    threads = ThreadRecorder(None, started=0.0)
    stats = lambda on: {7: {70: (on, 0), 71: (on, 0)}}  # noqa: E731 -- two threads, cumulative ns
    threads.interval(10.0, 11.0, {7}, stats(1_000))
    threads.rebaseline({7}, {7: {70: (5_000, 0)}})  # after the pause: thread 71 ended meanwhile
    tables, _rows = threads.interval(13.0, 14.0, {7}, {7: {70: (5_400, 0), 72: (300, 0)}})
    on = {tid: on_ns for tid, on_ns, _runq, _off in tables["thread_time"]}
    assert on == {70: 400, 72: 300}  # 70 from the resume; 72, new, from 0 (born in the pause)
    assert tables["lost"] == []  # 71's end fell in the pause: not a loss of an interval recorded


def _gapped(tmp_path, duty: bool = True):
    """Three on parts of 1 s every 3 s, a process busy 1 CPU of 2 in each."""
    meta = {"command": [], "sample_freq_hz": 19, "category_split": True, "cpu_count": 2, "start_time": 100.0,
            **({"duty": {"on_s": 1.0, "period_s": 3.0}} if duty else {})}
    w = RecordingWriter(tmp_path / f"gapped-{duty}.rec", meta)
    for i in range(3):
        t = 100.0 + 3 * i
        w.write_interval(i, t, t + 1.0, {"cpu_category": [(42, "compute", "compute.other", 19, 1.0),
                                                          (0, "idle", "idle", 19, 1.0)]},
                         processes=[(42, 1, "busy", "", 1, t, t + 1.0)] if i == 0 else [])
    w.close(end_time=107.0)
    return load(w.path)


def test_a_recording_with_gaps_lasts_its_recorded_time(tmp_path):
    from dpuprof.recording.reader import recorded_s

    rec = _gapped(tmp_path)
    assert rec.duration_s == 3.0 and rec.meta["duty"] == {"on_s": 1.0, "period_s": 3.0}
    iv = rec.table("intervals")
    assert recorded_s(iv.iloc[::-1]) == 3.0  # in any order
    contiguous = iv.assign(t_start=[100.0, 101.0, 102.0], t_end=[101.0, 102.0, 103.0])
    assert recorded_s(contiguous) == 3.0 and recorded_s(iv.iloc[:0]) == 0.0
    nested = iv.assign(t_start=[100.0, 100.2, 101.0], t_end=[101.0, 100.6, 102.0])  # two nodes' intervals
    assert recorded_s(nested) == 2.0


def test_report_rates_of_a_gapped_recording_are_per_recorded_second(tmp_path):
    from dpuprof.recording.summary import summarize
    from dpuprof.render.job import node_rows
    from dpuprof.render.merge import combine
    from dpuprof.render.view import build_view

    rec = _gapped(tmp_path)
    view = build_view(rec)
    assert view.cores("compute") == pytest.approx(1.0)  # 3 CPU-s in 3 s recorded, not 7 s of span
    assert view.capacity_s == pytest.approx(6.0)
    assert any(w.startswith("duty cycle: 1 s recorded of every 3 s") for w in view.warnings)
    assert summarize(rec)["duration_s"] == 3.0
    other = _gapped(tmp_path, duty=False)
    nodes = node_rows(combine([rec, other]), [view, build_view(other)])
    assert nodes["duration_s"].tolist() == [3.0, 3.0]
    assert nodes["cores_for_ai_pct"].tolist() == pytest.approx([100.0, 100.0])  # no infrastructure CPU


def test_rotated_files_of_a_duty_cycle_still_follow_each_other(tmp_path):
    from dpuprof.agent.rotate import RotatingWriter

    duty = {"on_s": 1.0, "period_s": 3.0}
    w = RotatingWriter(tmp_path, "node", {"command": [], "interval_s": 0.5, "duty": duty}, rotate_s=5, keep=10,
                       now=lambda: 1000.0)
    w.set_meta(start_time=1000.0)
    for i in range(8):  # on parts [1000 + 3k, 1001 + 3k), two intervals each
        t = 1000.0 + 3 * (i // 2) + 0.5 * (i % 2)
        w.write_interval(i, t, t + 0.5, {"cpu_category": [(5, "compute", "compute.other", 1, 0.5)]},
                         processes=[(5, 1, "x", "", 1, t, t + 0.5, None, "/a.service")] if i == 0 else [])
    w.close(end_time=1011.0)
    recs = [load(f) for f in sorted(tmp_path.glob("node-*.rec"))]
    assert len(recs) == 2 and all(r.complete and r.meta["duty"] == duty for r in recs)
    a, b = recs  # the second file starts where the first ended: at its first interval, after a gap
    assert a.meta["end_time"] == b.meta["start_time"] == b.table("intervals")["t_start"].min() == 1006.0
    assert [r.duration_s for r in recs] == [2.0, 2.0]


def test_a_bad_duty_in_a_file_is_one_line(tmp_path):
    w = RecordingWriter(tmp_path / "bad.rec", {"command": [], "duty": {"on_s": 5, "period_s": 1}})
    w.write_interval(0, 1.0, 2.0, {})
    w.close(end_time=2.0)
    with pytest.raises(UserError, match="duty"):
        load(w.path)
