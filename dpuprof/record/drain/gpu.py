"""GPU telemetry through NVML (``nvidia-ml-py``, an optional extra imported lazily), sampled once
per recording interval (every 2 s at record's default --interval, every second at the agent's).

Rows for the Recording tables (schema v3, without the leading ``interval``):

- ``gpu``: (gpu_index, util_pct, mem_used_bytes, mem_total_bytes) per device.
  ``util_pct`` is ``nvmlDeviceGetUtilizationRates().gpu``: the share of NVML's last sample period
  (1/6 s to 1 s, by product) in which a kernel ran -- a reading at the interval's end, not an
  average over the interval. A field NVML refuses is NULL, never a made-up 0.
- ``gpu_process``: (gpu_index, pid, sm_util_pct, mem_used_bytes) per process on a device.
  ``sm_util_pct`` is the mean ``smUtil`` of the ``nvmlDeviceGetProcessUtilization`` samples
  newer than the last one seen on that device (so each interval reads only its own samples);
  ``mem_used_bytes`` is ``usedGpuMemory`` of ``nvmlDeviceGetComputeRunningProcesses``. A process
  NVML lists in one source only has NULL in the other column. pids are NVML's (the host's PID
  namespace when the recorder runs there).

Where there is no NVML, no driver or no device, ``unavailable`` says why (it goes to meta ``gpu``,
which reports quote) and ``sample()`` gives empty tables.
"""

from __future__ import annotations

#: NVML return codes (nvml.h) the per-process query answers when it has nothing to report:
#: NVML_SUCCESS with zero samples (pynvml raises it as an error), NVML_ERROR_NOT_FOUND.
_NO_SAMPLES = (0, 6)
_NOT_SUPPORTED = 3


def _code(err) -> int | None:
    value = getattr(err, "value", None)
    return value if isinstance(value, int) else None


def _call(fn, *args):
    """``fn(*args)``, or None when NVML raises (one device's refused field stays NULL)."""
    try:
        return fn(*args)
    except Exception:  # pynvml.NVMLError and its per-code subclasses
        return None


def process_samples(nvml, handle, since_us: int) -> tuple[dict[int, float], int, str | None]:
    """Per-process SM utilisation on one device since ``since_us`` (an NVML timestamp, µs).

    Returns ({pid: mean smUtil % of the new samples}, the newest timestamp seen (``since_us`` if
    none), None or why per-process utilisation is unavailable on this device). Pure apart from
    the NVML call: ``nvml`` is the ``pynvml`` module or any object with its functions.
    """
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except Exception as err:
        if _code(err) in _NO_SAMPLES:
            return {}, since_us, None
        why = "not supported by this GPU/driver" if _code(err) == _NOT_SUPPORTED else str(err)
        return {}, since_us, f"nvmlDeviceGetProcessUtilization: {why}"
    sums: dict[int, list[float]] = {}
    newest = since_us
    for s in samples:
        ts = int(s.timeStamp)
        if ts <= since_us or int(s.pid) <= 0:
            continue
        newest = max(newest, ts)
        acc = sums.setdefault(int(s.pid), [0.0, 0])
        acc[0] += float(s.smUtil)
        acc[1] += 1
    return {pid: total / n for pid, (total, n) in sums.items()}, newest, None


def device_rows(nvml, handles, since: list[int]) -> tuple[list[tuple], list[tuple], list[int], dict[int, str]]:
    """One sampling pass over ``handles`` (pure function of what ``nvml`` answers).

    ``since``: per device, the newest per-process sample timestamp already consumed. Returns
    (gpu rows, gpu_process rows, the updated timestamps, {gpu_index: why per-process utilisation
    is unavailable}) in the row shapes of this module's docstring.
    """
    gpu_rows, proc_rows, newest, why = [], [], list(since), {}
    for i, h in enumerate(handles):
        util = _call(nvml.nvmlDeviceGetUtilizationRates, h)
        mem = _call(nvml.nvmlDeviceGetMemoryInfo, h)
        gpu_rows.append((i, None if util is None else float(util.gpu),
                         None if mem is None else int(mem.used), None if mem is None else int(mem.total)))
        sm, newest[i], reason = process_samples(nvml, h, since[i])
        if reason:
            why[i] = reason
        used = {}
        for p in _call(nvml.nvmlDeviceGetComputeRunningProcesses, h) or []:
            if int(p.pid) > 0:
                m = getattr(p, "usedGpuMemory", None)  # None where the driver cannot tell (WDDM)
                used[int(p.pid)] = None if m is None else int(m)
        for pid in sorted(sm.keys() | used.keys()):
            proc_rows.append((i, pid, sm.get(pid), used.get(pid)))
    return gpu_rows, proc_rows, newest, why


class GpuTelemetry:
    """NVML sampler. ``sample()`` -> {"gpu": rows, "gpu_process": rows} (module docstring);
    ``describe()`` -> meta ``gpu``: {available, devices, per_process} or {available: False, reason}.
    ``nvml``: the pynvml module to use (None: import it; tests pass a stand-in)."""

    def __init__(self, nvml=None):
        self.unavailable: str | None = None
        self._nvml = None
        self._handles: list = []
        self._since: list[int] = []
        self._why: dict[int, str] = {}
        if nvml is None:
            try:
                import pynvml as nvml  # from nvidia-ml-py
            except ImportError:
                self.unavailable = "nvidia-ml-py not installed (pip install 'dpuprof[gpu]')"
                return
        try:
            nvml.nvmlInit()
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except Exception as err:  # pynvml.NVMLError and friends: no driver, no device
            self.unavailable = f"NVML unavailable: {err}"
            return
        if not self._handles:
            self.unavailable = "NVML found no NVIDIA GPU"
            return
        self._nvml = nvml
        # Consume the per-process samples NVML already holds, so the first interval reads only its own.
        self._since = [0] * len(self._handles)
        _, _, self._since, self._why = device_rows(nvml, self._handles, self._since)

    def describe(self) -> dict:
        if self._nvml is None:
            return {"available": False, "reason": self.unavailable}
        names = []
        for h in self._handles:
            name = _call(self._nvml.nvmlDeviceGetName, h) or "?"
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        per = {str(i): self._why.get(i, "available") for i in range(len(self._handles))}
        return {"available": True, "devices": names, "per_process": per}

    def sample(self) -> dict[str, list[tuple]]:
        if self._nvml is None:
            return {"gpu": [], "gpu_process": []}
        gpu_rows, proc_rows, self._since, why = device_rows(self._nvml, self._handles, self._since)
        self._why.update(why)
        return {"gpu": gpu_rows, "gpu_process": proc_rows}
