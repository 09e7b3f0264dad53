"""The probe registry: which BPF programs exist, what each needs, and loading them with bcc.

Each probe is one file in ``probes/`` (shipped in the wheel as ``dpuprof/_probes``). Probes whose
tracepoints are missing on this kernel are skipped and reported as unavailable with the reason;
the rest compile together in one bcc invocation (about 1 s), falling back to one at a time when the
combined program fails, so one bad probe never costs the others.

A probe may ``need`` another (its maps are shared by name in the combined program; compiled alone
it is compiled with what it needs).

One program per hot event: softirq entry and exit each run one
program, ``probes/hot_events.bpf.c``, appended to every build with ``HOOK_<probe>`` defined for
the probes in it; it calls each probe's hook (``softirq_on_entry``, ...), so a probe that needs
one of those events defines a hook instead of a program of its own.

Hooks: the hot events, net_dev and block_io attach to raw tracepoints where the kernel
has them (and, for net_dev and block_io, where BTF gives the running kernel's
struct offsets and constants): classic
tracepoint programs are skipped while any other BPF program runs on that CPU (the kernel's
bpf_prog_active recursion guard; each skip is a ``missed_<program>`` in the recording's ``lost``
table), raw tracepoint programs only when they would recurse into themselves. Without raw
tracepoints or BTF they use the classic tracepoints; the recording's metadata ``probe_hooks`` says
which ran (``hooks``). sched_wait reads its task arguments at BTF offsets, so it has only its raw
version: without raw tracepoints or BTF it is unavailable, with the reason.

Test knobs: ``DPUPROF_NO_RAW_TP=1`` forces the classic tracepoints (to compare the two).
``DPUPROF_MAP_ENTRIES=counts=8,stacks0=4`` overrides the ``max_entries`` of the named
hash and stack-trace maps, so tests can make maps overflow and check that the loss is counted.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from dpuprof.record.load import attach, compile_child, probe_cache

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


@dataclass(frozen=True)
class RawVariant:
    """How a probe's raw-tracepoint version is compiled: ``define`` selects it in the C file;
    each (constant, struct, member[, size]) of ``btf`` becomes ``#define constant <byte offset>``
    (with a size in bytes, a member of another size makes the raw version unusable: the program
    reads it with a fixed width), each (constant, enumerator) of ``enums`` becomes
    ``#define constant <value>``, and each (constant, variable, base, size) of ``percpu`` becomes
    ``#define constant <how far per-CPU variable ``variable`` lies from ``base``>`` (on any one
    CPU), all from the running kernel's BTF."""
    define: str
    btf: tuple[tuple, ...] = ()
    enums: tuple[tuple[str, str], ...] = ()
    optional: tuple[tuple, ...] = ()  # as ``btf``, but a member this kernel lacks defines nothing
    percpu: tuple[tuple[str, str, str, int], ...] = ()


@dataclass(frozen=True)
class Probe:
    name: str
    file: str
    tracepoints: tuple[str, ...] = ()
    perf_event: bool = False
    raw: RawVariant | None = None
    needs: tuple[str, ...] = ()  # probes whose maps this one uses


_SOFTIRQ_EDGES = ("irq:softirq_entry", "irq:softirq_exit")

