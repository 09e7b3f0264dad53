"""Where an interval's CPU data comes from: the two recording modes behind one interface.

``BpfSource`` (default; root and bcc) loads the eBPF probes (probes.py), samples stacks at
``freq_hz`` and classifies them, and drains the softirq, block, net, socket, uprobe and loss maps.
Each interval it yields ``cpu_category`` (the samples' mix scaled to the kernel's exact times:
accounting.py), ``stack_samples``, ``thread_category``, ``softirq``,
``block_io``/``block_latency``, ``net_io``/``events``, ``sock_io``, ``lost``, ``probe_cost`` (its
own programs' run time, drain/cost.py) and the uprobe tables, new stacks and markers; ``exits``
gives the CPU of the workload's processes that ended.

``PsutilSource`` (``--probes psutil``) needs no root and loads nothing: it yields no tables of its
own, so the recording holds only what the recorder samples in both modes (host_cpu, proc_cpu,
thread tables from /proc, gpu): host and per-process CPU splits without categories.

Both are a ``Source`` (the Protocol below): what recorder.py calls; it never asks which mode it
has. tests/test_contracts.py checks that each class has every member, with a compatible signature.
"""

from __future__ import annotations

import ctypes as ct
import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from dpuprof.categories import NOT_WORK
from dpuprof.errors import UserError
from dpuprof.record.drain.accounting import CpuRow, HostTimes, cpu_category_rows
from dpuprof.record.drain.cost import ProbeCost
from dpuprof.record.drain.execs import ExecWatcher
from dpuprof.record.drain.maps import (
    BlockDrainer,
    LostDrainer,
    NetDrainer,
    SockCloseDrainer,
    SockDrainer,
    SoftirqDrainer,
)
from dpuprof.record.drain.progstats import prog_infos
from dpuprof.record.drain.samples import SampleDrainer
from dpuprof.record.drain.threads import SchedWaitMaps
from dpuprof.record.drain.tree import TreeDrainer
from dpuprof.record.drain import tasks, uprobes, waitduty
from dpuprof.record.load import attach
from dpuprof.record.load import probes as probemod
from dpuprof.record.load.bcc_loader import import_bcc
from dpuprof.record.stacks.classify import Classifier
from dpuprof.record.stacks.perfmap import ENV as PYTHON_ENV
from dpuprof.record.stacks.perfmap import python_frames_status
from dpuprof.record.stacks.symbols import Symbolizer, warm_kernel_symbols
from dpuprof.record.workload.privilege import require_for_bpf
from dpuprof.record.workload.procfs import all_pids, in_host_pidns

# Every this many drains, the per-process BPF map sock_stats loses the entries of processes that
# have exited: one listing of /proc (~1 ms for 300 processes) instead of one per interval; the
# map holds at most this many drains' worth of exited processes (each drain reads it whole).
PRUNE_EVERY = 10
PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK = 1, 0  # the sampler's event (include/uapi/linux/perf_event.h)


#: Maps holding when something still in flight began, per CPU or per request (softirq's entry,
#: block_io's issue): emptied before the probes are attached again after a
#: pause, or the first event to end would be charged the paused time. The probes treat a missing
#: start as "began before we attached".
IN_FLIGHT_MAPS = ("sirq_start", "blk_start")
#: Probes whose state follows each thread or process across events (sched_wait's waits, uprobes'
#: calls and links into each process): a pause would leave it wrong, so --duty refuses them.
NOT_PAUSABLE = ("sched_wait", "uprobes")


@dataclass
class Drained:
    """One interval from a source: ``tables`` {table: rows} for RecordingWriter.write_interval,
    ``stacks`` new stack rows, ``dropped_stacks`` ids of stacks never referred to again,
    ``markers`` marker rows, ``comms`` {pid: comm} of sampled processes (``main_named``: those
    named by their main thread's samples, drain/samples.py process_comms), ``ran`` pids that were
    sampled, ``samples`` sampled (busy ``busy`` by top-level category), ``lost`` whole samples
    lost (map overflows), ``warnings`` lines for the user (a probe that stopped early),
    ``closed_sockets`` (cookie, tgid, bytes_acked, bytes_received) of the TCP sockets closed since
    the last drain, and ``sockets_opened`` the count of TCP connections established on the host
    (None without sock_close), for the socket counters (drain/sockdiag.py)."""
    tables: dict = field(default_factory=dict)
    stacks: list = field(default_factory=list)
    dropped_stacks: list = field(default_factory=list)
    markers: list = field(default_factory=list)
    comms: dict = field(default_factory=dict)
    main_named: set = field(default_factory=set)
    ran: set = field(default_factory=set)
    samples: int = 0
    busy: Counter = field(default_factory=Counter)
    lost: int = 0
    warnings: list = field(default_factory=list)
    closed_sockets: list = field(default_factory=list)
    sockets_opened: int | None = None


