"""Which Linux capabilities this process has, and whether they are enough to record with eBPF.

``dpuprof record`` does not need uid 0, it needs what the kernel checks (capabilities(7), bpf(2),
perf_event_open(2)); the reasons, and what was tried on which kernel, are in docs/kernel-notes.md:

- CAP_BPF + CAP_PERFMON (Linux >= 5.8) load tracing BPF programs, read kernel memory from them and
  open system-wide perf events; before 5.8 only CAP_SYS_ADMIN does;
- tracefs (tracepoint formats and ids, which bcc reads) is root-only on most systems: without
  uid 0 it takes CAP_DAC_READ_SEARCH, or tracefs mounted with ``gid=`` of a group the user is in;
- CAP_SYSLOG shows kernel symbol addresses in /proc/kallsyms (kernel frames) when
  kernel.perf_event_paranoid > 1;
- CAP_SYS_PTRACE reads other users' /proc/PID/maps (their user frames), for -p, --cgroup and -a;
- uprobes (optional) took CAP_SYS_ADMIN on Linux 6.18 (the uprobe PMU refused CAP_PERFMON).

The launched command gets none of them: its ambient set is cleared before exec (``clear_ambient``).

The effective set comes from ``CapEff`` in /proc/self/status: a hexadecimal bit mask, bit N set
when capability N is held.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from dpuprof.errors import UserError
from dpuprof.record.stacks.kallsyms import addresses_visible

CAP_DAC_READ_SEARCH = 2
CAP_SYS_PTRACE = 19
CAP_SYS_ADMIN = 21
CAP_SYSLOG = 34
CAP_PERFMON = 38
CAP_BPF = 39

NAMES = {CAP_DAC_READ_SEARCH: "CAP_DAC_READ_SEARCH", CAP_SYS_PTRACE: "CAP_SYS_PTRACE",
         CAP_SYS_ADMIN: "CAP_SYS_ADMIN", CAP_SYSLOG: "CAP_SYSLOG", CAP_PERFMON: "CAP_PERFMON",
         CAP_BPF: "CAP_BPF"}

#: What each capability gives dpuprof (doctor prints these).
ENABLES = {
    CAP_BPF: "load BPF programs and create maps (with CAP_PERFMON: tracing programs)",
    CAP_PERFMON: "system-wide perf events (cpu-clock sampling, tracepoints) and kernel reads from BPF",
    CAP_SYS_PTRACE: "read other users' /proc/PID/maps and stacks (-p, --cgroup, -a on their processes)",
    CAP_SYS_ADMIN: "uprobes (collectives, --codec-uprobes: Linux 6.18 refused the uprobe PMU to CAP_PERFMON), "
                   "and CAP_BPF's and CAP_PERFMON's work before Linux 5.8",
    CAP_DAC_READ_SEARCH: "read root-only tracefs (tracepoint formats and ids) without uid 0",
    CAP_SYSLOG: "kernel symbol addresses in /proc/kallsyms (kernel frames) when perf_event_paranoid > 1",
}

#: The capabilities doctor reports, in this order.
REPORTED = (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH, CAP_SYSLOG)


def parse_capeff(status_text: str) -> int:
    """The effective capability mask from the text of /proc/PID/status (its ``CapEff:`` line, hex).
    Raises ValueError when the line is absent or not hexadecimal."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise ValueError("no CapEff line in the status text")


def effective(status_path: str = "/proc/self/status") -> int:
    """This process's effective capability mask (0 when /proc cannot be read)."""
    try:
        with open(status_path) as fh:
            return parse_capeff(fh.read())
    except (OSError, ValueError):
        return 0


def has(mask: int, cap: int) -> bool:
    return bool(mask >> cap & 1)


def names(mask: int, caps=REPORTED) -> list[str]:
    """Names of the capabilities in ``caps`` that ``mask`` holds."""
    return [NAMES[c] for c in caps if has(mask, c)]


def last_cap(path: str = "/proc/sys/kernel/cap_last_cap") -> int:
    """The highest capability number the running kernel knows (CAP_BPF needs >= 39); 40 if unknown."""
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return 40


@dataclass(frozen=True)
class Verdict:
    """Whether eBPF recording may proceed: ``ok``, and ``missing`` (capability names) with ``why``."""

    ok: bool
    missing: tuple[str, ...] = ()
    why: str = ""