PROBES = (
    # The exit hook's CPU total needs four offsets from BTF (probes/proc_tree.bpf.c); without them
    # the probe loads without it (a process's last partial interval is then left to its samples).
    Probe("proc_tree", "proc_tree.bpf.c",
          ("sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit"),
          raw=RawVariant("PROC_TREE_RAW_TP",
                         (("TASK_PID_OFF", "task_struct", "pid", 4), ("TASK_SIGNAL_OFF", "task_struct", "signal", 8),
                          ("TASK_RUNTIME_OFF", "task_struct", "se.sum_exec_runtime", 8),
                          ("SIG_LIVE_OFF", "signal_struct", "live", 4),
                          ("SIG_RUNTIME_OFF", "signal_struct", "sum_sched_runtime", 8)))),
    Probe("cpu_sample", "cpu_sample.bpf.c", perf_event=True),
    Probe("softirq", "softirq.bpf.c", _SOFTIRQ_EDGES),
    Probe("block_io", "block_io.bpf.c", ("block:block_rq_issue", "block:block_rq_complete"),
          raw=RawVariant("BLOCK_IO_RAW_TP",
                         (("BLK_RQ_Q_OFF", "request", "q", 8), ("BLK_RQ_FLAGS_OFF", "request", "cmd_flags", 4),
                          ("BLK_Q_DISK_OFF", "request_queue", "disk", 8),
                          ("BLK_DISK_MAJOR_OFF", "gendisk", "major", 4),
                          ("BLK_DISK_MINOR_OFF", "gendisk", "first_minor", 4)),
                         (("BLK_OP_BITS", "__REQ_FAILFAST_DEV"), ("BLK_OP_READ", "REQ_OP_READ"),
                          ("BLK_OP_WRITE", "REQ_OP_WRITE")))),
    Probe("net_dev", "net_dev.bpf.c", ("net:net_dev_xmit", "net:netif_receive_skb", "tcp:tcp_retransmit_skb"),
          raw=RawVariant("NET_DEV_RAW_TP", (("NET_SKB_LEN_OFF", "sk_buff", "len"),
                                            ("NET_SKB_DEV_OFF", "sk_buff", "dev"),
                                            ("NET_DEV_NAME_OFF", "net_device", "name")))),
    Probe("sock_io", "sock_io.bpf.c", ("sock:sock_send_length", "sock:sock_recv_length")),
    # Each TCP socket's bytes at its close, for the counters read per interval
    # (record/drain/sockdiag.py); offsets from BTF, so only a raw version.
    Probe("sock_close", "sock_close.bpf.c", ("sock:inet_sock_set_state",),
          raw=RawVariant("SOCK_CLOSE_RAW", (("SC_PROTOCOL_OFF", "sock", "sk_protocol", 2),
                                            ("SC_COOKIE_OFF", "sock", "__sk_common.skc_cookie", 8),
                                            ("SC_ACKED_OFF", "tcp_sock", "bytes_acked", 8),
                                            ("SC_RECEIVED_OFF", "tcp_sock", "bytes_received", 8)))),
    # record/drain/uprobes.py; a call's on-CPU time from the thread's task (two offsets from BTF;
    # without them cpu_ns is 0)
    Probe("uprobes", "uprobes.bpf.c", ("task:task_newtask", "syscalls:sys_enter_getpgid"),
          raw=RawVariant("UP_TASK_CLOCK", (("UP_RUNTIME_OFF", "task_struct", "se.sum_exec_runtime", 8),
                                           ("UP_EXEC_START_OFF", "task_struct", "se.exec_start", 8),
                                           ("UP_PID_OFF", "task_struct", "pid", 4)))),
    # Every thread's schedstat counters, birth and name in one read of a task iterator
    # (record/drain/tasks.py): no hook; offsets from BTF, so without it the probe is unavailable
    # and the recorder reads /proc.
    Probe("thread_stats", "thread_stats.bpf.c",
          raw=RawVariant("THREAD_STATS_BTF",
                         (("TS_PID_OFF", "task_struct", "pid", 4), ("TS_TGID_OFF", "task_struct", "tgid", 4),
                          ("TS_RUNTIME_OFF", "task_struct", "se.sum_exec_runtime", 8),
                          ("TS_DELAY_OFF", "task_struct", "sched_info.run_delay", 8),
                          ("TS_START_OFF", "task_struct", "start_time", 8),
                          ("TS_COMM_OFF", "task_struct", "comm", 16)))),
    # Waits measured at each wake-up from the wakee's own counters (probes/sched_wait.bpf.c): no
    # program on sched_switch; the task fields' offsets come from BTF, so there is no classic
    # tracepoint version.
    Probe("sched_wait", "sched_wait.bpf.c",
          ("sched:sched_waking", "sched:sched_wakeup_new", "sched:sched_process_exit"),
          needs=("proc_tree",),
          raw=RawVariant("SCHED_WAIT_RAW",
                         (("SW_PID_OFF", "task_struct", "pid", 4), ("SW_TGID_OFF", "task_struct", "tgid", 4),
                          ("SW_STATE_OFF", "task_struct", "__state", 4), ("SW_ON_RQ_OFF", "task_struct", "on_rq", 4),
                          ("SW_RUNTIME_OFF", "task_struct", "se.sum_exec_runtime", 8),
                          ("SW_RUN_DELAY_OFF", "task_struct", "sched_info.run_delay", 8),
                          ("SW_NVCSW_OFF", "task_struct", "nvcsw", 8),
                          # interrupt context: this CPU's preempt count, found from its run queue
                          ("SW_CFS_RQ_OFF", "task_struct", "se.cfs_rq", 8), ("SW_RQ_OFF", "cfs_rq", "rq", 8)),
                         # Linux >= 6.12: a sleeping task may stay queued (delayed dequeue)
                         optional=(("SW_DELAYED_OFF", "task_struct", "se.sched_delayed", 1),),
                         percpu=(("SW_PREEMPT_FROM_RQ", "__preempt_count", "runqueues", 4),))),
)
# The one program on each hot event (probes/hot_events.bpf.c): softirq entry and exit; their raw
# versions read only the vector, so they need raw tracepoints and nothing from BTF.
HOT_EVENTS = "hot_events.bpf.c"
HOT_RAW = RawVariant("HOT_RAW_TP")
HOT_EVENT_NAMES = {"softirq_entry", "softirq_exit"}
PROBE_NAMES = tuple(p.name for p in PROBES)
REQUIRED = ("proc_tree", "cpu_sample")  # without these there is no workload or category split
# Probes with a program on every packet, block request, softirq or socket call: what they count,
# the kernel already counts per device or socket at no cost per event (/proc/PID/net/dev,
# /proc/diskstats, sock_diag's tcp_info: record/drain/netdev.py, diskstats.py, sockdiag.py), and
# the sampled stacks split softirq work by category. On the loads of benchmarks/HOT_LOADS.md they
# cost 0.86 of the 1.60 BPF-seconds of an iperf3 flood and 2.6 s in 15 s of fio at ~195k IOPS
# (sock_io alone: 0.57 % of a core on iperf3, and 512 ns a socket call pair from the caller's side).
# So they load only when named (``--probes``, or ``all``): for exact per-event data, the block
# latency histogram, the softirq time per vector, socket calls and UDP bytes.
PER_EVENT = ("net_dev", "block_io", "softirq", "sock_io")
DEFAULT_PROBES = tuple(n for n in PROBE_NAMES if n not in PER_EVENT)
# record --light: the categories, bytes and IOs (counted from /proc and sock_diag) at a fifth of the
# default frequency, drained a fifth as often (the recorder's work is mostly per drain), without the
# per-thread waits (sched_wait: a program on every wake-up and interrupt edge, and a row per thread
# per interval) or uprobes; for long and always-on recordings.
LIGHT_PROBES = ("proc_tree", "cpu_sample", "sock_close", "thread_stats")
LIGHT_FREQ_HZ = 19
LIGHT_INTERVAL_S = 5.0


