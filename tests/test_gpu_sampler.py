"""The NVML sampler (dpuprof/record/drain/gpu.py).

This machine has no NVIDIA GPU, so the row building is tested as a unit test of a pure function
(``device_rows``, and ``GpuTelemetry`` on top of it) against a small stand-in for the ``pynvml``
module: it answers like NVML does (objects with .gpu/.used/.total, per-process samples with
timestamps, NVMLError-like exceptions carrying .value). The "no NVML" path runs for real.
"""

from __future__ import annotations

from types import SimpleNamespace

from dpuprof.record.drain.gpu import GpuTelemetry, device_rows, process_samples


class FakeNVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(devices):
    """A stand-in for the pynvml module. ``devices``: list of dicts with util, used, total,
    samples [(pid, ts_us, sm)], procs [(pid, used_bytes)], and optional ``proc_error`` (an NVML
    return code the per-process query raises)."""
    def util(h):
        if devices[h].get("util") is None:
            raise FakeNVMLError(3)
        return SimpleNamespace(gpu=devices[h]["util"], memory=0)

    def proc_util(h, since):
        if "proc_error" in devices[h]:
            raise FakeNVMLError(devices[h]["proc_error"])
        new = [SimpleNamespace(pid=p, timeStamp=ts, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)
               for p, ts, sm in devices[h]["samples"] if ts > since]
        if not new:
            raise FakeNVMLError(6)  # NVML_ERROR_NOT_FOUND: nothing newer than since
        return new

    return SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: f"Fake GPU {h}".encode(),
        nvmlDeviceGetUtilizationRates=util,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=devices[h]["used"], total=devices[h]["total"],
                                                          free=devices[h]["total"] - devices[h]["used"]),
        nvmlDeviceGetProcessUtilization=proc_util,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m)
                                                        for p, m in devices[h]["procs"]],
    )


def test_unit_pure_device_rows_builds_gpu_and_process_rows():
    devices = [{"util": 87, "used": 30 << 30, "total": 80 << 30,
                "samples": [(1000, 10, 60), (1000, 20, 80), (1001, 20, 10), (0, 20, 99)],
                "procs": [(1000, 20 << 30), (1002, None)]},
               {"util": None, "used": 1 << 30, "total": 80 << 30, "samples": [], "procs": [],
                "proc_error": 3}]
    nvml = fake_pynvml(devices)
    gpu, procs, since, why = device_rows(nvml, [0, 1], [5, 0])
    assert gpu == [(0, 87.0, 30 << 30, 80 << 30), (1, None, 1 << 30, 80 << 30)]  # refused util -> NULL
    # mean smUtil of the new samples per pid; pid 0 dropped; memory-only / util-only pids get NULL
    assert procs == [(0, 1000, 70.0, 20 << 30), (0, 1001, 10.0, None), (0, 1002, None, None)]
    assert since == [20, 0]
    assert why == {1: "nvmlDeviceGetProcessUtilization: not supported by this GPU/driver"}


def test_unit_pure_process_samples_reads_only_newer_samples():
    nvml = fake_pynvml([{"samples": [(7, 10, 50), (7, 30, 100)], "procs": []}])
    assert process_samples(nvml, 0, 10) == ({7: 100.0}, 30, None)
    assert process_samples(nvml, 0, 30) == ({}, 30, None)  # NOT_FOUND: no new samples, no error


def test_unit_pure_sampler_primes_then_samples_each_interval():
    dev = {"util": 50, "used": 2 << 30, "total": 16 << 30, "samples": [(42, 100, 90)], "procs": [(42, 1 << 30)]}
    tel = GpuTelemetry(nvml=fake_pynvml([dev]))
    assert tel.unavailable is None
    d = tel.describe()
    assert d == {"available": True, "devices": ["Fake GPU 0"], "per_process": {"0": "available"}}
    first = tel.sample()  # the sample from before the recording was consumed when priming
    assert first == {"gpu": [(0, 50.0, 2 << 30, 16 << 30)], "gpu_process": [(0, 42, None, 1 << 30)]}
    dev["samples"].append((42, 200, 30))
    assert tel.sample()["gpu_process"] == [(0, 42, 30.0, 1 << 30)]


def test_no_nvml_here_is_said_and_samples_nothing():
    """Real: this machine has no nvidia-ml-py and/or no NVIDIA driver."""
    tel = GpuTelemetry()
    assert isinstance(tel.unavailable, str) and tel.unavailable
    assert tel.describe() == {"available": False, "reason": tel.unavailable}
    assert tel.sample() == {"gpu": [], "gpu_process": []}


def test_rows_round_trip_through_the_writer(tmp_path):
    """The sampler's rows (4 values, the late mem_total_bytes column included) write and read back."""
    from dpuprof.recording import load
    from dpuprof.recording.writer import RecordingWriter

    dev = {"util": 64, "used": 3 << 30, "total": 24 << 30, "samples": [], "procs": [(77, 1 << 30)]}
    tel = GpuTelemetry(nvml=fake_pynvml([dev]))
    w = RecordingWriter(tmp_path / "g.rec", {"gpu": tel.describe(), "start_time": 100.0, "interval_s": 1.0})
    w.write_interval(0, 100.0, 101.0, tel.sample())
    w.close(end_time=101.0, exit_code=0)
    rec = load(tmp_path / "g.rec")
    g = rec.table("gpu")
    assert g[["gpu_index", "util_pct", "mem_used_bytes", "mem_total_bytes"]].values.tolist() == \
        [[0, 64.0, 3 << 30, 24 << 30]]
    assert rec.table("gpu_process")[["pid", "mem_used_bytes"]].values.tolist() == [[77, 1 << 30]]