class Source(Protocol):
    """What recorder.py calls on a recording mode. In order: ``check()`` raises one UserError line
    when the mode cannot run here; ``load(work)`` loads what it measures with, for ``work`` (a
    record.workload.targets.Workload); ``prime()`` takes every cumulative counter's baseline, so
    interval 0 starts then; each interval, ``parents()`` ({pid: ppid}, or None: follow /proc),
    ``exits()`` ({pid: on-CPU ns of its whole life} of processes ended since the last call) and
    ``drain(...)`` (BpfSource.drain); ``pause()``/``resume()`` around --duty's off parts; ``close()``
    (idempotent). For the metadata: ``meta(command, user)``, ``unavailable`` {probe: why},
    ``hooks`` {probe: hook kind}, ``category_split``; ``env_extra()`` is added to the command's
    environment (or None); ``probe_tables()`` says which of net_io, block_io and sock_io the mode fills, and
    ``sched_wait_maps()`` gives record/drain/threads.py its maps (or None), ``task_iterator()``
    drain/telemetry.py its reader of every thread's counters (or None: /proc), ``wait_duty(on, period)``
    the duty cycle of sched_wait's wake-up program (drain/waitduty.py; None without it)."""

    category_split: bool
    unavailable: dict[str, str]
    hooks: dict[str, str]

    def check(self) -> None: ...
    def load(self, work) -> None: ...
    def meta(self, command, user) -> dict: ...
    def env_extra(self) -> dict | None: ...
    def prime(self) -> None: ...
    def parents(self) -> dict[int, int] | None: ...
    def sched_wait_maps(self): ...
    def task_iterator(self): ...
    def wait_duty(self, on: int, period: int): ...
    def exits(self) -> dict[int, float]: ...
    def probe_tables(self) -> set[str]: ...
    def drain(self, workload, exact_ns, host: HostTimes | None, writer) -> Drained: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def close(self) -> None: ...


class PsutilSource:
    """No root, no probes: the recorder's /proc and psutil telemetry only."""

    category_split = False
    used: list[str] = []
    hooks: dict[str, str] = {}

    def __init__(self, opts):
        self.unavailable = {"cpu_sample": "psutil mode (--probes psutil): no category split"}

    def check(self) -> None:
        """Nothing to check: psutil mode runs as any user."""

    def load(self, work) -> None:
        """Nothing to load."""

    def meta(self, command, user) -> dict:
        return {"mode": "psutil", "category_split": False, "sample_freq_hz": 0, "rules_sha256": None,
                "probes_used": ["psutil"], "python_frames": "off: --probes psutil samples no stacks",
                "probe_cost": "unavailable: psutil mode (--probes psutil) loads no BPF programs"}

    def env_extra(self) -> dict | None:
        return None

    def prime(self) -> None:
        pass

    def parents(self) -> dict[int, int] | None:
        return None  # targets.py then follows the tree through /proc

    def sched_wait_maps(self):
        return None

    def task_iterator(self):
        return None

    def wait_duty(self, on: int, period: int):
        return None

    def exits(self) -> dict[int, float]:
        return {}

    def probe_tables(self) -> set[str]:
        return set()

    def drain(self, workload, exact_ns, host, writer) -> Drained:
        return Drained()

    def pause(self) -> None:
        """Nothing attached, nothing to detach."""

    def resume(self) -> None:
        """Nothing to attach."""

    def close(self) -> None:
        pass