def probe_dir() -> Path:
    """Where the BPF C files are: inside the installed wheel, or ``probes/`` of a source tree."""
    packaged = resources.files("dpuprof").joinpath("_probes")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "probes"


def tracefs() -> Path | None:
    """The tracefs mount (mounting it when missing and root); None when unreachable."""
    for cand in TRACEFS_CANDIDATES:
        if os.path.isdir(os.path.join(cand, "events")):
            return Path(cand)
    if os.geteuid() == 0 and os.path.isdir(TRACEFS_CANDIDATES[0]):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS_CANDIDATES[0]],
                       capture_output=True, check=False)
        if os.path.isdir(os.path.join(TRACEFS_CANDIDATES[0], "events")):
            return Path(TRACEFS_CANDIDATES[0])
    return None


def tracepoint_exists(tp: str) -> bool:
    root = tracefs()
    category, name = tp.split(":", 1)
    return root is not None and (root / "events" / category / name / "format").exists()


def missing_tracepoints(probe: Probe) -> list[str]:
    return [tp for tp in probe.tracepoints if not tracepoint_exists(tp)]


MAP_ENTRIES_ENV = "DPUPROF_MAP_ENTRIES"
_SIZED_MAP = r"(BPF_(?:HASH|LRU_HASH|PERCPU_HASH|STACK_TRACE)\(\s*{name}\s*,[^;]*?)(\d+)(\s*\)\s*;)"


def map_entries_override() -> dict[str, int]:
    """{map name: max_entries} from ``DPUPROF_MAP_ENTRIES`` (a test knob; empty when unset)."""
    from dpuprof.errors import UserError

    spec = os.environ.get(MAP_ENTRIES_ENV, "").strip()
    out = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, size = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name.strip()) or not size.strip().isdigit() or int(size) < 1:
            raise UserError(f"{MAP_ENTRIES_ENV}: expected NAME=ENTRIES[,NAME=ENTRIES...], got {item!r}")
        out[name.strip()] = int(size)
    return out


NO_RAW_TP_ENV = "DPUPROF_NO_RAW_TP"


@lru_cache(maxsize=1)
def _kernel_btf():
    from dpuprof.record.load.btf import Btf
    return Btf.load()