def bpf_verdict(mask: int, kernel_last_cap: int = 40) -> Verdict:
    """Whether ``mask`` may load and attach dpuprof's tracing programs: CAP_SYS_ADMIN, or CAP_BPF and
    CAP_PERFMON where the kernel knows them (``kernel_last_cap`` >= 39, Linux >= 5.8)."""
    knows_bpf = kernel_last_cap >= CAP_BPF
    if has(mask, CAP_SYS_ADMIN) or (knows_bpf and has(mask, CAP_BPF) and has(mask, CAP_PERFMON)):
        return Verdict(True)
    if kernel_last_cap < CAP_BPF:
        return Verdict(False, ("CAP_SYS_ADMIN",), "this kernel predates CAP_BPF/CAP_PERFMON (Linux < 5.8)")
    missing = tuple(NAMES[c] for c in (CAP_BPF, CAP_PERFMON) if not has(mask, c))
    return Verdict(False, missing, "loading tracing BPF programs and opening system-wide perf events")


def tracefs_verdict(mounted_unreadable: str | None) -> Verdict:
    """``mounted_unreadable``: a tracefs mount point this process cannot read, or None (readable, or
    not mounted: probes.py then says which tracepoints are missing)."""
    if mounted_unreadable is None:
        return Verdict(True)
    return Verdict(False, ("CAP_DAC_READ_SEARCH",),
                   f"bcc reads tracepoint formats and ids in {mounted_unreadable}, which this user cannot read "
                   "(or mount tracefs with gid= of a group the user is in)")


def kallsyms_verdict(addresses_visible: bool) -> Verdict:
    """Kernel frames are named from /proc/kallsyms: its addresses must not read as zeros."""
    if addresses_visible:
        return Verdict(True)
    return Verdict(False, ("CAP_SYSLOG",), "kernel frames are named from /proc/kallsyms, whose addresses "
                   "read as zeros here (kernel.kptr_restrict, or kernel.perf_event_paranoid > 1)")


def tracefs_mounts(mounts_path: str = "/proc/self/mounts") -> list[str]:
    """Mount points of tracefs, from /proc/self/mounts (readable without privileges)."""
    try:
        with open(mounts_path) as fh:
            return [f[1] for f in (line.split() for line in fh) if len(f) > 2 and f[2] == "tracefs"]
    except OSError:
        return []


def unreadable_tracefs(mounts: list[str] | None = None) -> str | None:
    """A tracefs mount point this process cannot list when none can be listed; None when one can or
    none is mounted. Listing is tried for real: access(2) ignores capabilities for a non-root uid."""
    mounts = tracefs_mounts() if mounts is None else mounts
    for point in mounts:
        try:
            os.listdir(os.path.join(point, "events"))
            return None
        except OSError:
            continue
    return mounts[0] if mounts else None


PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4  # <linux/prctl.h>
_CAP_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit data words


def clear_ambient() -> bool:
    """Empty this process's ambient and inheritable capability sets (prctl(2)
    PR_CAP_AMBIENT_CLEAR_ALL, capset(2)), so that a program it executes as a non-root user gets no
    capabilities. Meant for the recorded command between fork and exec: a recorder started with
    ``setpriv --ambient-caps`` or systemd AmbientCapabilities= would otherwise hand CAP_BPF etc. to
    the workload. Lowering these sets needs no privilege. False if a call failed."""
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0
        header, data = Header(_CAP_VERSION_3, 0), (Data * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            return False
        for word in data:
            word.inheritable = 0
        return ok and libc.capset(ctypes.byref(header), data) == 0
    except (OSError, AttributeError):
        return False


def require_for_bpf() -> None:
    """Raise UserError with one line naming the missing capability when this process may not record
    with eBPF; return quietly otherwise (uid 0 with its usual capabilities passes)."""
    mask = effective()
    for verdict in (bpf_verdict(mask, last_cap()), tracefs_verdict(unreadable_tracefs()),
                    kallsyms_verdict(addresses_visible())):
        if not verdict.ok:
            raise UserError(
                f"recording with eBPF needs root, or {' and '.join(verdict.missing)}: {verdict.why}. This process "
                f"(uid {os.geteuid()}) has {', '.join(names(mask)) or 'none of the capabilities it uses'}; "
                "run it with sudo, grant the capabilities (setpriv/capsh, systemd AmbientCapabilities=; "
                "docs/kernel-notes.md), or use --probes psutil for a light recording without the "
                "category split")
