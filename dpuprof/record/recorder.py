"""The recording loop: start the source (sources.py), run the command (or watch the workload:
targets.py), drain every interval, commit every interval.

Modes: ``bpf`` (default; root and bcc) samples stacks and classifies CPU into categories;
``psutil`` (``--probes psutil``) needs no root and records host and per-process CPU splits only.
The recorder prints nothing: errors go to ``on_error`` as they happen, warnings (a probe that
stopped early) to ``on_warning``, progress to ``status``, and
``run`` returns a ``RunResult`` from which the CLI (cli/record.py) words the outcome and exit status.
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dpuprof.errors import UserError
from dpuprof.record.drain.cost import RecorderCpu
from dpuprof.record.drain.gpu import GpuTelemetry
from dpuprof.record.drain.iocounters import TABLES as COUNTED_TABLES, IoCounters
from dpuprof.record.drain.telemetry import HostTelemetry, ProcessTelemetry
from dpuprof.record.drain.threads import ThreadRecorder
from dpuprof.record.duty import DutyCycle
from dpuprof.record.metadata import host_metadata
from dpuprof.record.sources import Source, make_source
from dpuprof.record.stacks import perfmap
from dpuprof.record.workload import child as childmod
from dpuprof.record.workload.procfs import all_pids, namespaces, process_info
from dpuprof.record.workload.targets import Target, Watched, Workload, stop_reason
from dpuprof.recording.output import check_output
from dpuprof.recording.writer import RecordingWriter, staged_writer

# Every EVICT_EVERY intervals the recorder forgets the processes outside the workload not seen for
# PROC_STALE_S: a host where jobs come and go for weeks would otherwise keep a row per pid it ever
# had (a 4-minute `record -a` beside a loop of short-lived processes held 32,000). System-wide, the
# workload is the live processes and those that just ran (targets.py), so one outside it has
# exited (the recorder itself aside): forgotten at once. One seen again is read from /proc again,
# as a new process, and its row written again.
EVICT_EVERY = 10
PROC_STALE_S = 30.0
# Allocations between two young garbage collections while recording (Python's default: 700).
GC_YOUNG_THRESHOLD = 10_000


def stale_processes(known: dict, workload, before: float) -> list[int]:
    """The pids of ``known`` ({pid: (ppid, comm, cmdline, in_workload, first_seen, last_seen,
    ...)}, times in unix s) that are not in ``workload`` and were last seen before ``before``."""
    return [pid for pid, row in known.items() if pid not in workload and row[5] < before]


@dataclass
class Options:
    command: list[str]
    output: Path
    freq_hz: int = 99
    interval_s: float = 2.0  # record --interval's default (cli/record.py DEFAULT_INTERVAL_S)
    probes: list[str] = field(default_factory=list)  # empty = all bpf probes
    psutil_only: bool = False
    quiet: bool = False
    as_root: bool = False
    term_after_s: float = childmod.TERM_AFTER_S  # stop escalation: SIGTERM this long after a stop request
    kill_after_s: float = childmod.KILL_AFTER_S  # then SIGKILL this long after the SIGTERM
    target: Target | None = None  # what the workload is (None: ``command``); see targets.py
    rules: Path | None = None  # --rules FILE: tried before the built-in rules.toml
    python_frames: bool = True  # CPython >= 3.12's perf trampoline on (record/stacks/perfmap.py)
    codec_uprobes: bool = False  # uprobes on cipher/codec calls too (record/drain/uprobes.py CODEC_PREFIXES)
    job_id: str | None = None  # --job-id: meta job.job_id (record/metadata.py job_identity)
    duty: tuple[float, float] | None = None  # (on_s, period_s): record on_s of every period_s (duty.py)
    wait_duty: tuple[int, int] | None = None  # (on, period) intervals: sched_waking's duty (drain/waitduty.py)


@dataclass
class RunResult:
    """How a recording ended. ``command_rc``: the command's exit status (128+N if killed by
    signal N), None when none was launched or it is still running; ``stop_reason`` a key of
    targets.STOP_TEXT; ``seconds`` recorded; ``samples`` taken; ``write_ok`` False after a write
    error (already reported through ``on_error``); ``stopped_by`` the signal that stopped dpuprof
    before the command started (then ``file_written``: an empty recording exists, only where the
    writer_factory's writers are not staged); ``still_running``
    the command outlived the --duration window (``Recorder.wait_for_command`` waits for it). With a
    duty cycle, ``seconds`` counts the on parts only."""
    output: Path
    command_rc: int | None = None
    stop_reason: str | None = None
    seconds: float = 0.0
    samples: int = 0
    write_ok: bool = True
    stopped_by: int | None = None
    file_written: bool = False
    still_running: bool = False


class Recorder:
    def __init__(self, opts: Options, status=None, on_error: Callable[[str], None] | None = None,
                 writer_factory: Callable[..., RecordingWriter] = staged_writer,
                 on_warning: Callable[[str], None] | None = None):
        """``status``: a StatusLine-like object (update, clear) or None; ``on_error`` takes one
        line per write error, when it happens (the command may run on for hours after);
        ``on_warning`` one line per probe that stopped early (a uprobe detached), when it does;
        ``writer_factory(path, meta, owner)``: what writes the intervals, RecordingWriter's
        interface with ``publish`` and ``discard`` (dpuprof agent passes one that rotates files
        in a directory: dpuprof/agent/rotate.py). Only with the default is ``opts.output``
        checked before the probes load: another factory chooses its own paths."""
        self.opts = opts
        self.writer_factory = writer_factory
        self.status = status
        self.on_error = on_error or (lambda line: None)
        self.on_warning = on_warning or (lambda line: None)
        self.user = childmod.invoking_user(opts.as_root)
        self.source: Source = make_source(opts)
        self.interval = 0
        self.total_samples = 0
        self.cat_totals: Counter = Counter()
        self.known_procs: dict[int, tuple] = {}  # pid -> (ppid, comm, cmdline, in_workload, first, last, ns_pid, cgroup)
        self.dirty_procs: set[int] = set()
        self.process_ok: dict[int, bool] = {}
        self.listed: set[int] | None = None  # /proc's processes, listed once an interval when needed
        self.lost_total = 0
        self.workload_cpu_s = 0.0  # the workload's proc_cpu (user + system) so far, for the status line
        self.threads = None  # ThreadRecorder: per-thread tables (threads.py)
        self.child = None
        self.work = Workload(opts.target or Target(command=tuple(opts.command)))

    # ------------------------------------------------------------------ run
    def run(self) -> RunResult:
        """Record until the command exits, the --duration window closes, or (no command: -p, -a,
        --cgroup) a stop signal comes or every watched process has exited.

        Before anything loads, the command (a typo: exit 127), the -p processes, the cgroup and
        ``opts.output`` (output.check_output) are checked: a UserError, nothing written or renamed.
        The recording has really started once the command has been exec'd (or the workload is
        watched) and its start committed: only then does the staged file take the output's name,
        an existing one becoming ``.old`` (``writer.publish``). A failure or a stop signal before
        that removes the staged file; a ``kill -9`` in those milliseconds leaves it
        (``.NAME.XXXXXXXX.tmp``). Stop signals are blocked from the start and taken synchronously
        (``_wait``): one pending before the command starts (it came while the probes compiled)
        stops dpuprof, the command never started (``stopped_by``) and (default writer) no file.

        If the recording cannot be written (disk full, I/O error), ``on_error`` gets one line, the
        probes are detached, the file keeps every interval committed so far (``complete`` false),
        and the command runs on to its end (``write_ok`` False); with no command (-p, -a, --cgroup,
        the agent) the recording stops there.
        """
        childmod.block_signals()
        self.work.prepare(self.user)
        if self.writer_factory is staged_writer:
            check_output(self.opts.output)
        self.source.check()
        self.source.load(self.work)
        sig = childmod.pending_stop()
        if sig is not None:
            return self._stopped_before_start(sig, None)
        self.host, self.procs, self.gpu = HostTelemetry(), ProcessTelemetry(self.source.task_iterator()), GpuTelemetry()
        self.io = IoCounters(COUNTED_TABLES - self.source.probe_tables(), self._workload_pids())
        self.threads = ThreadRecorder(self.source.sched_wait_maps(),
                                      started=None if self.work.target.command else time.time())
        wd = self.opts.wait_duty
        self.wait_duty = self.source.wait_duty(*wd) if wd else None
        owner = (self.user.uid, self.user.gid) if self.user else None
        writer = self.writer_factory(self.opts.output, self._meta(), owner)
        self.source.prime()
        self.own_cpu = RecorderCpu()  # the recorder's own CPU from here on, per interval
        sig = childmod.pending_stop()
        if sig is not None:
            return self._stopped_before_start(sig, writer)
        return self._record(writer)

    def _meta(self) -> dict:
        opts = self.opts
        return host_metadata(opts.job_id) | {
            "command": list(opts.command), "cwd": os.getcwd(), "interval_s": opts.interval_s,
            "probes_unavailable": self.source.unavailable, "probe_hooks": self.source.hooks,
            "recorder_pid": os.getpid(), "user": self.user.name if self.user else None,
            "gpu": self.gpu.describe(), "io_sources": self.io.sources,
        } | self.source.meta(opts.command, self.user) | self.work.meta() | (
            {"duty": {"on_s": opts.duty[0], "period_s": opts.duty[1]}} if opts.duty else {}) | (
            {"wait_duty": {"on_s": opts.wait_duty[0] * opts.interval_s, "period_s": opts.wait_duty[1] * opts.interval_s}}
            if self.wait_duty is not None else {})

    def _record(self, writer) -> RunResult:
        """Start the command and write one interval per ``interval_s`` until it ends."""
        opts = self.opts
        start = self.started_at = time.time()
        self._children_cpu0 = _children_cpu_s()
        try:
            child = self.child = self.work.start(self.user, opts.term_after_s, opts.kill_after_s,
                                                 env_extra=self.source.env_extra())
        except UserError:  # it vanished since prepare(), or exec failed another way
            writer.discard(end_time=time.time(), exit_code=None, complete=True, error="command failed to start")
            raise
        # The start-up's objects (bcc's, the rules, symbol tables: ~28,000) live as long as the
        # run: kept out of every later collection (30 s of DDP training: its one full collection,
        # 10 ms, gone). The drains' containers mostly die by their reference counts; a young
        # collection every 10,000 allocations, not 700, finds them gone (the young and middle
        # collections 13.4 -> 7.8 and 13.3 -> 9.6 ms in two pairs of such recordings, 2026-12-07).
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        if not self.work.target.command:  # processes that ran before: their CPU counts from now
            self.procs.baseline(self._workload_pids())
        recording_ok = self._guard_write(  # it has started: the file takes its name (run)
            lambda: writer.publish(start_time=start, root_pid=self.work.root_pid), kept="nothing recorded")
        t_prev, self.recorded_s, parts = start, 0.0, 0
        end_at = start + opts.target.duration_s if opts.target and opts.target.duration_s else float("inf")
        duty = DutyCycle(*opts.duty, start=start) if opts.duty else None
        off_at = duty.off_at(start) if duty is not None else float("inf")
        while True:
            self._wait(child, min(t_prev + opts.interval_s, end_at, off_at if recording_ok else end_at))
            pausing = recording_ok and time.time() >= off_at
            if pausing:
                self.source.pause()  # before the clock is read: what the maps hold is this on part's
            now = time.time()
            done = child.poll() is not None or now >= end_at
            if recording_ok:
                recording_ok = self._guard_write(lambda: self._write_interval(writer, t_prev, now))
            self.recorded_s += now - t_prev
            t_prev = now
            if recording_ok:
                self._show(now - start)
            if done or not (recording_ok or self.work.target.command):
                break  # nothing more can be recorded, and no command of ours to wait for
            if pausing and recording_ok:
                parts += 1
                t_prev = self._sit_out(child, duty, end_at)
                if t_prev is None:
                    break
                off_at = duty.off_at(t_prev, self.recorded_s, parts)
        if self.status is not None:
            self.status.clear()
        return self._finish(writer, recording_ok)

    def _sit_out(self, child, duty: DutyCycle, end_at: float) -> float | None:
        """The duty cycle's off part, with the probes detached: sleep (acting on signals) until the
        next on part, then attach them again and take every baseline, so the next interval holds
        nothing of the off part. The recorder's own CPU is not re-based: the resume's cost shows
        in the next interval's recorder_cpu. Returns the on part's start (unix s), or None when
        the recording ends first; UserError when the probes cannot be attached again."""
        self._wait(child, min(duty.next_on(time.time()), end_at))
        if child.poll() is not None or time.time() >= end_at:
            return None
        self.source.resume()
        workload = self._workload_pids()
        self.listed = None
        proc = self.procs.sample(self._processes(workload))
        self.threads.rebaseline(workload, proc.thread_stats)
        self.host.sample()
        self.io.sample(workload)
        self.gpu.sample()
        self.source.exits()  # processes that ended in the off part: not in the next interval
        return time.time()

    def _show(self, elapsed_s: float) -> None:
        if self.status is None:
            return
        extra = ({} if self.source.category_split else
                 {"workload_cpu_s": self.workload_cpu_s, "processes": self.work.count})
        self.status.update(elapsed_s, self.total_samples, self.cat_totals, self.lost_total, **extra)

    def _finish(self, writer, recording_ok: bool) -> RunResult:
        """Close the recording and the probes. A command still running (the --duration window
        closed) is left for ``wait_for_command``; attached processes are left as they are."""
        child = self.child
        reason = stop_reason(child)
        if recording_ok:
            check = {}
            if self.work.target.command and reason == "command exited" and not self.opts.duty:
                # The kernel's count of the command tree's CPU (every process reaped by it, wait4):
                # the self-check of the workload's categorised CPU (recording/summary.py).
                check["command_cpu_s"] = round(_children_cpu_s() - self._children_cpu0, 6)
            try:
                writer.close(end_time=time.time(), exit_code=child.returncode, stop_reason=reason, **check)
            except sqlite3.Error as err:
                self.on_error(f"cannot finish {self.opts.output} ({err})")
                recording_ok = False
        self.source.close()
        self.procs.close()
        self._remove_perf_maps()
        return RunResult(self.opts.output, command_rc=child.returncode, stop_reason=reason,
                         seconds=self.recorded_s, samples=self.total_samples, write_ok=recording_ok,
                         still_running=child.poll() is None and not isinstance(child, Watched))

    def wait_for_command(self) -> int | None:
        """Wait for a command that outlived the --duration window, forwarding signals as before;
        return its exit status."""
        while self.child.poll() is None:
            self._wait(self.child, time.time() + 1.0)
        self._remove_perf_maps()
        return self.child.returncode

    def _remove_perf_maps(self) -> None:
        """Remove the /tmp/perf-PID.map files that the command's exited Python processes wrote
        only because the recorder set PYTHONPERFSUPPORT for them: nothing reads them once the
        recording ends. Maps the user asked for (the variable was already set) stay."""
        ours = set(self.source.env_extra() or {}) & set(perfmap.ENV)
        if self.work.target.command and ours and not ours & set(os.environ):
            perfmap.remove_maps(self.work.seen, self.started_at)

    def _guard_write(self, write, kept: str | None = None) -> bool:
        """Run ``write``; on a write error (disk full, I/O error) report one line (``kept``: what
        it says was kept), detach the probes (nothing drains them any more) and return False.
        The file keeps its committed intervals."""
        try:
            write()
            return True
        except (sqlite3.Error, OSError) as err:
            if self.status is not None:
                self.status.clear()
            kept = kept or ("recording kept " + (f"up to interval {self.interval - 1}" if self.interval
                                                 else "without intervals"))
            then = "the command keeps running" if self.work.target.command else "stopping"
            self.on_error(f"cannot write {self.opts.output} ({err}); {kept}, {then}")
            self.source.close()
            return False

    def _stopped_before_start(self, sig: int, writer) -> RunResult:
        """A stop signal came before the command started: start nothing."""
        written = False
        if writer is not None:
            try:
                written = writer.discard(end_time=time.time(), exit_code=None, complete=False,
                                         error=f"stopped by {signal.Signals(sig).name} before the command started")
            except sqlite3.Error:
                written = True  # the close failed after the file was made
        self.source.close()
        return RunResult(self.opts.output, stopped_by=sig, file_written=written)

    def _wait(self, child, deadline: float) -> None:
        """Sleep until ``deadline``, acting on signals as they come; return early when the child exits."""
        while True:
            if child.poll() is not None:
                return
            child.check_escalation(time.time())
            left = deadline - time.time()
            if left <= 0:
                return
            # Our command's SIGCHLD (pending until taken: never missed) ends the wait; an attached
            # job sends none and an escalation has deadlines: poll those (once every 0.5 s was all).
            poll_s = 0.5 if isinstance(child, Watched) or child.stop_requested_at is not None else left
            info = signal.sigtimedwait(list(childmod.HANDLED), min(left, poll_s))
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

    # ------------------------------------------------------------------ per interval
    def _workload_pids(self) -> set[int]:
        return self.work.pids(self.source.parents())

    def _processes(self, workload: set[int]) -> list[int]:
        """The thread-group leaders among ``workload``'s ids (``_is_process``), which hold every
        live thread's: only the ids new since the last call are looked at (a set difference), and
        the ids that left the workload are forgotten, so that one reused later (pids are) is
        looked at anew. (Every id was looked at every interval until 2026-12-07: a workload that
        started 180 threads a second cost 1.1 ms a drain more for every 1,000 it had started.)"""
        for pid in self.process_ok.keys() - workload:
            del self.process_ok[pid]
        for pid in workload - self.process_ok.keys():
            self._is_process(pid)
        return [p for p in workload & self.process_ok.keys() if self.process_ok[p]]

    def _is_process(self, pid: int) -> bool:
        """Whether ``pid`` is a thread-group leader; asked once per id: a live thread that is not
        its group's leader never becomes one under the same id, and the workload's ids include
        every thread's (re-reading /proc/TID/status for each of 512 threads every interval was a
        quarter of the drain's file reads). The new ids of an interval are looked up in one
        listing of /proc, which names thread-group leaders only (reading each one's status file
        took ~20 ms of the first drain beside 4 x 128 threads); an id that has exited is none."""
        ok = self.process_ok.get(pid)
        if ok is None:
            if self.listed is None:
                self.listed = set(all_pids())
            ok = self.process_ok[pid] = pid in self.listed
        return ok

    def _note_process(self, pid: int, comm: str | None, in_workload: bool, now: float, ppid=None,
                      named: bool = False):
        """Adds or refreshes ``pid``'s processes row. ``comm``: the name it was sampled under, or
        None; ``named``: its main thread's, which replaces the name known (/proc's, read when
        first noted, is its parent's between fork and exec: a shell's ``sh`` for an ``openssl``)."""
        known = self.known_procs.get(pid)
        if known is None:
            info = process_info(pid) if pid > 0 else None
            if info is not None:
                p_ppid, p_comm, cmdline = info
            else:
                p_ppid, p_comm, cmdline = ppid, comm or "", ""
            if not in_workload or not self.work.keep_cmdline():
                cmdline = ""  # other users' command lines stay out of a shareable file
            known = (ppid if ppid is not None else p_ppid, (named and comm) or p_comm or comm or "", cmdline,
                     int(in_workload), now, now,
                     *namespaces(pid))
        else:
            known = (known[0], (named and comm) or known[1], known[2], max(known[3], int(in_workload)), known[4],
                     now, *known[6:])
        self.known_procs[pid] = known
        self.dirty_procs.add(pid)

    def _write_interval(self, writer, t0, t1):
        parents = self.source.parents()  # the tree map, read once an interval
        workload = self.work.pids(parents)
        parents = parents or {}
        self.listed = None  # ids new since: listed after the tree was read (none is missed)
        live_workload = self._processes(workload)
        self.procs.baseline(self.work.take_moved_in())  # their CPU before joining is not ours
        # The exits first, then /proc: a process that ends in between is charged next interval.
        exits = self.source.exits()
        self.work.add_seen(exits.keys())  # system-wide only
        proc = self.procs.sample(live_workload, {p: ns for p, ns in exits.items() if p in workload})
        host_tables = self.host.sample()  # the host's times at the same instant as the processes'
        self.workload_cpu_s += sum(user + system for _, user, system in proc.proc_cpu)
        thread_tables, thread_rows = self.threads.interval(
            t0, t1, workload, proc.thread_stats, self.wait_duty is None or self.wait_duty.measures(self.interval),
            proc.threads)
        waits_s = self.wait_duty.covered(t0, t1) if self.wait_duty else None
        got = self.source.drain(workload, proc.exact_ns, self.host.times, writer)
        self.total_samples += got.samples
        self.cat_totals.update(got.busy)
        self.lost_total += got.lost
        for line in got.warnings:
            if self.status is not None:
                self.status.clear()  # the warning on a line of its own, not inside the live line
            self.on_warning(line)
        for pid, comm in got.comms.items():
            self._note_process(pid, comm, pid in workload, t1, parents.get(pid), named=pid in got.main_named)
        for pid in got.ran | exits.keys():  # ran, never sampled, gone before /proc was read
            if pid > 0 and pid in workload and pid not in self.known_procs:
                self._note_process(pid, None, True, t1, parents.get(pid))
        for pid in live_workload:
            if pid not in self.known_procs or not self.known_procs[pid][3]:
                self._note_process(pid, None, True, t1, parents.get(pid))
        tables = {"proc_cpu": proc.proc_cpu, **got.tables}
        tables["lost"] = tables.get("lost", []) + thread_tables.pop("lost")
        tables.update(thread_tables)
        tables.update(host_tables)
        tables.update(self.io.sample(live_workload, got.closed_sockets, got.sockets_opened))  # net_io, events, block_io, sock_io
        tables.update(self.gpu.sample())  # gpu, gpu_process (dpuprof/record/drain/gpu.py)
        tables["recorder_cpu"] = self.own_cpu.sample()
        processes = [(pid, *self.known_procs[pid]) for pid in sorted(self.dirty_procs)]
        self.dirty_procs.clear()
        writer.write_interval(self.interval, t0, t1, tables, processes=processes, stacks=got.stacks,
                              markers=got.markers, threads=thread_rows, waits_s=waits_s)
        self.interval += 1
        if self.wait_duty:
            self.wait_duty.turn(self.interval, live_workload)
        gone = self._evict(workload, t1) if self.interval % EVICT_EVERY == 0 else []
        if gone or got.dropped_stacks:
            writer.forget(processes=gone, stacks=got.dropped_stacks)

    def _evict(self, workload: set[int], now: float) -> list[int]:
        """Forget the processes that left (``stale_processes``) and what is kept per process for
        the ones outside ``workload``; returns the pids forgotten."""
        before = now if self.work.target.kind == "system-wide" else now - PROC_STALE_S
        gone = stale_processes(self.known_procs, workload, before)
        for pid in gone:
            del self.known_procs[pid]
        self.procs.retain(workload)  # (the leader checks follow the workload every drain: _processes)
        return gone


__all__ = ["Options", "Recorder", "RunResult"]


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's reaped children (getrusage RUSAGE_CHILDREN)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