def kernel_has_raw_tracepoints(release: str | None = None) -> bool:
    """Whether the running kernel (or ``release``, a ``uname -r`` string) has raw tracepoints:
    Linux >= 4.17. bcc's ``support_raw_tracepoint`` answers by loading all of /proc/kallsyms
    (0.4-0.8 s before the command could start); a probe whose raw version fails to load still
    falls back to its classic tracepoints (``load``)."""
    m = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return m is not None and (int(m[1]), int(m[2])) >= (4, 17)


def raw_defines(probe: Probe, bpf_cls, supported: bool | None = None) -> tuple[str | None, str]:
    """(``#define`` lines selecting ``probe``'s raw-tracepoint version, "") when it can be used
    here; (None, why not) otherwise, and always for a probe without one. ``supported``: whether
    the kernel has raw tracepoints, checked once by the caller; None asks ``bpf_cls``."""
    from dpuprof.record.load.btf import BtfError

    if probe.raw is None:
        return None, "no raw-tracepoint version"
    if os.environ.get(NO_RAW_TP_ENV, "") not in ("", "0"):
        return None, f"{NO_RAW_TP_ENV} is set"
    if supported is None:
        support = getattr(bpf_cls, "support_raw_tracepoint", None)
        supported = support is None or bool(support())
    if not supported:
        return None, "this kernel has no raw tracepoints"
    lines = [f"#define {probe.raw.define} 1"]
    try:
        for const, struct_name, member, *size in probe.raw.btf:
            found = _kernel_btf().member(struct_name, member)
            if size and found.size != size[0]:
                return None, f"BTF: {struct_name}.{member} is {found.size} bytes, not {size[0]}"
            lines.append(f"#define {const} {found.offset}")
        for const, name in probe.raw.enums:
            lines.append(f"#define {const} {_kernel_btf().enumerator(name)}")
        for const, var, base, size in probe.raw.percpu:
            found = _kernel_btf().percpu_var(var)
            if found.size != size:
                return None, f"BTF: per-CPU {var} is {found.size} bytes, not {size}"
            lines.append(f"#define {const} ({found.offset - _kernel_btf().percpu_var(base).offset}LL)")
    except BtfError as err:
        return None, f"BTF: {err}"
    for const, struct_name, member, size in probe.raw.optional:
        try:
            found = _kernel_btf().member(struct_name, member)
        except BtfError:
            continue
        if found.size == size:
            lines.append(f"#define {const} {found.offset}")
    return "\n".join(lines) + "\n", ""


def _source(probe: Probe, defines: str | None = None) -> str:
    text = (probe_dir() / probe.file).read_text()
    for name, size in map_entries_override().items():
        text = re.sub(_SIZED_MAP.format(name=re.escape(name)), lambda m: f"{m[1]}{size}{m[3]}", text)
    return (defines or "") + text


def hot_source(probes: list[Probe], defines: str | None = None) -> str:
    """The hot events' programs for ``probes`` (appended after their files): ``HOOK_<name>`` for
    each, then ``defines`` (the raw version's, or None for the classic tracepoints)."""
    hooks = "".join(f"#define HOOK_{p.name} 1\n" for p in probes)
    return hooks + (defines or "") + (probe_dir() / HOT_EVENTS).read_text()


def hot_defines(bpf_cls, release: str | None = None) -> str | None:
    """The hot events' raw-version defines where this kernel (or ``release``) has raw
    tracepoints, else None (classic tracepoints)."""
    return raw_defines(Probe("hot_events", HOT_EVENTS, raw=HOT_RAW), bpf_cls, kernel_has_raw_tracepoints(release))[0]


def hooks(probes) -> dict[str, str]:
    """{probe name: "raw_tracepoint" or "tracepoint"} for the loaded probes (loaded.LoadedProbes)
    that have both versions, read from the programs loaded."""
    funcs = set(probes.programs)
    out = {}
    for probe in PROBES:
        events = [tp.split(":", 1)[1] for tp in probe.tracepoints]
        if probe.raw is None and not set(events) <= HOT_EVENT_NAMES:
            continue  # one kind only
        if any(f"raw_tracepoint__{e}" in funcs for e in events):
            out[probe.name] = "raw_tracepoint"
        elif any(f.startswith("tracepoint__") and f.split("__")[-1] in events for f in funcs):
            out[probe.name] = "tracepoint"
    return out


PERF_EVENT_FUNCS = ("on_sample",)  # attached by the caller as perf_event programs (BpfSource.load)
CFLAGS = ["-w"]  # bcc's headers vs. a newer kernel produce harmless macro warnings


