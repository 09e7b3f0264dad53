"""Running the measured commands: a command to completion with its CPU time (wait4) and a sampler of
the recorder's /proc state, `perf record -a -g -F 99` in the background over the same span, BPF
run-time statistics on for a run, and the command lines of each condition."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from dpuprof.recording import load
from dpuprof.recording.summary import summarize as _summarize

from .config import DPUPROF, PERF_RECORD, ROOT

PROG_TYPES = {2: "kprobe", 5: "tracepoint", 7: "perf_event", 17: "raw_tracepoint"}  # enum bpf_prog_type


class RssSampler(threading.Thread):
    """Samples a process (the recorder) until it exits: RSS, peak RSS and the file-backed part from
    /proc/PID/status, its own CPU time (utime + stime, not its children's) from /proc/PID/stat, and
    whether it has a child yet (its command) from /proc/PID/task/PID/children. With ``bpf``, also
    the run time of its BPF programs (/proc/PID/fdinfo, when kernel.bpf_stats_enabled is 1); with
    ``smaps_every``, where its RSS lives (/proc/PID/smaps, by mapping)."""

    def __init__(self, pid: int, period: float = 0.5, bpf: bool = False, smaps_every: float = 0.0):
        super().__init__(daemon=True)
        self.pid, self.period, self.bpf, self.smaps_every = pid, period, bpf, smaps_every
        self.t0 = time.time()
        # (seconds since launch, rss MB, hwm MB, cpu s, has a child, rss file-backed MB)
        self.samples: list[tuple] = []
        self.bpf_first: dict | None = None  # prog stats when the command started
        self.bpf_last: dict = {}             # prog_id -> {"type", "run_time_ns", "run_cnt", "insns"}
        self.bpf_span = (0.0, 0.0)
        self.prog_names: dict[int, str] = {}  # prog_id -> name (bpftool, from the program's BTF)
        self._name_lookups = 0
        self.smaps: list[tuple[str, float]] = []
        self._smaps_at = 0.0
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")
        self._own_cmdline: bytes | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                stat = Path(f"/proc/{self.pid}/stat").read_text()
                children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
            except OSError:
                return
            children = [c for c in children if not self._is_compile_child(c)]
            vals = {}
            for line in status.splitlines():
                if line.startswith(("VmRSS:", "VmHWM:", "RssFile:")):
                    key, val = line.split(":", 1)
                    vals[key] = int(val.split()[0]) / 1024
            fields = stat[stat.rindex(")") + 2:].split()
            if "VmRSS" in vals and fields[0] != "Z":
                now = time.time() - self.t0
                cpu = (int(fields[11]) + int(fields[12])) / self.tick
                self.samples.append((now, vals["VmRSS"], vals.get("VmHWM", 0.0), cpu, bool(children),
                                     vals.get("RssFile", 0.0)))
                if self.bpf and children:
                    progs = self._bpf_progs()
                    if progs:
                        if self.bpf_first is None:
                            self.bpf_first, self.bpf_span = progs, (now, now)
                        self.bpf_last, self.bpf_span = progs, (self.bpf_span[0], now)
                if self.smaps_every and children and now - self._smaps_at >= self.smaps_every:
                    self._smaps_at = now
                    self.smaps = self._read_smaps() or self.smaps
            self.stop.wait(self.period)

    def _is_compile_child(self, child: str) -> bool:
        """The recorder's own forked child that compiles the probes (dpuprof/record/load/compile_child.py:
        a fork without exec, so the recorder's command line) is not the command being recorded."""
        if self._own_cmdline is None:
            try:
                self._own_cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            except OSError:
                return False
        try:
            return Path(f"/proc/{child}/cmdline").read_bytes() == self._own_cmdline
        except OSError:
            return True  # gone already: the compile child lives for seconds, the command longer

    def _bpf_progs(self) -> dict:
        progs = {}
        fd_dir = f"/proc/{self.pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return {}
        for fd in fds:
            try:
                if "bpf-prog" not in os.readlink(f"{fd_dir}/{fd}"):
                    continue
                info = dict(line.split(":", 1) for line in
                            Path(f"/proc/{self.pid}/fdinfo/{fd}").read_text().splitlines() if ":" in line)
                progs[int(info["prog_id"])] = {"type": int(info["prog_type"]),
                                               "run_time_ns": int(info.get("run_time_ns", 0)),
                                               "run_cnt": int(info.get("run_cnt", 0)),
                                               "recursion_misses": int(info.get("recursion_misses", 0)),
                                               "insns": int(info.get("verified_insns", 0))}
            except (OSError, KeyError, ValueError):
                continue
        if set(progs) - set(self.prog_names) and self._name_lookups < 3:
            self._name_lookups += 1  # new programs: name them while they are loaded
            self.prog_names.update(prog_names())
        return progs

    def _read_smaps(self) -> list[tuple[str, float]]:
        agg: dict[str, float] = {}
        cur = "[anon]"
        try:
            with open(f"/proc/{self.pid}/smaps") as fh:
                for line in fh:
                    if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                        parts = line.split(None, 5)
                        cur = os.path.basename(parts[5].strip()) if len(parts) > 5 and parts[5].strip() else "[anon]"
                    elif line.startswith("Rss:"):
                        agg[cur] = agg.get(cur, 0.0) + int(line.split()[1]) / 1024
        except OSError:
            return []
        return sorted(agg.items(), key=lambda kv: -kv[1])[:8]

    def bpf_cost(self) -> dict | None:
        """BPF programs' run time while the command ran: % of one core, runs/s, ns per run, by
        program type (perf_event = the sampler, tracepoint = everything else)."""
        if not self.bpf_first or not self.bpf_last:
            return None
        span = self.bpf_span[1] - self.bpf_span[0]
        if span < 0.5:
            return None
        by_type: dict[str, list] = {}
        for pid, last in self.bpf_last.items():
            first = self.bpf_first.get(pid, {"run_time_ns": 0, "run_cnt": 0})
            t = by_type.setdefault(PROG_TYPES.get(last["type"], str(last["type"])), [0, 0])
            t[0] += last["run_time_ns"] - first["run_time_ns"]
            t[1] += last["run_cnt"] - first["run_cnt"]
        ns = sum(v[0] for v in by_type.values())
        cnt = sum(v[1] for v in by_type.values())
        return {"span_s": span, "programs": len(self.bpf_last), "core_pct": 100 * ns / 1e9 / span,
                "runs_per_s": cnt / span, "ns_per_run": ns / cnt if cnt else None,
                "by_type": {k: {"core_pct": 100 * v[0] / 1e9 / span, "runs_per_s": v[1] / span,
                                "ns_per_run": v[0] / v[1] if v[1] else None} for k, v in by_type.items()}}

    def bpf_programs(self) -> dict[str, dict]:
        """Per program, by the name the recording's ``missed_<program>`` rows use (the part after the
        last ``__``; programs of the same short name summed): ``run_cnt`` (runs since
        kernel.bpf_stats_enabled was turned on, just before the launch, to the last sample),
        ``kernel_misses`` (fdinfo's recursion_misses), ``names`` (the full names) and ``types`` (the
        program types: tracepoint, raw_tracepoint, perf_event, kprobe, which uprobes use). Empty without
        BPF statistics; programs bpftool could not name are left out and counted in ``"?"``."""
        out: dict[str, dict] = {}
        for pid, last in self.bpf_last.items():
            full = self.prog_names.get(pid)
            row = out.setdefault(full.rsplit("__", 1)[-1] if full else "?",
                                 {"run_cnt": 0, "kernel_misses": 0, "names": [], "types": []})
            row["run_cnt"] += last["run_cnt"]
            row["kernel_misses"] += last.get("recursion_misses", 0)
            kind = PROG_TYPES.get(last["type"], str(last["type"]))
            for key, val in (("names", full), ("types", kind)):
                if val and val not in row[key]:
                    row[key].append(val)
        return out

    def _child_ends(self) -> tuple[tuple, tuple] | None:
        """The first and the last sample that saw the command running (None: fewer than two)."""
        with_child = [x for x in self.samples if x[4]]
        return (with_child[0], with_child[-1]) if len(with_child) >= 2 else None

    def child_span_s(self) -> float | None:
        """Seconds from the first to the last sample that saw the command running."""
        ends = self._child_ends()
        return ends[1][0] - ends[0][0] if ends else None

    def cpu_pct_while_child(self) -> float | None:
        """The process's own CPU as % of one core while its command ran (start-up excluded)."""
        ends = self._child_ends()
        if ends is None or ends[1][0] - ends[0][0] < 0.5:
            return None
        a, b = ends
        return 100 * (b[3] - a[3]) / (b[0] - a[0])

    def cpu_before_child(self) -> float:
        """The process's own CPU time when its command started (the probes' compile, say)."""
        first = next((x for x in self.samples if x[4]), None)
        return first[3] if first else (self.samples[-1][3] if self.samples else 0.0)

    @property
    def cpu_s(self) -> float:
        """The process's own CPU seconds at the last sample."""
        return self.samples[-1][3] if self.samples else 0.0


def prog_names() -> dict[int, str]:
    """{prog_id: name} of every loaded BPF program, from ``bpftool --json prog show`` (the full name
    from the program's BTF where it has one, else the kernel's 15-character name); {} without
    bpftool."""
    try:
        out = subprocess.run(["bpftool", "--json", "prog", "show"], capture_output=True, text=True, timeout=30)
        return {int(p["id"]): p["name"] for p in json.loads(out.stdout or "[]") if "name" in p}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return {}


def stat_cpu(text: str, tick: int) -> tuple[float, float]:
    """From the text of /proc/PID/stat: the process's own CPU seconds (utime + stime, all its
    threads) and those of the children it reaped (cutime + cstime)."""
    fields = text[text.rindex(")") + 2:].split()  # fields[0] is the state, field 3 of stat(5)
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def run_cmd(cmd: list[str], timeout: float = 900, rss: bool = False, period: float = 0.5,
            bpf: bool = False, smaps_every: float = 0.0, cwd: Path | str = ROOT, exit_stat: bool = False,
            **kw) -> tuple[subprocess.CompletedProcess, RssSampler | None]:
    """Run ``cmd`` to completion. The result also carries ``cpu_s``: the CPU time of the command and
    every descendant it reaped (``wait4``), e.g. a recorder plus its whole workload. With
    ``exit_stat``, also ``own_cpu_s`` and ``reaped_cpu_s`` (stat_cpu): /proc/PID/stat read once the
    command has exited but before it is reaped (waitid WNOWAIT), so the launched process's own CPU
    (a recorder's, complete up to its last instruction) apart from its children's (the workload it
    forked); both None where that read failed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, **kw)
    sampler = None
    if rss:
        sampler = RssSampler(proc.pid, period, bpf=bpf, smaps_every=smaps_every)
        sampler.start()
    chunks: dict[str, str] = {}
    readers = [threading.Thread(target=lambda n=n, f=f: chunks.__setitem__(n, f.read()), daemon=True)
               for n, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    own = None
    if exit_stat:
        with contextlib.suppress(OSError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: /proc still has it
            own = stat_cpu(Path(f"/proc/{proc.pid}/stat").read_text(), os.sysconf("SC_CLK_TCK"))
    _, status, ru = os.wait4(proc.pid, 0)
    expired = not timer.is_alive()
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    if sampler:
        sampler.stop.set()
        sampler.join()
    if expired:
        raise RuntimeError(f"timed out after {timeout} s: {' '.join(cmd)}")
    res = subprocess.CompletedProcess(cmd, proc.returncode, chunks.get("out", ""), chunks.get("err", ""))
    res.cpu_s = ru.ru_utime + ru.ru_stime
    res.own_cpu_s, res.reaped_cpu_s = own if own else (None, None)
    return res, sampler


@contextlib.contextmanager
def bpf_stats():
    """kernel.bpf_stats_enabled=1 for the duration (it makes the kernel time every BPF program run;
    the previous value is restored)."""
    path = Path("/proc/sys/kernel/bpf_stats_enabled")
    try:
        old = path.read_text().strip()
        path.write_text("1")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            path.write_text(old)


class BackgroundPerf:
    """`perf record -a -g -F 99` over the whole host while something else runs."""

    def __init__(self, path: Path):
        self.path = path
        self.log = open(str(path) + ".log", "w")
        self.proc = subprocess.Popen([*PERF_RECORD, "-o", str(path)], stdout=self.log, stderr=self.log)
        self.t0 = time.time()
        time.sleep(0.5)  # let it open its events on every CPU

    def stop(self) -> float:
        """Stop perf (SIGINT, so it writes its file); return the seconds it ran."""
        wall = time.time() - self.t0
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=300)
        self.log.close()
        return wall


def record_cmd(out: Path, cmd: list[str], probes: str | None = None) -> list[str]:
    """`dpuprof record -q -o OUT [--probes P] -- CMD`, run with this interpreter."""
    extra = ["--probes", probes] if probes else []
    return [*DPUPROF, "record", "-q", "-o", str(out), *extra, "--", *cmd]


def summarize(path: Path) -> dict:
    """dpuprof's summary of the recording at ``path`` (dpuprof.recording.summary.summarize)."""
    return _summarize(load(path))


def condition_cmd(cond: str, cmd: list[str], work: Path) -> list[str]:
    """``cmd`` under a condition: bare, perf (`perf record -a -g -F 99 --`), dpuprof (all probes) or
    ``probes:P,Q`` (dpuprof with those probes); outputs go into ``work``."""
    if cond == "bare":
        return cmd
    if cond == "perf":
        return [*PERF_RECORD, "-q", "-o", str(work / "perf.data"), "--", *cmd]
    if cond == "dpuprof":
        return record_cmd(work / "x.rec", cmd)
    if cond.startswith("probes:"):
        return record_cmd(work / "x.rec", cmd, cond.split(":", 1)[1])
    raise ValueError(cond)