class BpfSource:
    """The eBPF probes: see the module docstring for what each interval yields."""

    category_split = True

    def __init__(self, opts):
        self.opts = opts
        self.bpf = None
        self.used: list[str] = []
        self.unavailable: dict[str, str] = {}
        self.hooks: dict[str, str] = {}  # probe -> "raw_tracepoint" | "tracepoint" (probes.hooks)
        self.uprobes = None  # dpuprof.record.drain.uprobes.UprobeSession
        self.softirq = self.block = self.net = self.sock = self.sock_close = None
        self.cost = None  # dpuprof.record.drain.cost.ProbeCost
        self._detached: list = []  # what pause() detached, for resume() (record/load/attach.py)
        self._detaching = lambda: None  # waits for pause()'s closes
        self.execs = None  # dpuprof.record.drain.execs.ExecWatcher
        self.drains = 0

    def check(self) -> None:
        """Capabilities (root, or CAP_BPF + CAP_PERFMON and friends), bcc and the host PID
        namespace, or one UserError line saying what to do."""
        require_for_bpf()  # capabilities, not uid 0: one line naming what is missing (privilege.py)
        import_bcc()
        if not in_host_pidns():
            raise UserError("dpuprof runs in a PID namespace other than the host's, and the eBPF probes "
                            "report host PIDs: run the container with the host PID namespace "
                            "(docker --pid=host, Kubernetes hostPID: true)")

    def _wanted(self, probemod) -> list[str]:
        wanted = list(self.opts.probes) or list(probemod.DEFAULT_PROBES)
        if wanted == ["all"]:
            wanted = list(probemod.PROBE_NAMES)
        if "default" in wanted:  # --probes default,sock_io: the default set and an opt-in probe
            at = wanted.index("default")
            wanted[at:at + 1] = [n for n in probemod.DEFAULT_PROBES if n not in wanted]
        for name in wanted:
            if name not in probemod.PROBE_NAMES:
                raise UserError(f"unknown probe {name!r}; known: {', '.join(probemod.PROBE_NAMES)}, all, psutil")
        paused = [n for n in wanted if n in NOT_PAUSABLE]
        if self.opts.duty is not None and paused:
            raise UserError(f"--duty: the probe(s) {', '.join(paused)} cannot be paused (they follow each "
                            "thread or process across events); leave them out of --probes")
        return wanted + [r for r in probemod.REQUIRED if r not in wanted]

    def load(self, work) -> None:
        """Compile and attach the probes and build one drainer per loaded probe."""
        bcc = import_bcc()
        wanted = self._wanted(probemod)
        loaded = probemod.start_load(bcc.BPF, wanted)  # compiles in a child process from here
        # Work that needs no probes, done while they compile (the command waits for the compile).

        try:
            classifier = Classifier(extra=self.opts.rules)
            warm_kernel_symbols(bcc.BPF)
        finally:
            bpf, used, unavailable = loaded()  # waited for even when the rules fail: the child is reaped
        for name in probemod.PROBE_NAMES:
            # A per-event probe left out by default is no loss: its counters come from /proc.
            if name not in wanted and (self.opts.probes or name not in probemod.PER_EVENT):
                unavailable.setdefault(name, "not selected (--probes)")
        if bpf is None or any(r not in used for r in probemod.REQUIRED):
            why = "; ".join(f"{k}: {v}" for k, v in unavailable.items() if k in probemod.REQUIRED)
            raise UserError(f"cannot load the core probes ({why}); run: dpuprof doctor")
        self.bpf, self.used, self.unavailable = bpf, used, unavailable
        try:
            self._attach_sampler()
        except Exception as err:
            self.close()
            raise UserError(f"cannot attach the cpu-clock sampler ({err}); run: dpuprof doctor") from None
        self.hooks = probemod.hooks(bpf)
        release_freed_memory()  # clang's compile leaves ~100 MB of freed heap behind
        self.tree = TreeDrainer(bpf, os.getpid())
        work.tree_map, work.lost_map, work.gen_map = bpf["tree"], bpf["tree_lost"], bpf["tree_gen"]
        self.work = work
        symbolizer = Symbolizer(bcc.BPF, parent_of=self._parent_of)
        self.samples = SampleDrainer(bpf, symbolizer, classifier, self.opts.python_frames)
        if work.target.system_wide:
            bpf["exec_all"][ct.c_int(0)] = ct.c_uint32(1)  # every process's symbols are resolved
        self.execs = ExecWatcher(bpf["execs"], symbolizer.capture, wake=bpf["exec_wake"]).start()
        self.softirq = SoftirqDrainer(bpf) if "softirq" in used else None
        self.block = BlockDrainer(bpf) if "block_io" in used else None
        self.net = NetDrainer(bpf) if "net_dev" in used else None
        self.sock = SockDrainer(bpf) if "sock_io" in used else None
        self.sock_close = SockCloseDrainer(bpf) if "sock_close" in used else None
        self.lost = LostDrainer(bpf, used)
        self.cost = ProbeCost(bpf)  # BPF run-time statistics, on for one interval in ProbeCost.every
        if "uprobes" in used:
            self.uprobes = uprobes.start(bpf, os.getpid(), codecs=self.opts.codec_uprobes)
            work.also_seed.append((bpf["wl"], 1))  # attached trees are uprobe members too
            self.tree.also.append(bpf["wl"])  # and exited ones are pruned from it with the tree's

    def _attach_sampler(self) -> None:
        """The cpu-clock perf event on every CPU at ``freq_hz``, running ``on_sample``."""
        self.bpf.attach_perf_event("on_sample", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, self.opts.freq_hz)

    def pause(self) -> None:
        """Detach every probe (the duty cycle's off part: no program runs, so they cost nothing);
        the programs and maps stay loaded with their contents, which the next drain reads."""
        self.bpf.detach_perf_event("on_sample")
        self._detached, self._detaching = attach.detach_events(self.bpf)  # closes still waiting: resume, close

    def resume(self) -> None:
        """Attach what ``pause`` detached, and take every baseline again (``prime``): the next
        interval starts now. The maps that hold when something in flight began (a CPU's last
        switch, a softirq's entry, an IO's issue) are emptied first, so that nothing is charged
        the paused time. UserError (one line) when the kernel refuses an attachment."""
        self._detaching()
        for name in IN_FLIGHT_MAPS:
            try:
                self.bpf[name].clear()
            except KeyError:
                pass  # that probe is not loaded
        try:
            attach.reattach_events(self.bpf, self._detached)
            self._attach_sampler()
        except OSError as err:
            raise UserError(f"cannot attach the probes again after a pause ({err.strerror})") from None
        self.prime()

    def meta(self, command, user) -> dict:
        return {"mode": "bpf", "category_split": True, "sample_freq_hz": self.opts.freq_hz,
                "rules_sha256": self.samples.classifier.digest,
                "probes_used": ["psutil"] + self.used, "probe_cost": self.cost.status,
                "probe_cost_every": self.cost.every,
                **(self.uprobes.meta() if self.uprobes else {}),
                "python_frames": python_frames_status(command, self.opts.python_frames, user)}

    def env_extra(self) -> dict | None:
        """Environment for the command: CPython's perf trampoline, unless --no-python-frames."""
        return PYTHON_ENV if self.opts.python_frames else None

    def prime(self) -> None:
        """Take every cumulative counter's baseline now, so interval 0 starts with the command."""
        self.samples.prime()
        for drainer in (self.softirq, self.block, self.net, self.sock, self.sock_close, self.lost, self.uprobes,
                        self.cost):
            if drainer is not None:
                drainer.drain()
        self.cost.window(self.drains)  # the interval about to start
        self.tree.exits()

    def parents(self) -> dict[int, int] | None:
        return self.tree.parents() if self.bpf is not None else None

    def sched_wait_maps(self):
        return SchedWaitMaps(self.bpf) if "sched_wait" in self.used else None

    def task_iterator(self) -> tasks.TaskIterator | None:
        if "thread_stats" not in self.used or tasks.ITER_FUNC not in self.bpf.iter_links:
            return None
        return tasks.TaskIterator(functools.partial(self.bpf.read_iter, tasks.ITER_FUNC))

    def wait_duty(self, on: int, period: int):
        if "sched_wait" not in self.used or waitduty.HOT not in self.bpf.raw_tracepoints:
            return None  # not loaded, or on plain tracepoints (a kernel without raw ones)
        return waitduty.WaitDuty(self.bpf, on, period)

    def probe_tables(self) -> set[str]:
        """Which of net_io, block_io and sock_io the loaded probes count (the opt-in per-event
        programs); the recorder reads the others from the kernel's counters (IoCounters)."""
        return {t for t, probe in (("net_io", "net_dev"), ("block_io", "block_io"), ("sock_io", "sock_io"))
                if probe in self.used}

    def exits(self) -> dict[int, float]:
        """{pid: on-CPU ns of its whole life} of the processes that ended since the last call
        (proc_tree's exit hook; empty where BTF lacks its offsets)."""
        return self.tree.exits() if self.bpf is not None else {}

    def drain(self, workload, exact_ns, host: HostTimes | None, writer) -> Drained:
        """Drain every map for the interval just ended. ``workload``: its pids (symbols resolved
        in full); ``exact_ns`` {pid: ns}: the workload processes' exact CPU and ``host`` the host's
        times (accounting.py); ``writer``: the uprobe tables look up ids in it."""
        everyone = self.work.target.system_wide
        d = self.samples.drain(self.work.symbolized(workload), () if everyone else exact_ns.keys())
        self.work.add_seen(d["comms"].keys() | exact_ns.keys())  # system-wide only
        rows = cpu_category_rows(d["cpu"], exact_ns, host, 1e9 / self.opts.freq_hz)
        out = Drained(stacks=d["new_stacks"], dropped_stacks=d["dropped_stacks"], comms=d["comms"],
                      main_named=d["main_named"], ran=set(d["comms"]))
        out.samples, out.busy = _sample_totals(rows)
        t = out.tables
        t["cpu_category"] = rows
        t["stack_samples"] = [(pid, sid, n) for (pid, sid), n in sorted(d["stacks"].items())]
        t["thread_category"] = [(tid, sub, n) for (tid, sub), n in sorted(d["thread_cpu"].items())]
        if self.softirq:
            t["softirq"] = self.softirq.drain()
        if self.block:
            t["block_io"], t["block_latency"] = self.block.drain()
        if self.net:
            t["net_io"], retrans = self.net.drain()
            t["events"] = [("tcp_retransmit", retrans)] if retrans else []
        if self.sock:
            t["sock_io"] = self.sock.drain()
        if self.sock_close:
            out.closed_sockets = self.sock_close.drain()
            out.sockets_opened = self.sock_close.opened
        infos = prog_infos(self.bpf)  # one read of every program's info for both
        t["lost"] = self.lost.drain(infos)
        t["probe_cost"] = self.cost.drain(infos)
        self.cost.window(self.drains + 1)
        if self.uprobes:  # collectives, codec_calls, markers, lost
            # The live processes read this interval: the libraries are the processes' (threads
            # share them), and each new thread id of the workload cost a /proc status read here
            # (~2 ms a drain beside 4 x 128 threads that start 34 threads a second).
            out.markers = self.uprobes.contribute(t, exact_ns.keys(), writer)
            out.warnings = self.uprobes.take_warnings()
        # Only whole samples count as lost here; a failed stack walk still counts its sample.
        out.lost = sum(n for kind, n in t["lost"] if kind.startswith("samples"))
        self.drains += 1
        if self.drains % PRUNE_EVERY == 0:
            if self.sock is not None:
                self.sock.prune(set(all_pids()))
        return out

    def _parent_of(self, pid: int) -> int | None:
        """The parent tgid of ``pid`` in the tree map (symbols.py: a forked child's maps)."""
        try:
            return self.bpf["tree"][ct.c_uint32(pid)].value
        except (KeyError, TypeError):
            return None

    def close(self) -> None:
        """Detach the probes (idempotent): nothing drains them any more."""
        if self.execs is not None:
            self.execs.stop()
            self.execs = None
        if self.bpf is not None:
            self._detaching()
            self.bpf.close()
            self.bpf = None
        if self.cost is not None:
            self.cost.close()


def _sample_totals(rows: list[CpuRow]) -> tuple[int, Counter]:
    """All samples behind ``rows``, and the busy ones by top-level category."""
    busy: Counter = Counter()
    for row in rows:
        if row.category not in NOT_WORK:
            busy[row.category] += row.samples
    return sum(row.samples for row in rows), busy


def release_freed_memory() -> None:
    """Return freed heap to the OS (glibc keeps it by default), keeping the recorder's RSS low."""
    try:
        ct.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def make_source(opts) -> Source:
    """The source ``opts`` asks for: PsutilSource with ``psutil_only``, BpfSource otherwise."""
    return PsutilSource(opts) if opts.psutil_only else BpfSource(opts)


__all__ = ["Drained", "Source", "BpfSource", "PsutilSource", "make_source", "release_freed_memory"]
