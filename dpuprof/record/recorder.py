"""The recording loop: start probes, run the command (or watch the workload: targets.py), drain
every interval, commit every interval.

Modes: ``bpf`` (default; root and bcc) samples stacks and classifies CPU into categories;
``psutil`` (``--probes psutil``) needs no root and records host and per-process CPU splits only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dpuprof.categories import IDLE, top_level
from dpuprof.errors import UserError
from dpuprof.record import child as childmod
from dpuprof.record.metadata import host_metadata
from dpuprof.record.procfs import namespaces
from dpuprof.record.perfmap import ENV as PYTHON_ENV
from dpuprof.record.perfmap import python_frames_status
from dpuprof.record.status import StatusLine
from dpuprof.record.targets import Target, Workload
from dpuprof.record.telemetry import GpuTelemetry, HostTelemetry, ProcessTelemetry, is_process, process_info
from dpuprof.recording.writer import RecordingWriter


@dataclass
class Options:
    command: list[str]
    output: Path
    freq_hz: int = 99
    interval_s: float = 1.0
    probes: list[str] = field(default_factory=list)  # empty = all bpf probes
    psutil_only: bool = False
    quiet: bool = False
    as_root: bool = False
    term_after_s: float = childmod.TERM_AFTER_S  # stop escalation: SIGTERM this long after a stop request
    kill_after_s: float = childmod.KILL_AFTER_S  # then SIGKILL this long after the SIGTERM
    target: Target | None = None  # what the workload is (None: ``command``); see targets.py
    rules: Path | None = None  # --rules FILE: tried before the built-in rules.toml
    python_frames: bool = True  # CPython >= 3.12's perf trampoline on (record/perfmap.py)
    codec_uprobes: bool = False  # uprobes on cipher/codec calls too (record/uprobes.py CODEC_PREFIXES)
    job_id: str | None = None  # --job-id: meta job.job_id (record/metadata.py job_identity)


class DiskFull(UserError):
    pass


class Recorder:
    def __init__(self, opts: Options):
        self.opts = opts
        self.user = childmod.invoking_user(opts.as_root)
        self.bpf = None
        self.used: list[str] = []
        self.unavailable: dict[str, str] = {}
        self.hooks: dict[str, str] = {}  # probe -> "raw_tracepoint" | "tracepoint" (probes.hooks)
        self.interval = 0
        self.total_samples = 0
        self.cat_totals: Counter = Counter()
        self.known_procs: dict[int, tuple] = {}  # pid -> (ppid, comm, cmdline, in_workload, first, last, ns_pid, cgroup)
        self.dirty_procs: set[int] = set()
        self.process_ok: dict[int, bool] = {}
        self.lost_total = 0
        self.workload_cpu_s = 0.0  # the workload's proc_cpu (user + system) so far, for the status line
        self.uprobes = None  # dpuprof.record.uprobes.UprobeSession (bpf mode)
        self.threads = None  # ThreadRecorder: per-thread tables (threads.py)
        self.work = Workload(opts.target or Target(command=tuple(opts.command)))

    # ------------------------------------------------------------------ set-up
    def _load_bpf(self):
        from dpuprof.record import probes as probemod
        from dpuprof.record.bcc_loader import import_bcc
        from dpuprof.record.classify import Classifier
        from dpuprof.record.drain import (BlockDrainer, LostDrainer, NetDrainer, SampleDrainer,
                                          SockDrainer, SoftirqDrainer, TreeDrainer)
        from dpuprof.record.symbols import Symbolizer

        bcc = import_bcc()
        wanted = self.opts.probes or list(probemod.PROBE_NAMES)
        for name in wanted:
            if name not in probemod.PROBE_NAMES:
                raise UserError(f"unknown probe {name!r}; known: {', '.join(probemod.PROBE_NAMES)}, psutil")
        for name in probemod.REQUIRED:
            if name not in wanted:
                wanted.append(name)
        bpf, used, unavailable = probemod.load(bcc.BPF, wanted)
        for name in probemod.PROBE_NAMES:
            if name not in wanted:
                unavailable.setdefault(name, "not selected (--probes)")
        if bpf is None or any(r not in used for r in probemod.REQUIRED):
            why = "; ".join(f"{k}: {v}" for k, v in unavailable.items() if k in probemod.REQUIRED)
            raise UserError(f"cannot load the core probes ({why}); run: dpuprof doctor")
        try:
            bpf.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                                  fn_name="on_sample", sample_freq=self.opts.freq_hz, cpu=-1)
        except Exception as err:
            raise UserError(f"cannot attach the cpu-clock sampler ({err}); run: dpuprof doctor") from None
        self.bpf, self.used, self.unavailable = bpf, used, unavailable
        self.hooks = probemod.hooks(bpf)
        _release_freed_memory()  # clang's compile leaves ~100 MB of freed heap behind
        self.tree = TreeDrainer(bpf, os.getpid())
        self.work.tree_map, self.work.lost_map = bpf["tree"], bpf["tree_lost"]
        self.samples = SampleDrainer(bpf, Symbolizer(bcc.BPF), Classifier(extra=self.opts.rules), self.opts.python_frames)
        self.softirq = SoftirqDrainer(bpf) if "softirq" in used else None
        self.block = BlockDrainer(bpf) if "block_io" in used else None
        self.net = NetDrainer(bpf) if "net_dev" in used else None
        self.sock = SockDrainer(bpf) if "sock_io" in used else None
        self.lost = LostDrainer(bpf, used)
        if "uprobes" in used:  # uprobes hook (1/3)
            from dpuprof.record import uprobes
            self.uprobes = uprobes.start(bpf, os.getpid(), codecs=self.opts.codec_uprobes)
            self.work.also_seed.append((bpf["wl"], 1))  # attached trees are uprobe members too

    def _check_prerequisites(self):
        if self.opts.psutil_only:
            return
        if os.geteuid() != 0:
            raise UserError("recording with eBPF needs root: run it with sudo "
                            "(sudo dpuprof record -- CMD), or use --probes psutil for a light "
                            "recording without the category split")
        from dpuprof.record.bcc_loader import import_bcc
        import_bcc()
        from dpuprof.record.procfs import in_host_pidns
        if not in_host_pidns():
            raise UserError("dpuprof runs in a PID namespace other than the host's, and the eBPF probes "
                            "report host PIDs: run the container with the host PID namespace "
                            "(docker --pid=host, Kubernetes hostPID: true)")

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Record until the command exits, the --duration window closes, or (no command: -p, -a,
        --cgroup) a stop signal comes or every watched process has exited; return dpuprof's exit
        status (see ``_finish``).

        Stop signals are blocked from the start and taken synchronously (``_wait``). One that is
        pending before the command starts (it came while the probes compiled) stops dpuprof: the
        command is never started, and dpuprof exits 128+N. If it came before the recording file was
        created, no file is written (an existing one is left as it was); in the few milliseconds
        after, the file is a valid empty recording with ``complete`` false and an ``error``.

        If the recording cannot be written (disk full, I/O error), one error line is printed, the
        probes are detached, the file keeps every interval committed so far (``complete`` false),
        and the command runs on to its end; dpuprof then exits with the command's status, or 2 if
        that was 0.
        """
        opts = self.opts
        childmod.block_signals()
        self._check_prerequisites()
        self.work.prepare()
        if not opts.psutil_only:
            self._load_bpf()
        else:
            self.unavailable = {"cpu_sample": "psutil mode (--probes psutil): no category split"}
        sig = childmod.pending_stop()
        if sig is not None:
            return self._stopped_before_start(sig, None)
        host, procs, gpu = HostTelemetry(), ProcessTelemetry(), GpuTelemetry()
        from dpuprof.record.threads import SchedWaitMaps, ThreadRecorder
        self.threads = ThreadRecorder(SchedWaitMaps(self.bpf) if "sched_wait" in self.used else None,
                                      started=None if self.work.target.command else time.time())
        owner = (self.user.uid, self.user.gid) if self.user else None
        meta = host_metadata(opts.job_id) | {
            "command": list(opts.command), "cwd": os.getcwd(),
            "mode": "psutil" if opts.psutil_only else "bpf", "category_split": not opts.psutil_only,
            "sample_freq_hz": 0 if opts.psutil_only else opts.freq_hz, "interval_s": opts.interval_s,
            "probes_used": ["psutil"] + self.used, "probes_unavailable": self.unavailable,
            "probe_hooks": self.hooks,
            "recorder_pid": os.getpid(), "user": self.user.name if self.user else None,
            "gpu": gpu.describe(),
            "rules_sha256": None if opts.psutil_only else self.samples.classifier.digest,
            **(self.uprobes.meta() if self.uprobes else {}),  # uprobes hook (2/3)
            "python_frames": "off: --probes psutil samples no stacks" if opts.psutil_only
                             else python_frames_status(opts.command, opts.python_frames, self.user),
        } | self.work.meta()
        writer = RecordingWriter(opts.output, meta, owner)
        status = StatusLine(quiet=opts.quiet)
        self._prime()
        sig = childmod.pending_stop()
        if sig is not None:
            return self._stopped_before_start(sig, writer)
        start = time.time()
        try:
            child = self.work.start(self.user, opts.term_after_s, opts.kill_after_s,
                                    env_extra=PYTHON_ENV if opts.python_frames and not opts.psutil_only else None)
        except UserError:
            writer.close(end_time=time.time(), exit_code=None, complete=True, error="command failed to start")
            raise
        if not self.work.target.command:  # processes that ran before: their CPU counts from now
            procs.sample(self._workload_pids(child))
        recording_ok = self._guard_write(status, lambda: writer.set_meta(start_time=start,
                                                                         root_pid=self.work.root_pid))
        t_prev = start
        end_at = start + opts.target.duration_s if opts.target and opts.target.duration_s else float("inf")
        while True:
            self._wait(child, min(t_prev + opts.interval_s, end_at))
            now = time.time()
            done = child.poll() is not None or now >= end_at
            if recording_ok:
                recording_ok = self._guard_write(
                    status, lambda: self._write_interval(writer, child, host, procs, gpu, t_prev, now))
            t_prev = now
            if recording_ok:
                status.update(now - start, self.total_samples, self.cat_totals, self.lost_total,
                              **({"workload_cpu_s": self.workload_cpu_s, "processes": len(self.work.seen)}
                                 if opts.psutil_only else {}))
            if done:
                break
        status.clear()
        self.t_end = t_prev
        return self._finish(writer, child, start, recording_ok)

    def _finish(self, writer, child, start: float, recording_ok: bool) -> int:
        """Close the recording and the probes. A command still running (the --duration window
        closed) is waited for, signals still forwarded; attached processes are left as they are.
        Returns dpuprof's exit status: the command's, 0 without a command, 2 after a write error."""
        from dpuprof.record.targets import STOP_TEXT, Watched, stop_reason

        opts = self.opts
        rc = child.returncode
        running = child.poll() is None
        reason = stop_reason(child)
        if recording_ok:
            try:
                writer.close(end_time=time.time(), exit_code=rc, stop_reason=reason)
            except sqlite3.Error as err:
                print(f"dpuprof: error: cannot finish {opts.output} ({err})", file=sys.stderr)
                recording_ok = False
        if self.bpf is not None:
            self.bpf.cleanup()
            self.bpf = None
        if not opts.quiet and recording_ok:
            print(f"dpuprof: recorded {self.t_end - start:.1f} s, {self.total_samples} samples -> {opts.output}; "
                  + STOP_TEXT[reason].format(rc=rc), file=sys.stderr)
        if running and not isinstance(child, Watched):
            print(f"dpuprof: the command (pid {child.pid}) keeps running after the --duration window; "
                  "dpuprof waits for it and exits with its status (Ctrl-C is passed to it)", file=sys.stderr)
            while child.poll() is None:
                self._wait(child, time.time() + 1.0)
            rc = child.returncode
        if rc is None:
            rc = 0
        if not recording_ok:
            return 2 if rc == 0 else rc
        return rc

    def _guard_write(self, status, write) -> bool:
        """Run ``write``; on a write error (disk full, I/O error) print one line, detach the probes
        (nothing drains them any more) and return False. The file keeps its committed intervals."""
        try:
            write()
            return True
        except (sqlite3.Error, OSError) as err:
            status.clear()
            kept = f"up to interval {self.interval - 1}" if self.interval else "without intervals"
            print(f"dpuprof: error: cannot write {self.opts.output} ({err}); recording kept {kept}, "
                  "the command keeps running", file=sys.stderr)
            if self.bpf is not None:
                self.bpf.cleanup()
                self.bpf = None
            return False

    def _stopped_before_start(self, sig: int, writer) -> int:
        """A stop signal came before the command started: start nothing, exit 128+N."""
        name = signal.Signals(sig).name
        if writer is not None:
            try:
                writer.close(end_time=time.time(), exit_code=None, complete=False,
                             error=f"stopped by {name} before the command started")
            except sqlite3.Error:
                pass
        if self.bpf is not None:
            self.bpf.cleanup()
        print(f"dpuprof: stopped by {name} before the command started; "
              + ("nothing recorded" if writer is None else f"{self.opts.output} is empty"), file=sys.stderr)
        return 128 + sig

    def _wait(self, child, deadline: float) -> None:
        """Sleep until ``deadline``, acting on signals as they come; return early when the child exits."""
        while True:
            if child.poll() is not None:
                return
            child.check_escalation(time.time())
            left = deadline - time.time()
            if left <= 0:
                return
            info = signal.sigtimedwait(list(childmod.HANDLED), min(left, 0.5))
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            now = time.time()
            if info.si_signo == signal.SIGINT and child.escalation >= 1:
                child.escalate(now)  # a second Ctrl-C: stop harder now
                continue
            if not childmod.from_terminal(info):
                child.send(info.si_signo)
            child.stop_requested_at = now
            child.escalation = max(child.escalation, 1)

    def _prime(self) -> None:
        """Take every cumulative counter's baseline now, so interval 0 starts with the command."""
        if self.bpf is None:
            return
        self.samples.prime()
        for drainer in (self.softirq, self.block, self.net, self.sock, self.lost, self.uprobes):
            if drainer is not None:
                drainer.drain()

    # ------------------------------------------------------------------ per interval
    def _workload_pids(self, child) -> set[int]:
        return self.work.pids(self.tree.parents() if self.bpf is not None else None)

    def _is_process(self, pid: int) -> bool:
        ok = self.process_ok.get(pid)
        if ok is None:
            ok = is_process(pid)
            if ok or not os.path.exists(f"/proc/{pid}"):
                self.process_ok[pid] = ok
        return ok

    def _note_process(self, pid: int, comm: str | None, in_workload: bool, now: float, ppid=None):
        known = self.known_procs.get(pid)
        if known is None:
            info = process_info(pid) if pid > 0 else None
            if info is not None:
                p_ppid, p_comm, cmdline = info
            else:
                p_ppid, p_comm, cmdline = ppid, comm or "", ""
            if not in_workload or not self.work.keep_cmdline():
                cmdline = ""  # other users' command lines stay out of a shareable file
            known = (ppid if ppid is not None else p_ppid, p_comm or comm or "", cmdline, int(in_workload), now, now,
                     *namespaces(pid))
        else:
            known = (*known[:3], max(known[3], int(in_workload)), known[4], now, *known[6:])
        self.known_procs[pid] = known
        self.dirty_procs.add(pid)

    def _exact_times(self, run_ns: dict[int, int], schedstat_s: dict[int, float], workload) -> dict:
        """Exact on-CPU ns per process for this interval.

        A live workload process is charged its /proc per-thread schedstat time (``schedstat_s``:
        what getrusage and top report, including what the scheduler charges a task between its
        wake-up and its switch-in); one that exited within the interval, and every other process,
        its sched_switch time (``run_ns``). What workload processes gain over their sched_switch
        time ran in the idle task's context (the interrupt, the idle exit), so it is taken from
        idle (pid 0) and the host still adds up.
        """
        exact = dict(run_ns)
        extra = 0.0
        for pid, seconds in schedstat_s.items():
            exact[pid] = seconds * 1e9
            extra += exact[pid] - run_ns.get(pid, 0)
        if extra > 0 and exact.get(0):
            exact[0] = max(0.0, exact[0] - extra)
        return exact

    def _write_interval(self, writer, child, host, procs, gpu, t0, t1):
        tables: dict[str, list] = {}
        markers: list[tuple] = []
        workload = self._workload_pids(child)
        parents = self.tree.parents() if self.bpf is not None else {}
        stacks_new = []
        live_workload = [p for p in workload if self._is_process(p)]
        procs.sample(self.work.take_moved_in())  # baselines only: their CPU before joining is not ours
        tables["proc_cpu"] = procs.sample(live_workload)
        self.workload_cpu_s += sum(user + system for _, user, system in tables["proc_cpu"])
        thread_tables, thread_rows = self.threads.interval(t0, t1, workload, procs.thread_stats)
        if self.bpf is not None:
            from dpuprof.record.drain import scale_to_exact

            drained = self.samples.drain(self.work.symbolized(workload))
            self.work.add_seen(drained["comms"].keys() | drained["run_ns"].keys())  # system-wide only
            exact = self._exact_times(drained["run_ns"], procs.last_deltas, workload)
            cpu_ns = scale_to_exact(drained["cpu"], exact, 1e9 / self.opts.freq_hz)
            rows = []
            for (pid, sub), ns in sorted(cpu_ns.items()):
                n = drained["cpu"].get((pid, sub), 0)
                rows.append((pid, top_level(sub), sub, n, ns / 1e9))
                self.total_samples += n
                if sub != IDLE:
                    self.cat_totals[top_level(sub)] += n
            tables["cpu_category"] = rows
            tables["stack_samples"] = [(pid, sid, n) for (pid, sid), n in sorted(drained["stacks"].items())]
            stacks_new = drained["new_stacks"]
            for pid, comm in drained["comms"].items():
                self._note_process(pid, comm, pid in workload, t1, parents.get(pid))
            for pid in drained["run_ns"]:  # ran, never sampled, gone before /proc was read
                if pid > 0 and pid in workload and pid not in self.known_procs:
                    self._note_process(pid, None, True, t1, parents.get(pid))
            if self.softirq:
                tables["softirq"] = self.softirq.drain()
            if self.block:
                tables["block_io"], tables["block_latency"] = self.block.drain()
            if self.net:
                tables["net_io"], retrans = self.net.drain()
                tables["events"] = [("tcp_retransmit", retrans)] if retrans else []
            if self.sock:
                tables["sock_io"] = self.sock.drain()
            tables["thread_category"] = [(tid, sub, n) for (tid, sub), n in sorted(drained["thread_cpu"].items())]
            tables["lost"] = self.lost.drain()
            if self.uprobes:  # uprobes hook (3/3): collectives, codec_calls, markers, lost
                markers = self.uprobes.contribute(tables, workload, writer)
            # Only whole samples count as lost here; a failed stack walk still counts its sample.
            self.lost_total += sum(n for kind, n in tables["lost"] if kind.startswith(("samples", "run")))
            gone = [p for p in drained["comms"] if p > 0 and not os.path.exists(f"/proc/{p}")]
            self.samples.sym.forget(gone)
        for pid in live_workload:
            if pid not in self.known_procs or not self.known_procs[pid][3]:
                self._note_process(pid, None, True, t1, parents.get(pid))
        tables["lost"] = tables.get("lost", []) + thread_tables.pop("lost")
        tables.update(thread_tables)
        tables.update(host.sample())
        tables["gpu"] = gpu.sample()
        processes = [(pid, *self.known_procs[pid]) for pid in sorted(self.dirty_procs)]
        self.dirty_procs.clear()
        writer.write_interval(self.interval, t0, t1, tables, processes=processes, stacks=stacks_new,
                              markers=markers, threads=thread_rows)
        self.interval += 1


def _release_freed_memory() -> None:
    """Return freed heap to the OS (glibc keeps it by default), keeping the recorder's RSS low."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def record(opts: Options) -> int:
    """Record ``opts.target`` (or ``opts.command``); returns the exit status for dpuprof (the
    child's, 128+N if killed; 0 when no command was launched)."""
    return Recorder(opts).run()


__all__ = ["Options", "record"]
