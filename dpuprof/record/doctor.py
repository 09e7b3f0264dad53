"""Checks behind ``dpuprof doctor``.

Each check is a dict: name, ok, required, status, detail, fix. ``status`` says more than ``ok``:

- ``ok``: works;
- ``fallback``: works, with a limit the detail names (headers of another kernel series);
- ``unreadable``: present, but this user cannot read it (tracefs is root-only on most systems);
- ``not tried``: depends on a check above that failed;
- ``not root`` / ``not held``: informational (uid, one capability): record needs the required
  checks, not uid 0 (dpuprof/record/workload/privilege.py);
- ``missing``: absent.

What each check means for dpuprof, and why, is in docs/kernel-notes.md.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path

from dpuprof.record.load import probes as probemod
from dpuprof.record.load.bcc_loader import INSTALL_HINT, bcc_available, import_bcc
from dpuprof.record.stacks import kallsyms
from dpuprof.record.workload import privilege

_PERF_TEST = """
#include <uapi/linux/bpf_perf_event.h>
BPF_ARRAY(hits, u64, 1);
int on_sample(struct bpf_perf_event_data *ctx) { int z = 0; u64 *v = hits.lookup(&z); if (v) __sync_fetch_and_add(v, 1); return 0; }
"""
_KPROBE_TEST = "int probe(void *ctx) { return 0; }"
_FENTRY_TEST = "KFUNC_PROBE(vfs_read) { return 0; }"

#: bcc formats names as Python bytes reprs in its messages (``program b'probe' to kprobe b'vfs_read'``).
_BYTES_REPR = re.compile(r"""\bb(['"])(.*?)\1""")
#: What bcc says for any EPERM from the kernel, whoever runs it.
_BCC_EPERM = "Need super-user privileges to run"


def bcc_error(err: BaseException, default: str) -> str:
    """A bcc exception as one line for a check's detail: names as text, not bytes reprs, and bcc's
    "Need super-user privileges to run" said as what it means here. The checks that load programs
    run only with the eBPF privileges held (run_checks), so an EPERM is the kernel's policy refusing
    this kind of program, which no sudo fixes. ``default`` when the exception has no text."""
    lines = str(err).strip().splitlines()
    text = _BYTES_REPR.sub(lambda m: m.group(2), lines[0]) if lines else ""
    if _BCC_EPERM in text:
        return ("the kernel refused the load (EPERM) although this process holds the eBPF privileges: "
                "this kernel does not allow it (docs/kernel-notes.md)")
    return text[:200] or default


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


def _check(name, ok, detail, fix="", required=True, status=None) -> dict:
    return {"name": name, "ok": bool(ok), "required": required,
            "status": status or ("ok" if ok else "missing"), "detail": detail, "fix": "" if ok else fix}


def run_checks() -> list[dict]:
    checks = []
    root = os.geteuid() == 0
    checks.append(_check("root", root, "running as root" if root else
                         f"running as uid {os.geteuid()}: recording needs the capabilities below instead",
                         "", required=False, status=None if root else "not root"))
    caps = capability_checks()
    checks.extend(caps)
    may_bpf = next(c for c in caps if c["name"] == "eBPF privileges")["ok"]
    has_bcc, bcc_detail = bcc_available()
    checks.append(_check("bcc", has_bcc, f"bcc {bcc_detail}" if has_bcc else bcc_detail, INSTALL_HINT))
    headers = headers_check()
    checks.append(headers)
    tfs, tfs_check = tracefs_check()
    checks.append(tfs_check)
    btf = Path("/sys/kernel/btf/vmlinux").exists()
    checks.append(_check("BTF", btf, "/sys/kernel/btf/vmlinux" if btf else "no /sys/kernel/btf/vmlinux",
                         "a kernel built with CONFIG_DEBUG_INFO_BTF=y (optional: without it net_dev and block_io "
                         "use classic tracepoints, which miss events while another BPF program runs)",
                         required=False))
    checks.extend(tracepoint_checks(tfs is not None))
    can_compile = may_bpf and has_bcc and headers["ok"] and tfs is not None
    checks.append(_perf_event_check(can_compile))
    checks.extend(_optional_timing_checks(can_compile))
    return checks


def privileges() -> dict:
    """This process's privileges for ``doctor --format json``: ``uid`` (effective), ``root`` (bool),
    ``cap_eff`` (the CapEff mask, hex), ``capabilities`` ({name: {"held": bool, "enables": text}})
    for each capability dpuprof uses (privilege.REPORTED)."""
    mask = privilege.effective()
    return {"uid": os.geteuid(), "root": os.geteuid() == 0, "cap_eff": f"{mask:016x}",
            "capabilities": {privilege.NAMES[c]: {"held": privilege.has(mask, c), "enables": privilege.ENABLES[c]}
                             for c in privilege.REPORTED}}


CAPS_FIX = ("run as root (sudo), or grant CAP_BPF and CAP_PERFMON (setpriv --ambient-caps, systemd "
            "AmbientCapabilities=; docs/kernel-notes.md)")


def capability_checks(mask: int | None = None, kernel_last_cap: int | None = None) -> list[dict]:
    """One informational check per capability dpuprof uses (held or not, what it enables), then the
    required ones: "eBPF privileges" (CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN) and "kernel symbols"
    (/proc/kallsyms addresses visible). ``mask`` defaults to this process's CapEff."""
    mask = privilege.effective() if mask is None else mask
    last = privilege.last_cap() if kernel_last_cap is None else kernel_last_cap
    out = []
    for cap in privilege.REPORTED:
        name = privilege.NAMES[cap]
        held = privilege.has(mask, cap)
        known = cap <= last
        detail = ("held" if held else "not held" if known else "unknown to this kernel") + \
            f": {privilege.ENABLES[cap]}"
        out.append(_check(f"capability {name}", held, detail, "", required=False,
                          status=None if held else "not held"))
    verdict = privilege.bpf_verdict(mask, last)
    held = ", ".join(privilege.names(mask)) or "none"
    out.append(_check("eBPF privileges", verdict.ok,
                      f"may load and attach the probes (holds {held})" if verdict.ok
                      else f"needs {' and '.join(verdict.missing)}: {verdict.why} (holds {held})", CAPS_FIX))
    visible = kallsyms.addresses_visible()
    out.append(_check("kernel symbols", visible,
                      "/proc/kallsyms shows addresses: kernel frames are named" if visible else
                      "/proc/kallsyms shows zero addresses to this process: kernel frames would be [unknown]",
                      "run as root, or grant CAP_SYSLOG (or sysctl kernel.perf_event_paranoid=1)"))
    return out


HEADERS_FIX = "sudo scripts/install-bcc.sh (installs linux-headers, falls back to the newest)"
ROOT_FIX = "run as root (sudo dpuprof doctor), or grant CAP_DAC_READ_SEARCH (docs/kernel-notes.md)"


def _series(release: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def headers_release(build: Path) -> str | None:
    """The kernel release the headers at ``build`` were made for (``UTS_RELEASE``), or None."""
    try:
        text = (build / "include" / "generated" / "utsrelease.h").read_text()
        m = re.search(r'UTS_RELEASE\s+"([^"]+)"', text)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        return (build / "include" / "config" / "kernel.release").read_text().strip() or None
    except OSError:
        return None


def headers_check(kernel: str | None = None, build: Path | None = None) -> dict:
    """Kernel headers bcc compiles against. Headers of another kernel series load tracepoint and
    perf_event programs (their context layouts come from tracefs and the stable UAPI), but a program
    that reads kernel structs through the headers' offsets may read the wrong fields."""
    kernel = kernel or platform.release()
    build = build or Path(f"/lib/modules/{kernel}/build")
    if not (build / "include").exists():
        return _check("kernel headers", False, f"{build} missing", HEADERS_FIX)
    made_for = headers_release(build)
    where = f"{build} -> {os.path.realpath(build)}"
    if made_for is None:
        return _check("kernel headers", True, f"{where} (kernel release unknown)")
    have, want = _series(made_for), _series(kernel)
    if have is not None and have == want:
        return _check("kernel headers", True, f"{where} ({made_for})")
    short = lambda v: ".".join(map(str, v)) if v else "?"  # noqa: E731
    return _check("kernel headers", True,
                  f"fallback headers ({short(have)} for {short(want)}): tracepoint and perf_event programs "
                  f"work; struct-reading programs may not ({where}, made for {made_for})",
                  status="fallback")


def _tracefs_mounts() -> list[str]:
    """Mount points of tracefs from /proc/self/mounts (readable without root)."""
    try:
        with open("/proc/self/mounts") as fh:
            return [f[1] for f in (line.split() for line in fh) if len(f) > 2 and f[2] == "tracefs"]
    except OSError:
        return []


def tracefs_check() -> tuple[Path | None, dict]:
    """(readable tracefs or None, the check). Mounted but root-only is not "not mounted"."""
    tfs = probemod.tracefs()
    if tfs is not None:
        return tfs, _check("tracefs", True, str(tfs))
    mounted = _tracefs_mounts()
    for cand in probemod.TRACEFS_CANDIDATES:
        if cand in mounted or (os.path.isdir(cand) and not os.access(cand, os.R_OK | os.X_OK)):
            return None, _check("tracefs", False, f"{cand} is mounted but not readable by this user "
                                "(root, or CAP_DAC_READ_SEARCH)",
                                ROOT_FIX, status="unreadable")
    return None, _check("tracefs", False, "not mounted", "sudo mount -t tracefs nodev /sys/kernel/tracing")


def _kallsyms_tracepoints() -> set[str] | None:
    """Tracepoint names (without their category) from /proc/kallsyms' ``__traceiter_NAME`` symbols,
    which unprivileged users can list; None when there are none to go by."""
    names = set()
    try:
        with open("/proc/kallsyms") as fh:
            for line in fh:
                sym = line.rstrip("\n").rsplit(" ", 1)[-1]
                if sym.startswith("__traceiter_"):
                    names.add(sym[len("__traceiter_"):])
    except OSError:
        return None
    return names or None


def _users() -> dict[str, list]:
    """Tracepoint -> the probes that use it, in PROBES order (sched:sched_switch serves several)."""
    users: dict[str, list] = {}
    for probe in probemod.PROBES:
        for tp in probe.tracepoints:
            users.setdefault(tp, []).append(probe)
    return users


def tracepoint_checks(tracefs_readable: bool) -> list[dict]:
    """One check per tracepoint the probes use (one line however many probes share it; required
    when a required probe uses it): from tracefs when readable, else from /proc/kallsyms (a present
    tracepoint is then "unreadable": its format, which bcc needs, is root-only)."""
    from_kallsyms = None if tracefs_readable else _kallsyms_tracepoints()
    out = []
    for tp, probes in _users().items():
        names = ", ".join(p.name for p in probes)
        name, used = f"tracepoint {tp}", f"used by probe{'s' if len(probes) > 1 else ''} {names}"
        required = any(p.name in probemod.REQUIRED for p in probes)
        missing_fix = f"kernel lacks {tp}: probe{'s' if len(probes) > 1 else ''} {names} will be skipped"
        if tracefs_readable:
            out.append(_check(name, probemod.tracepoint_exists(tp), used, missing_fix, required=required))
        elif from_kallsyms is None:
            out.append(_check(name, False, f"{used}; not checked: tracefs not readable by this user",
                              ROOT_FIX, required=required, status="unreadable"))
        elif tp.split(":", 1)[1] in from_kallsyms:
            out.append(_check(name, False, f"{used}; in the kernel (/proc/kallsyms), its tracefs "
                              "format not readable by this user", ROOT_FIX, required=required,
                              status="unreadable"))
        else:
            out.append(_check(name, False, f"{used}; not in /proc/kallsyms", missing_fix, required=required))
    return out


def _perf_event_check(can_compile: bool) -> dict:
    name = "perf_event cpu-clock sampling"
    if not can_compile:
        return _check(name, False, "not tried (needs eBPF privileges, bcc, headers and tracefs)",
                      "fix the lines above",
                      status="not tried")
    bcc = import_bcc()
    try:
        b = bcc.BPF(text=_PERF_TEST, cflags=probemod.CFLAGS)
        b.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                            fn_name="on_sample", sample_freq=99, cpu=-1)
        b.cleanup()
    except Exception as err:
        return _check(name, False, bcc_error(err, "attach failed"),
                      "a kernel with CONFIG_BPF_EVENTS, and CAP_PERFMON (or root)")
    return _check(name, True, "software cpu-clock with BPF stack maps works")


def _optional_timing_checks(can_compile: bool) -> list[dict]:
    """kprobe and fentry are optional extras: detected by really trying (BPF.support_kfunc() can say
    True on kernels that then refuse the load)."""
    if not can_compile:
        return [_check("kprobe", False, "not tried", "", required=False, status="not tried"),
                _check("fentry/fexit", False, "not tried", "", required=False, status="not tried")]
    bcc = import_bcc()
    out = []
    try:
        with _quiet_stderr():
            b = bcc.BPF(text=_KPROBE_TEST, cflags=probemod.CFLAGS)
            b.attach_kprobe(event="vfs_read", fn_name="probe")
            b.cleanup()
        out.append(_check("kprobe", True, "kprobes attach", required=False))
    except Exception as err:
        out.append(_check("kprobe", False, bcc_error(err, "attach failed"),
                          "optional; a kernel with CONFIG_KPROBES=y", required=False))
    try:
        with _quiet_stderr():
            b = bcc.BPF(text=_FENTRY_TEST, cflags=probemod.CFLAGS)
            b.cleanup()
        out.append(_check("fentry/fexit", True, "fentry programs load", required=False))
    except Exception as err:
        out.append(_check("fentry/fexit", False, bcc_error(err, "load failed"),
                          "optional; needs BTF and a kernel allowing BPF trampolines", required=False))
    return out
