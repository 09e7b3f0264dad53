"""Checks behind ``dpuprof doctor``. Each check is a dict: name, ok, required, detail, fix."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

from dpuprof.record import probes as probemod
from dpuprof.record.bcc_loader import INSTALL_HINT, bcc_available

_PERF_TEST = """
#include <uapi/linux/bpf_perf_event.h>
BPF_ARRAY(hits, u64, 1);
int on_sample(struct bpf_perf_event_data *ctx) { int z = 0; u64 *v = hits.lookup(&z); if (v) __sync_fetch_and_add(v, 1); return 0; }
"""
_KPROBE_TEST = "int probe(void *ctx) { return 0; }"
_FENTRY_TEST = "KFUNC_PROBE(vfs_read) { return 0; }"


@contextlib.contextmanager
def _quiet_stderr():
    """libbcc prints its own diagnostics to fd 2 on a failed attach; the check reports them instead."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _check(name, ok, detail, fix="", required=True) -> dict:
    return {"name": name, "ok": bool(ok), "required": required, "detail": detail, "fix": "" if ok else fix}


def run_checks() -> list[dict]:
    checks = []
    root = os.geteuid() == 0
    checks.append(_check("root", root, "running as root" if root else f"running as uid {os.geteuid()}",
                         "run as root: sudo dpuprof record -- CMD"))
    has_bcc, bcc_detail = bcc_available()
    checks.append(_check("bcc", has_bcc, f"bcc {bcc_detail}" if has_bcc else bcc_detail, INSTALL_HINT))
    build = Path(f"/lib/modules/{platform.release()}/build")
    headers = (build / "include").exists()
    checks.append(_check("kernel headers", headers,
                         f"{build} -> {os.path.realpath(build)}" if headers else f"{build} missing",
                         "sudo scripts/install-bcc.sh (installs linux-headers, falls back to the newest)"))
    tfs = probemod.tracefs()
    checks.append(_check("tracefs", tfs is not None, str(tfs) if tfs else "not mounted",
                         "sudo mount -t tracefs nodev /sys/kernel/tracing"))
    btf = Path("/sys/kernel/btf/vmlinux").exists()
    checks.append(_check("BTF", btf, "/sys/kernel/btf/vmlinux" if btf else "no /sys/kernel/btf/vmlinux",
                         "a kernel built with CONFIG_DEBUG_INFO_BTF=y (optional: bcc uses headers)", required=False))
    for probe in probemod.PROBES:
        for tp in probe.tracepoints:
            present = tfs is not None and probemod.tracepoint_exists(tp)
            checks.append(_check(f"tracepoint {tp}", present, f"used by probe {probe.name}",
                                 f"kernel lacks {tp}: probe {probe.name} will be skipped",
                                 required=probe.name in probemod.REQUIRED))
    can_compile = root and has_bcc and headers and tfs is not None
    checks.append(_perf_event_check(can_compile))
    checks.extend(_optional_timing_checks(can_compile))
    return checks


def _perf_event_check(can_compile: bool) -> dict:
    name = "perf_event cpu-clock sampling"
    if not can_compile:
        return _check(name, False, "not tried (needs root, bcc, headers and tracefs)", "fix the lines above")
    from dpuprof.record.bcc_loader import import_bcc
    bcc = import_bcc()
    try:
        b = bcc.BPF(text=_PERF_TEST, cflags=probemod.CFLAGS)
        b.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                            fn_name="on_sample", sample_freq=99, cpu=-1)
        b.cleanup()
    except Exception as err:
        return _check(name, False, str(err).splitlines()[0][:200],
                      "a kernel with CONFIG_BPF_EVENTS and perf_event_paranoid allowing root")
    return _check(name, True, "software cpu-clock with BPF stack maps works")


def _optional_timing_checks(can_compile: bool) -> list[dict]:
    """kprobe and fentry are optional extras: detected by really trying (BPF.support_kfunc() can say
    True on kernels that then refuse the load)."""
    if not can_compile:
        return [_check("kprobe", False, "not tried", "", required=False),
                _check("fentry/fexit", False, "not tried", "", required=False)]
    from dpuprof.record.bcc_loader import import_bcc
    bcc = import_bcc()
    out = []
    try:
        with _quiet_stderr():
            b = bcc.BPF(text=_KPROBE_TEST, cflags=probemod.CFLAGS)
            b.attach_kprobe(event="vfs_read", fn_name="probe")
            b.cleanup()
        out.append(_check("kprobe", True, "kprobes attach", required=False))
    except Exception as err:
        out.append(_check("kprobe", False, str(err).splitlines()[0][:160] or "attach failed",
                          "optional; a kernel with CONFIG_KPROBES=y", required=False))
    try:
        with _quiet_stderr():
            b = bcc.BPF(text=_FENTRY_TEST, cflags=probemod.CFLAGS)
            b.cleanup()
        out.append(_check("fentry/fexit", True, "fentry programs load", required=False))
    except Exception as err:
        out.append(_check("fentry/fexit", False, str(err).splitlines()[0][:160] or "load failed",
                          "optional; needs BTF and a kernel allowing BPF trampolines", required=False))
    return out