def load(bpf_cls, wanted: list[str]) -> tuple[object | None, list[str], dict[str, str]]:
    """Load and attach the ``wanted`` probes. Returns (bpf, used names, {unavailable: reason}).

    perf_event attachment (cpu_sample) is done by the caller, which knows the frequency. The
    probes always load from a compiled entry (compile_child.py, probe_cache.py): the one stored
    for this key by an earlier start, or one a short-lived child compiles now with bcc
    (``bpf_cls``, bcc.BPF), so the compiler's memory never becomes the recorder's; the parsed
    kernel BTF is let go after the load.
    """
    return start_load(bpf_cls, wanted)()


def cache_key(wanted: list[str]) -> str:
    """probe_cache's key for a load of ``wanted`` on this kernel, with these probe sources."""
    return probe_cache.cache_key(wanted, list(probe_dir().glob("*.bpf.c")),
                                 {p.name: missing_tracepoints(p) for p in PROBES if p.name in wanted})


def start_load(bpf_cls, wanted: list[str]):
    """``load``, started: a compile runs (in a child) while the caller goes on; calling the
    returned function waits for it and returns what ``load`` returns."""
    pending = compile_child.start(bpf_cls, wanted, _load, PERF_EVENT_FUNCS, cache_key)

    def result():
        try:
            return pending.result()
        finally:
            _kernel_btf.cache_clear()  # the parsed BTF (~10 MB of Python objects) is needed only here

    return result


def _load(bpf_cls, wanted: list[str]) -> tuple[object | None, list[str], dict[str, str]]:
    map_entries_override()  # a malformed DPUPROF_MAP_ENTRIES fails here, not as a probe's compile error
    unavailable: dict[str, str] = {}
    candidates = []
    for probe in PROBES:
        if probe.name not in wanted:
            continue
        missing = missing_tracepoints(probe)
        if missing:
            unavailable[probe.name] = "tracepoint missing on this kernel: " + ", ".join(missing)
        else:
            candidates.append(probe)
    candidates = _with_needs(candidates, unavailable)
    if not candidates:
        return None, [], unavailable
    raw_ok = kernel_has_raw_tracepoints()  # once per load, not per probe
    variants = {p.name: raw_defines(p, bpf_cls, raw_ok)[0] for p in candidates}
    variants[HOT_EVENTS] = hot_defines(bpf_cls) if raw_ok else None
    for hot in dict.fromkeys((variants[HOT_EVENTS], None)):
        try:
            bpf = _build(bpf_cls, candidates, {**variants, HOT_EVENTS: hot})
            return bpf, [p.name for p in candidates], unavailable
        except Exception:  # bcc raises a bare Exception on compile/load failure
            pass
    variants[HOT_EVENTS] = None  # from here on, the hot events on their classic tracepoints
    # Find the culprit(s) one by one, each with what it needs (a raw-tracepoint version that fails
    # falls back to the classic one), then load the survivors together.
    by_name = {p.name: p for p in PROBES}
    good = []
    for probe in candidates:
        for defines in dict.fromkeys((variants[probe.name], None)):
            try:
                trial = _build(bpf_cls, [by_name[n] for n in probe.needs] + [probe], {**variants, probe.name: defines})
                trial.cleanup()
                variants[probe.name] = defines
                good.append(probe)
                break
            except Exception as err:
                unavailable[probe.name] = f"failed to compile or load: {str(err).splitlines()[0][:200]}"
        if probe in good:
            unavailable.pop(probe.name, None)
    good = _with_needs(good, unavailable)
    if not good:
        return None, [], unavailable
    return _build(bpf_cls, good, variants), [p.name for p in good], unavailable


def _with_needs(probes: list[Probe], unavailable: dict[str, str]) -> list[Probe]:
    """``probes`` less those needing one that is not among them (reported in ``unavailable``)."""
    names = {p.name for p in probes}
    out = []
    for probe in probes:
        missing = [n for n in probe.needs if n not in names]
        if missing:
            unavailable.setdefault(probe.name, "needs probe " + ", ".join(missing) + ", unavailable")
        else:
            out.append(probe)
    return out


def _build(bpf_cls, probes: list[Probe], variants: dict):
    """One bcc program of ``probes`` (in order, each in its ``variants`` version: raw-tracepoint
    defines or None) and their hot events' programs (``variants[HOT_EVENTS]``)."""
    text = "\n".join([*(_source(p, variants.get(p.name)) for p in probes),
                      hot_source(probes, variants.get(HOT_EVENTS))])
    bpf = bpf_cls(text=text, cflags=CFLAGS)
    if hasattr(bpf, "tracepoint_fds"):
        bpf.cleanup = functools.partial(attach.cleanup_in_parallel, bpf, bpf.cleanup)
    return bpf
