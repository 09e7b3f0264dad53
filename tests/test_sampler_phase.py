"""The cpu-clock sampler's per-CPU events are opened a fraction of a period apart
(dpuprof/record/load/loaded.py, LoadedProbes.attach_perf_event), so that no two CPUs take their
samples at the same instant: opened together, a CPU's sample saw the other CPUs' handlers hold
the locks it spun on (short-lived curl helpers: up to 19.9 % of their samples in lock_sock's
spin, perf 0-2 %). No root: libbcc's attach call and the sleep are stand-ins."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dpuprof.record.load import loaded


@pytest.mark.parametrize("freq, cpus", [(100, [0, 1, 2, 3]), (99, [0, 1]), (19, [0, 2, 5])])
def test_each_cpus_event_opens_a_share_of_the_period_after_the_one_before(monkeypatch, freq, cpus):
    opened, slept = [], []

    class Lib:
        def bpf_attach_perf_event(self, prog, ev_type, ev_config, period, sample_freq, pid, cpu, group):
            opened.append((cpu, sample_freq, period, len(slept)))
            return 100 + cpu

    monkeypatch.setattr(loaded, "lib", Lib)
    monkeypatch.setattr(loaded, "online_cpus", lambda: cpus)
    monkeypatch.setattr(loaded, "_checked", lambda fd, what: fd)  # no real fd to mark close-on-exec
    probes = SimpleNamespace(perf_events={}, programs={"on_sample": 7})
    loaded.LoadedProbes.attach_perf_event(probes, "on_sample", 1, 0, freq, sleep=slept.append)
    # One period in all, in equal steps: the CPUs' timers keep these phases.
    assert slept == [pytest.approx(1 / freq / len(cpus))] * (len(cpus) - 1)
    assert sum(slept) + 1 / freq / len(cpus) == pytest.approx(1 / freq)
    assert opened == [(cpu, freq, 0, i) for i, cpu in enumerate(cpus)]  # (CPU, Hz, no period, sleeps before)
    assert probes.perf_events["on_sample"] == [100 + cpu for cpu in cpus]
