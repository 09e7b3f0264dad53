#!/usr/bin/env python3
"""dpuprof's benchmark suite: accuracy against ground truth and against perf, overhead, output size,
start-up, memory and report time. One command, as root:

    sudo python3 benchmarks/run.py            # the full suite (about 20-25 minutes)
    sudo python3 benchmarks/run.py --quick    # the CI smoke run (about 2 minutes)

It writes RESULTS.md and results.json into ``--out`` (default: benchmarks/). Every number in
RESULTS.md comes from this run's measurements. Workloads are real tools (iperf3, openssl speed, fio,
pigz, zstd) and examples/train_ddp.py; missing Debian packages are installed with apt-get unless
``--no-install``. Timed comparisons are interleaved (each round runs every condition once, in a
rotated order) and reported as the median of per-round ratios, since the machine may be noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

PYTHON = os.path.realpath(sys.executable)  # the real interpreter, not a pyenv shim
DPUPROF = [PYTHON, "-m", "dpuprof"]
TOGETHER = [PYTHON, str(BENCH / "together.py")]
PERF_RECORD = ["perf", "record", "-a", "-g", "-F", "99"]
TOOLS = {"iperf3": "iperf3", "fio": "fio", "openssl": "openssl", "pigz": "pigz", "zstd": "zstd",
         "perf": "linux-perf"}
CATEGORIES = ("network", "storage", "crypto", "compression", "compute", "kernel_other")
MINIMAL = "cpu_sample,proc_tree"  # always loaded; the other probes are measured on top of these
# Which probe each workload exercises, for the per-probe cost (a probe costs per event it handles).
PROBE_WORKLOAD = {"softirq": "iperf3", "net_dev": "iperf3", "sock_io": "iperf3", "block_io": "fio"}



@dataclass
class Config:
    quick: bool
    acc_reps: int
    acc_alone_s: int
    acc_together_s: int
    acc_alone: bool
    iperf_rounds: int
    iperf_s: int
    fio_rounds: int
    fio_s: int
    ddp_rounds: int
    ddp_s: int
    long_s: int
    startup_reps: int
    report_runs: int
    pigz_mb: int = 256
    ddp_extra: list = field(default_factory=list)


FULL = Config(quick=False, acc_reps=3, acc_alone_s=6, acc_together_s=10, acc_alone=True,
              iperf_rounds=5, iperf_s=4, fio_rounds=4, fio_s=4, ddp_rounds=4, ddp_s=20, long_s=240,
              startup_reps=5, report_runs=5)
QUICK = Config(quick=True, acc_reps=1, acc_alone_s=2, acc_together_s=4, acc_alone=False,
               iperf_rounds=1, iperf_s=1, fio_rounds=1, fio_s=1, ddp_rounds=1, ddp_s=3, long_s=6,
               startup_reps=1, report_runs=1, pigz_mb=64, ddp_extra=["--shards", "4"])


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- set-up
def ensure_tools(install: bool) -> list[str]:
    """Install missing tools with apt-get (root, Debian); return those still missing."""
    missing = [b for b in TOOLS if shutil.which(b) is None]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        pkgs = sorted({TOOLS[b] for b in missing})
        log(f"installing {' '.join(pkgs)} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", *pkgs]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
    return [b for b in TOOLS if shutil.which(b) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_fio_file(path: Path, size: int = 256 << 20) -> None:
    if path.exists() and path.stat().st_size == size:
        return
    log(f"writing {path} ({size >> 20} MiB, for fio's O_DIRECT reads)")
    with open(path, "wb") as fh:
        for _ in range(size >> 20):
            fh.write(os.urandom(1 << 20))
        fh.flush()
        os.fsync(fh.fileno())


def make_text_file(path: Path, size: int = 256 << 20) -> None:
    """Compressible text (random words, about 3:1 with deflate), for pigz."""
    if path.exists() and path.stat().st_size == size:
        return
    log(f"writing {path} ({size >> 20} MiB of text, for pigz)")
    rng = random.Random(7)
    alphabet = "etaoinshrdlcumwfgypbvkjxqz"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 10))) for _ in range(20000)]
    chunk = " ".join(rng.choice(words) for _ in range(800_000)).encode()[: 4 << 20]
    with open(path, "wb") as fh:
        written = 0
        while written < size:
            # Rotate the chunk so no two 32 KiB windows repeat exactly (deflate's window).
            k = rng.randrange(len(chunk))
            piece = (chunk[k:] + chunk[:k])[: size - written]
            fh.write(piece)
            written += len(piece)


def ddp_data(scratch: Path, cfg: Config) -> Path:
    data = scratch / "ddp"
    cmd = [PYTHON, str(ROOT / "examples" / "train_ddp.py"), "--variant", "plain", "--generate-only",
           "--data-dir", str(data), *cfg.ddp_extra]
    log("preparing the DDP shards (reused when present)")
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return data


# ---------------------------------------------------------------------------------------- running
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
        self.smaps: list[tuple[str, float]] = []
        self._smaps_at = 0.0
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                stat = Path(f"/proc/{self.pid}/stat").read_text()
                children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
            except OSError:
                return
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
                                               "insns": int(info.get("verified_insns", 0))}
            except (OSError, KeyError, ValueError):
                continue
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
        types = {5: "tracepoint", 7: "perf_event"}
        by_type: dict[str, list] = {}
        for pid, last in self.bpf_last.items():
            first = self.bpf_first.get(pid, {"run_time_ns": 0, "run_cnt": 0})
            t = by_type.setdefault(types.get(last["type"], str(last["type"])), [0, 0])
            t[0] += last["run_time_ns"] - first["run_time_ns"]
            t[1] += last["run_cnt"] - first["run_cnt"]
        ns = sum(v[0] for v in by_type.values())
        cnt = sum(v[1] for v in by_type.values())
        return {"span_s": span, "programs": len(self.bpf_last), "core_pct": 100 * ns / 1e9 / span,
                "runs_per_s": cnt / span, "ns_per_run": ns / cnt if cnt else None,
                "by_type": {k: {"core_pct": 100 * v[0] / 1e9 / span, "runs_per_s": v[1] / span,
                                "ns_per_run": v[0] / v[1] if v[1] else None} for k, v in by_type.items()}}

    def cpu_pct_while_child(self) -> float | None:
        """The process's own CPU as % of one core while its command ran (start-up excluded)."""
        with_child = [x for x in self.samples if x[4]]
        if len(with_child) < 2 or with_child[-1][0] - with_child[0][0] < 0.5:
            return None
        a, b = with_child[0], with_child[-1]
        return 100 * (b[3] - a[3]) / (b[0] - a[0])

    def cpu_before_child(self) -> float:
        """The process's own CPU time when its command started (the probes' compile, say)."""
        first = next((x for x in self.samples if x[4]), None)
        return first[3] if first else (self.samples[-1][3] if self.samples else 0.0)

    @property
    def cpu_s(self) -> float:
        return self.samples[-1][3] if self.samples else 0.0


def run_cmd(cmd: list[str], timeout: float = 900, rss: bool = False, period: float = 0.5,
            bpf: bool = False, smaps_every: float = 0.0, **kw) -> tuple[subprocess.CompletedProcess, RssSampler | None]:
    """Run ``cmd`` to completion. The result also carries ``cpu_s``: the CPU time of the command and
    every descendant it reaped (``wait4``), e.g. a recorder plus its whole workload."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, **kw)
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
        wall = time.time() - self.t0
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=300)
        self.log.close()
        return wall


def record_cmd(out: Path, cmd: list[str], probes: str | None = None) -> list[str]:
    extra = ["--probes", probes] if probes else []
    return [*DPUPROF, "record", "-q", "-o", str(out), *extra, "--", *cmd]


def summarize(path: Path) -> dict:
    from dpuprof.recording import load
    from dpuprof.recording.summary import summarize as _summarize

    return _summarize(load(path))


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------------------------- 1. accuracy
@dataclass
class Tool:
    name: str
    category: str
    truth: str          # "utime" or "stime": which of the tool's CPU times is its category
    procs: list         # together.py tool specs
    why: str


def accuracy_tools(T: int, port: int, scratch: Path) -> list[Tool]:
    fio = ["fio", "--name=randread", f"--filename={scratch / 'fio.dat'}", "--rw=randread", "--bs=4k",
           "--direct=1", "--ioengine=psync", "--size=256M", "--time_based", f"--runtime={T}",
           "--thread", "--output-format=json"]
    return [
        Tool("iperf3", "network", "stime",
             [{"name": "iperf3 -s", "cmd": ["iperf3", "-s", "-1", "-p", str(port)]},
              {"name": "iperf3 -c", "cmd": ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(T)],
               "delay_s": 0.5}],
             "loopback TCP: its kernel time is the socket send/receive path"),
        Tool("openssl", "crypto", "utime",
             [{"name": "openssl speed", "cmd": ["openssl", "speed", "-evp", "aes-256-gcm", "-seconds", str(T),
                                                 "-bytes", "16384"]}],
             "AES-256-GCM in libcrypto: its user time is the cipher"),
        Tool("fio", "storage", "stime", [{"name": "fio", "cmd": fio}],
             "4 KiB O_DIRECT random reads (psync): its kernel time is the read path down to the device"),
        Tool("pigz", "compression", "utime",
             [{"name": "pigz", "cmd": ["pigz", "-p", "1", "-6", "-c", str(_pigz_input(scratch))],
               "stop_after_s": T, "stdout": "null"}],
             "deflate in libz.so.1 (dynamically linked): its user time is compression"),
        Tool("zstd", "compression", "utime",
             [{"name": "zstd -b", "cmd": ["zstd", "-b3", f"-i{max(1, T // 2)}"]}],
             "zstd's in-memory benchmark (compress, then decompress): its user time is compression"),
    ]


def _pigz_input(scratch: Path) -> Path:
    """The largest pigz input present (the full suite writes 256 MiB, --quick 64 MiB)."""
    files = sorted(scratch.glob("pigz-*M.txt"), key=lambda p: p.stat().st_size)
    return files[-1] if files else scratch / "pigz-256M.txt"


def _tool_pids(summary: dict, roots: set[int]) -> set[int]:
    parent = {p["pid"]: p["ppid"] for p in summary["processes"]}
    out = set()
    for pid in parent:
        seen, p = set(), pid
        while p is not None and p not in seen:
            if p in roots:
                out.add(pid)
                break
            seen.add(p)
            p = parent.get(p)
    return out | roots


def outside_category(rec: Path, pids: set[int], category: str, top: int = 3) -> list[dict]:
    """Where a tool's samples outside its own category went: grouped by the frame whose rule
    decided them, with whether a frame of the tool's category sat further up the same stack (the
    leaf-most-rule principle then hid it). Shares are of the tool's samples."""
    from dpuprof.categories import top_level
    from dpuprof.record.classify import Classifier, split_folded
    from dpuprof.recording import load

    r = load(rec)
    ss = r.table("stack_samples")
    ss = ss[ss["pid"].isin(pids)].groupby("stack_id")["samples"].sum()
    stacks = r.table("stacks").set_index("stack_id")
    total = float(ss.sum()) or 1.0
    c = Classifier()
    groups: dict[tuple, float] = {}
    for sid, n in ss.items():
        if stacks.loc[sid, "category"] == category:
            continue
        kframes, uframes = split_folded(stacks.loc[sid, "folded"])
        frames = [(f, c._kernel) for f in reversed(kframes)] if kframes else [(f, c._user) for f in reversed(uframes)]
        decider, under = _unmatched(kframes, uframes), False
        for i, (f, match) in enumerate(frames):
            if match(f) is not None:
                decider = f
                under = any((m := match(g)) is not None and top_level(m) == category for g, _ in frames[i + 1:])
                break
        key = (stacks.loc[sid, "subcategory"], decider, under)
        groups[key] = groups.get(key, 0.0) + float(n)
    rows = [{"subcategory": k[0], "frame": k[1], "under_own_category": k[2], "share": v / total}
            for k, v in sorted(groups.items(), key=lambda kv: -kv[1])]
    under = [x for x in rows if x["under_own_category"]]
    return {"top": rows[:top], "outside_share": sum(x["share"] for x in rows),
            "under_own_share": sum(x["share"] for x in under), "under_top": under[:top]}


def _unmatched(kframes: list[str], uframes: list[str]) -> str:
    """A name for a stack no rule matched: its system call, else its leaf frame."""
    for f in kframes:
        if f.startswith(("__x64_sys_", "__ia32_sys_")):
            return f"no rule; in {f}"
    leaf = (kframes or uframes or ["?"])[-1]
    return f"no rule; leaf {leaf}"


def accuracy_run(kind: str, tools: list[Tool], T: int, scratch: Path, rep: int) -> list[dict]:
    """One `dpuprof record` of ``tools`` started together, with `perf record -a -g` on the same run."""
    from perfclass import classify_perf

    work = Path(tempfile.mkdtemp(prefix="acc-", dir=scratch))
    spec = {"tools": []}
    for tool in tools:
        for p in tool.procs:
            spec["tools"].append(dict(p, tool=tool.name))
    # Servers first, clients (with a delay) last.
    spec["tools"].sort(key=lambda p: p.get("delay_s", 0))
    (work / "spec.json").write_text(json.dumps(spec))
    rec, perf_data = work / "acc.rec", work / "perf.data"
    cmd = record_cmd(rec, [*TOGETHER, str(work / "spec.json"), str(work / "truth.json")])
    perf = BackgroundPerf(perf_data)
    try:
        res, _ = run_cmd(cmd, timeout=120 + 4 * T)
    finally:
        perf.stop()
    if res.returncode != 0:
        raise RuntimeError(f"accuracy run failed ({res.returncode}): {res.stderr[-500:]}")
    truth = json.loads((work / "truth.json").read_text())["tools"]
    summary = summarize(rec)
    per_pid_perf = classify_perf(str(perf_data))
    by_name = {p["name"]: p["tool"] for p in spec["tools"]}
    rows = []
    for tool in tools:
        mine = [t for t in truth if by_name[t["name"]] == tool.name]
        pids = _tool_pids(summary, {t["pid"] for t in mine})
        procs = [p for p in summary["processes"] if p["pid"] in pids]
        dp_cat = {c: sum(p["by_category"][c] for p in procs) for c in CATEGORIES}
        dp_total = sum(dp_cat.values())
        perf_cat = {c: sum(per_pid_perf.get(pid, {}).get(c, 0) for pid in pids) for c in CATEGORIES}
        perf_n = sum(perf_cat.values())
        utime, stime = sum(t["utime_s"] for t in mine), sum(t["stime_s"] for t in mine)
        gt_cpu, gt_cat = utime + stime, (utime if tool.truth == "utime" else stime)
        dp_share = {c: dp_cat[c] / dp_total if dp_total else 0.0 for c in CATEGORIES}
        perf_share = {c: perf_cat[c] / perf_n if perf_n else 0.0 for c in CATEGORIES}
        diffs = {c: 100 * (dp_share[c] - perf_share[c]) for c in CATEGORIES}
        worst = max(CATEGORIES, key=lambda c: abs(diffs[c]))
        rows.append({
            "kind": kind, "rep": rep, "tool": tool.name, "category": tool.category, "truth": tool.truth,
            "pids": sorted(pids), "rc": [t["rc"] for t in mine],
            "utime_s": utime, "stime_s": stime, "gt_cpu_s": gt_cpu, "gt_cat_s": gt_cat,
            "dp_total_s": dp_total, "dp_cat_s": dp_cat[tool.category], "dp_by_category": dp_cat,
            "ratio_cat": dp_cat[tool.category] / gt_cat if gt_cat else None,
            "ratio_total": dp_total / gt_cpu if gt_cpu else None,
            "dp_share": dp_share, "perf_share": perf_share, "perf_samples": perf_n,
            "gt_share": gt_cat / gt_cpu if gt_cpu else None,
            "pp_vs_perf": abs(diffs[worst]), "pp_vs_perf_category": worst,
            "pp_cat_vs_perf": diffs[tool.category],
            "outside": outside_category(rec, pids, tool.category),
        })
    shutil.rmtree(work, ignore_errors=True)
    return rows


def bench_accuracy(cfg: Config, scratch: Path) -> dict:
    runs = []
    for rep in range(cfg.acc_reps):
        if cfg.acc_alone:
            for tool in accuracy_tools(cfg.acc_alone_s, free_port(), scratch):
                log(f"accuracy: {tool.name} alone (rep {rep + 1}/{cfg.acc_reps})")
                runs += accuracy_run("alone", [tool], cfg.acc_alone_s, scratch, rep)
        log(f"accuracy: all tools at once (rep {rep + 1}/{cfg.acc_reps})")
        runs += accuracy_run("together", accuracy_tools(cfg.acc_together_s, free_port(), scratch),
                             cfg.acc_together_s, scratch, rep)
    return {"runs": runs, "table": accuracy_table(runs, accuracy_tools(1, 0, scratch))}


def accuracy_table(runs: list[dict], tools: list[Tool]) -> list[dict]:
    """Per (run kind, tool): the repetitions pooled (seconds and samples summed, as one longer run),
    which is less noisy than a median of short runs; the per-repetition values stay in ``runs``."""
    table = []
    for kind in ("alone", "together"):
        for tool in tools:
            rs = [r for r in runs if r["kind"] == kind and r["tool"] == tool.name]
            if not rs:
                continue
            dp = {c: sum(r["dp_by_category"][c] for r in rs) for c in CATEGORIES}
            pc = {c: sum(r["perf_share"][c] * r["perf_samples"] for r in rs) for c in CATEGORIES}
            dp_total, perf_n = sum(dp.values()), sum(pc.values())
            gt_cpu, gt_cat = sum(r["gt_cpu_s"] for r in rs), sum(r["gt_cat_s"] for r in rs)
            dp_share = {c: dp[c] / dp_total if dp_total else 0.0 for c in CATEGORIES}
            perf_share = {c: pc[c] / perf_n if perf_n else 0.0 for c in CATEGORIES}
            diffs = {c: 100 * (dp_share[c] - perf_share[c]) for c in CATEGORIES}
            worst = max(CATEGORIES, key=lambda c: abs(diffs[c]))
            typical = sorted(rs, key=lambda r: r["ratio_cat"] or 0)[len(rs) // 2]
            table.append({
                "kind": kind, "tool": tool.name, "category": tool.category, "truth": tool.truth,
                "why": tool.why, "reps": len(rs),
                "gt_cpu_s": gt_cpu, "gt_cat_s": gt_cat, "dp_cat_s": dp[tool.category], "dp_total_s": dp_total,
                "ratio_cat": dp[tool.category] / gt_cat if gt_cat else None,
                "ratio_total": dp_total / gt_cpu if gt_cpu else None,
                "ratio_cat_range": [min(r["ratio_cat"] or 0 for r in rs), max(r["ratio_cat"] or 0 for r in rs)],
                "gt_share": gt_cat / gt_cpu if gt_cpu else None,
                "dp_share_cat": dp_share[tool.category], "perf_share_cat": perf_share[tool.category],
                "pp_vs_perf": abs(diffs[worst]), "pp_vs_perf_category": worst, "perf_samples": perf_n,
                "dp_share": dp_share, "perf_share": perf_share,
                "outside": typical["outside"],  # the repetition with the median ratio
            })
    return table


# ---------------------------------------------------------------------------------------- 2. overhead
@dataclass
class Workload:
    name: str
    unit: str
    make: callable      # (work dir) -> (cmd, parse(stdout) -> (metric, units of work done))
    work_unit: str = ""


def iperf3_pinning() -> tuple[list[str], list[str]]:
    """Server on the last CPU, client on the first (iperf3 -A): where the scheduler puts the two
    matters more to loopback throughput than anything measured here, so it is fixed."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return [], []
    return ["-A", str(cpus[-1])], ["-A", str(cpus[0])]


def iperf3_workload(seconds: int) -> Workload:
    def make(work: Path):
        port = free_port()
        pin_s, pin_c = iperf3_pinning()
        spec = {"tools": [{"name": "server", "cmd": ["iperf3", "-s", "-1", "-p", str(port), *pin_s]},
                          {"name": "client", "cmd": ["iperf3", "-c", "127.0.0.1", "-p", str(port), *pin_c, "-J",
                                                     "-O", "1", "-t", str(seconds + 1)], "delay_s": 0.5}]}
        (work / "spec.json").write_text(json.dumps(spec))

        def parse(_stdout: str) -> tuple[float, float]:
            tools = json.loads((work / "truth.json").read_text())["tools"]
            client = json.loads(next(t for t in tools if t["name"] == "client")["stdout"])
            gbytes = sum(i["sum"]["bytes"] for i in client["intervals"]) / 1e9  # omitted second included
            return client["end"]["sum_received"]["bits_per_second"] / 1e9, gbytes
        return [*TOGETHER, str(work / "spec.json"), str(work / "truth.json")], parse
    return Workload("iperf3", "Gbit/s", make, "GB")


def fio_workload(seconds: int, scratch: Path) -> Workload:
    def make(work: Path):
        cmd = ["fio", "--name=randread", f"--filename={scratch / 'fio.dat'}", "--rw=randread", "--bs=4k",
               "--direct=1", "--ioengine=psync", "--size=256M", "--time_based", f"--runtime={seconds}",
               "--thread", "--output-format=json"]

        def parse(stdout: str) -> tuple[float, float]:
            read = json.loads(stdout[stdout.index("{"):])["jobs"][0]["read"]
            return read["iops"] / 1e3, read["total_ios"] / 1e3
        return cmd, parse
    return Workload("fio", "kIOPS", make, "k IOs")


def ddp_workload(seconds: int, data: Path, cfg: Config) -> Workload:
    def make(_work: Path):
        cmd = [PYTHON, str(ROOT / "examples" / "train_ddp.py"), "--variant", "plain", "--duration",
               str(seconds), "--data-dir", str(data), "--json", *cfg.ddp_extra]

        def parse(stdout: str) -> tuple[float, float]:
            line = json.loads([ln for ln in stdout.splitlines() if ln.strip().startswith("{")][-1])
            return float(line["steps_per_s"]), float(line["steps"])
        return cmd, parse
    return Workload("ddp", "steps/s", make, "steps")


def condition_cmd(cond: str, cmd: list[str], work: Path) -> list[str]:
    if cond == "bare":
        return cmd
    if cond == "perf":
        return [*PERF_RECORD, "-q", "-o", str(work / "perf.data"), "--", *cmd]
    if cond == "dpuprof":
        return record_cmd(work / "x.rec", cmd)
    if cond.startswith("probes:"):
        return record_cmd(work / "x.rec", cmd, cond.split(":", 1)[1])
    raise ValueError(cond)


def interleaved(workload: Workload, conditions: list[str], rounds: int, scratch: Path) -> dict:
    """Each round runs every condition once, the order rotated by one each round; per-round ratios
    against the same round's bare run; medians over rounds."""
    metrics = {c: [] for c in conditions}
    costs = {c: [] for c in conditions}  # CPU s per unit of work, workload and profiler together
    recorder_cpu = {c: [] for c in conditions}  # the recorder's own CPU, % of one core
    for r in range(rounds):
        order = conditions[r % len(conditions):] + conditions[:r % len(conditions)]
        for cond in order:
            work = Path(tempfile.mkdtemp(prefix=f"{workload.name}-", dir=scratch))
            cmd, parse = workload.make(work)
            res, sampler = run_cmd(condition_cmd(cond, cmd, work), timeout=600, rss=cond != "bare", period=0.25)
            if res.returncode != 0:
                raise RuntimeError(f"{workload.name} under {cond} failed ({res.returncode}): {res.stderr[-600:]}")
            value, units = parse(res.stdout)
            metrics[cond].append(value)
            # wait4 CPU of the launched process and all it reaped: the workload, plus the profiler
            # when there is one, less the profiler's start-up (compiling probes happens once).
            cpu = res.cpu_s - (sampler.cpu_before_child() if sampler is not None else 0.0)
            costs[cond].append(cpu / units if units else None)
            if sampler is not None:
                recorder_cpu[cond].append(sampler.cpu_pct_while_child())
            log(f"overhead {workload.name} round {r + 1}/{rounds}: {cond}: {value:.3f} {workload.unit}")
            shutil.rmtree(work, ignore_errors=True)
    out = {"workload": workload.name, "unit": workload.unit, "rounds": rounds, "conditions": {}}
    for cond in conditions:
        ratios = [v / b for v, b in zip(metrics[cond], metrics["bare"])]
        out["conditions"][cond] = {
            "values": metrics[cond], "median": median(metrics[cond]),
            "ratio_median": median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "slowdown_pct": 100 * (1 - median(ratios)),
            "recorder_cpu_pct": median(recorder_cpu[cond]),
            "cpu_per_unit": median(costs[cond]), "work_unit": workload.work_unit,
            "cpu_cost_pct": _cost_pct(costs[cond], costs["bare"]),
        }
    minimal = f"probes:{MINIMAL}"
    if minimal in metrics:
        for cond in conditions:
            if cond.startswith(f"probes:{MINIMAL},"):
                inc = [v / m for v, m in zip(metrics[cond], metrics[minimal])]
                out["conditions"][cond]["incremental_pct"] = 100 * (1 - median(inc))
    return out


def _cost_pct(cost: list, bare: list) -> float | None:
    """Median over rounds of the extra CPU per unit of work against the same round's bare run, %."""
    ratios = [c / b for c, b in zip(cost, bare) if c and b]
    return 100 * (median(ratios) - 1) if ratios else None


def bpf_cost_run(workload: Workload, cond: str, scratch: Path) -> dict:
    """One run of ``workload`` under dpuprof (``cond``) with BPF run-time statistics on: what the
    probes cost in the kernel and the recorder in user space, in CPU, independent of other load."""
    work = Path(tempfile.mkdtemp(prefix=f"bpf-{workload.name}-", dir=scratch))
    cmd, parse = workload.make(work)
    with bpf_stats() as enabled:
        res, sampler = run_cmd(condition_cmd(cond, cmd, work), timeout=600, rss=True, period=0.25, bpf=enabled)
    if res.returncode != 0:
        raise RuntimeError(f"{workload.name} under {cond} failed ({res.returncode}): {res.stderr[-600:]}")
    value, units = parse(res.stdout)
    shutil.rmtree(work, ignore_errors=True)
    cost = sampler.bpf_cost() or {}
    rec_pct = sampler.cpu_pct_while_child()
    span = cost.get("span_s")
    out = {"condition": cond, "metric": value, "units": units, "work_unit": workload.work_unit,
           "bpf": cost, "recorder_cpu_pct": rec_pct}
    if cost and rec_pct is not None:
        out["total_core_pct"] = cost["core_pct"] + rec_pct
        out["machine_pct"] = out["total_core_pct"] / (os.cpu_count() or 1)
        # BPF time per unit of work: the whole run's units over the span they were measured in
        out["bpf_us_per_unit"] = cost["core_pct"] / 100 * span * 1e6 / units if units and span else None
    log(f"bpf cost {workload.name} {cond}: BPF {cost.get('core_pct', float('nan')):.2f} % of a core, "
        f"recorder {rec_pct if rec_pct is not None else float('nan'):.2f} %")
    return out


def bench_bpf_cost(cfg: Config, scratch: Path) -> dict:
    minimal = f"probes:{MINIMAL}"
    out = {}
    for wl, workload in (("iperf3", iperf3_workload(cfg.iperf_s)), ("fio", fio_workload(cfg.fio_s, scratch))):
        conds = ["dpuprof", minimal, *(f"{minimal},{p}" for p, w in PROBE_WORKLOAD.items() if w == wl)]
        rows = {c: bpf_cost_run(workload, c, scratch) for c in conds}
        base = rows[minimal].get("bpf", {}).get("core_pct")
        for c, row in rows.items():
            if c.startswith(minimal + ",") and base is not None and row.get("bpf"):
                row["incremental_core_pct"] = row["bpf"]["core_pct"] - base
        out[wl] = rows
    return out


def bench_overhead(cfg: Config, scratch: Path, data: Path) -> dict:
    minimal = f"probes:{MINIMAL}"
    plus = lambda probe: f"probes:{MINIMAL},{probe}"  # noqa: E731
    # Per-probe throughput rounds only in the full suite; --quick measures each probe's CPU below.
    per_probe = (lambda wl: []) if cfg.quick else (  # noqa: E731
        lambda wl: [minimal, *(plus(p) for p, w in PROBE_WORKLOAD.items() if w == wl)])
    iperf_conds = ["bare", "dpuprof", "perf", *per_probe("iperf3")]
    fio_conds = ["bare", "dpuprof", "perf", *per_probe("fio")]
    out = {}
    log("overhead: iperf3 loopback")
    out["iperf3"] = interleaved(iperf3_workload(cfg.iperf_s), iperf_conds, cfg.iperf_rounds, scratch)
    log("overhead: fio 4 KiB O_DIRECT random reads")
    out["fio"] = interleaved(fio_workload(cfg.fio_s, scratch), fio_conds, cfg.fio_rounds, scratch)
    log("overhead: DDP training")
    ddp_conds = ["bare", "dpuprof"] if cfg.quick else ["bare", "dpuprof", "perf"]
    out["ddp"] = interleaved(ddp_workload(cfg.ddp_s, data, cfg), ddp_conds, cfg.ddp_rounds, scratch)
    log("overhead: BPF program run time per probe (kernel.bpf_stats_enabled)")
    out["bpf_cost"] = bench_bpf_cost(cfg, scratch)
    return out


# ---------------------------------------------------------------------------------------- 3+4. size, memory, start-up
def rec_composition(path: Path) -> list[tuple[str, int]]:
    """Bytes per table and index of a recording (SQLite's dbstat), largest first."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
        con.close()
        return [(name, int(size)) for name, size in rows]
    except sqlite3.Error:
        return []


def bench_long(cfg: Config, scratch: Path, data: Path) -> dict:
    """One run under `dpuprof record` (defaults) with `perf record -a -g -F 99` over the same time:
    the recorder's RSS and CPU over time, and both output sizes per minute. DDP training in the full
    suite; iperf3 in --quick (a smoke run has no time for the training's start-up)."""
    work = Path(tempfile.mkdtemp(prefix="long-", dir=scratch))
    rec, perf_data = work / "long.rec", work / "perf.data"
    if cfg.quick:
        workload = iperf3_workload(cfg.long_s)
    else:
        workload = ddp_workload(cfg.long_s, data, cfg)
    cmd, parse = workload.make(work)
    log(f"long run: {workload.name} for {cfg.long_s} s under dpuprof record and perf record -a -g together")
    perf = BackgroundPerf(perf_data)
    t0 = time.time()
    try:
        with bpf_stats() as enabled:
            res, sampler = run_cmd(record_cmd(rec, cmd), timeout=cfg.long_s + 600, rss=True, bpf=enabled,
                                   smaps_every=30.0)
    finally:
        dp_wall = time.time() - t0
        perf_wall = perf.stop()
    if res.returncode != 0:
        raise RuntimeError(f"long run failed ({res.returncode}): {res.stderr[-600:]}")
    rec_bytes = sum(p.stat().st_size for p in work.glob("long.rec*"))
    perf_bytes = perf_data.stat().st_size
    summary = summarize(rec)
    composition = rec_composition(rec)
    from dpuprof.recording import load

    loaded = load(rec)
    n_stacks = len(loaded.table("stacks"))
    cat_rows = loaded.table("cpu_category")
    wl_pids = set(loaded.workload_pids)
    rows_info = {"cpu_category_rows": len(cat_rows),
                 "cpu_category_rows_workload": int(cat_rows["pid"].isin(wl_pids).sum()),
                 "stack_samples_rows": len(loaded.table("stack_samples")),
                 "intervals": len(loaded.table("intervals")),
                 "processes_seen": len(loaded.table("processes")), "workload_processes": len(wl_pids)}
    s = sampler.samples
    peak_hwm = max(x[2] for x in s)
    steady = [x for x in s if x[4]] or s  # while the command ran (after the probes compiled)
    rss_max = max(x[1] for x in steady)
    # Growth over the second half of the command's run, extrapolated linearly to 10 minutes.
    half = [x for x in steady if x[0] >= (steady[0][0] + steady[-1][0]) / 2]
    slope = 0.0
    if len(half) >= 4 and half[-1][0] - half[0][0] > 1:
        n = len(half)
        mt, mr = sum(x[0] for x in half) / n, sum(x[1] for x in half) / n
        den = sum((x[0] - mt) ** 2 for x in half)
        slope = sum((x[0] - mt) * (x[1] - mr) for x in half) / den * 60 if den else 0.0  # MB/min
    elapsed_min = s[-1][0] / 60
    extrap = max(peak_hwm, rss_max, steady[-1][1] + max(0.0, slope) * max(0.0, 10 - elapsed_min))
    cpu_half = None
    if len(half) >= 2 and half[-1][0] - half[0][0] > 1:
        cpu_half = 100 * (half[-1][3] - half[0][3]) / (half[-1][0] - half[0][0])
    metric, _units = parse(res.stdout)
    shutil.rmtree(work, ignore_errors=True)
    step = max(1, len(s) // 24)
    return {
        "workload": workload.name, "metric": metric, "unit": workload.unit,
        "duration_s": dp_wall, "perf_duration_s": perf_wall,
        "rec_bytes": rec_bytes, "perf_bytes": perf_bytes,
        "rec_mb_per_min": rec_bytes / 1e6 / (dp_wall / 60), "perf_mb_per_min": perf_bytes / 1e6 / (perf_wall / 60),
        "size_ratio": (perf_bytes / perf_wall) / (rec_bytes / dp_wall),
        "rec_composition": composition[:6], "stacks": n_stacks, "rows": rows_info,
        "lost_samples": summary["lost_samples"],
        "rss_peak_hwm_mb": peak_hwm, "rss_steady_max_mb": rss_max, "rss_slope_mb_per_min": slope,
        "rss_10min_estimate_mb": extrap, "recorder_cpu_pct": sampler.cpu_pct_while_child(),
        "recorder_cpu_pct_second_half": cpu_half, "bpf": sampler.bpf_cost(),
        "rss_file_mb_last": s[-1][5], "smaps_top": [(name, round(mb, 1)) for name, mb in sampler.smaps],
        "rss_series": [(round(x[0], 1), round(x[1], 1)) for x in s[::step]] + [(round(s[-1][0], 1), round(s[-1][1], 1))],
    }


def bench_startup(cfg: Config, scratch: Path) -> dict:
    """Time from launching `dpuprof record -- date +%s.%N` to the moment `date` runs (it prints the
    time at its exec), against the same for a bare `date` and for `perf record -a -g`."""
    work = Path(tempfile.mkdtemp(prefix="startup-", dir=scratch))
    child = ["date", "+%s.%N"]
    conds = {"bare": child, "dpuprof": record_cmd(work / "s.rec", child),
             "perf": [*PERF_RECORD, "-q", "-o", str(work / "perf.data"), "--", *child]}
    times = {c: [] for c in conds}
    for r in range(cfg.startup_reps):
        for cond, cmd in conds.items():
            t0 = time.time()
            res, _ = run_cmd(cmd, timeout=120)
            if res.returncode != 0:
                raise RuntimeError(f"start-up run under {cond} failed: {res.stderr[-400:]}")
            times[cond].append(float(res.stdout.strip().splitlines()[-1]) - t0)
    shutil.rmtree(work, ignore_errors=True)
    log("start-up: " + ", ".join(f"{c} {median(v):.3f} s" for c, v in times.items()))
    out = {c: {"values": v, "median_s": median(v), "max_s": max(v)} for c, v in times.items()}
    out["parts"] = startup_parts(max(1, min(3, cfg.startup_reps)))
    return out


_PARTS = """
import time, sys
t0 = float(sys.argv[1])
t1 = time.time()
from dpuprof.record.bcc_loader import import_bcc
bcc = import_bcc()
t2 = time.time()
from dpuprof.record import probes
bpf, used, _ = probes.load(bcc.BPF, list(probes.PROBE_NAMES))
t3 = time.time()
bpf.cleanup()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def startup_parts(reps: int) -> dict:
    """Where the start-up goes: the interpreter's start, importing bcc, compiling and loading the
    probes (bcc runs clang), medians of ``reps`` runs."""
    parts = {"python_start_s": [], "import_bcc_s": [], "compile_load_s": []}
    for _ in range(reps):
        res, _ = run_cmd([PYTHON, "-c", _PARTS, repr(time.time())], timeout=120)
        if res.returncode != 0:
            return {}
        for key, val in zip(parts, res.stdout.split()):
            parts[key].append(float(val))
    return {k: median(v) for k, v in parts.items()}


# ---------------------------------------------------------------------------------------- 5. report time
def bench_report(cfg: Config) -> dict:
    script = BENCH / "bench_report.py"
    if not script.is_file():
        return {"skipped": "benchmarks/bench_report.py is absent"}
    fixture = ROOT / "fixtures" / "long" / "recording.rec"
    note = None
    if not fixture.is_file():
        others = sorted(ROOT.glob("fixtures/*/recording.rec"), key=lambda p: p.stat().st_size)
        if not others:
            return {"skipped": "no fixtures/long/recording.rec and no other fixture"}
        fixture = others[-1]
        note = (f"fixtures/long/recording.rec is absent; timed on the largest fixture present, "
                f"{fixture.relative_to(ROOT)}")
    cmd = [PYTHON, str(script), "--json", "--runs", str(cfg.report_runs), "--fixture", str(fixture)]
    log(f"report time: {' '.join(cmd[1:])}")
    res, _ = run_cmd(cmd, timeout=900)
    if res.returncode != 0:
        return {"skipped": f"bench_report.py failed ({res.returncode}): {res.stderr.strip()[-300:]}"}
    out = json.loads(res.stdout)
    out["note"] = note
    out["fixture_bytes"] = fixture.stat().st_size
    out["command"] = "python3 " + " ".join(str(Path(c).relative_to(ROOT)) if c.startswith(str(ROOT)) else c
                                           for c in cmd[1:])
    return out


# ---------------------------------------------------------------------------------------- machine
def machine_info() -> dict:
    from dpuprof import __version__
    from dpuprof.record.metadata import cpu_model

    def cmd_out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    mem = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    versions = {
        "iperf3": cmd_out(["iperf3", "--version"]).splitlines()[0:1],
        "fio": cmd_out(["fio", "--version"]).splitlines()[0:1],
        "openssl": cmd_out(["openssl", "version"]).splitlines()[0:1],
        "pigz": cmd_out(["pigz", "--version"]).splitlines()[0:1],
        "zstd": cmd_out(["zstd", "--version"]).splitlines()[0:1],
        "perf": cmd_out(["perf", "--version"]).splitlines()[0:1],
    }
    return {
        "host": socket.gethostname(), "kernel": platform.release(), "cpu_model": cpu_model(),
        "cpus": os.cpu_count(), "memory_gib": round(mem, 1), "python": platform.python_version(),
        "dpuprof_version": __version__, "git_commit": cmd_out(["git", "rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(cmd_out(["git", "status", "--porcelain", "--untracked-files=no"])),
        "tool_versions": {k: (v[0].strip("* ") if v else "?") for k, v in versions.items()},
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def busy_fraction(seconds: float = 2.0) -> float:
    """Host CPU busy fraction over ``seconds`` (from /proc/stat), before the suite starts."""
    def read():
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(f), f[3] + f[4]
    t1, i1 = read()
    time.sleep(seconds)
    t2, i2 = read()
    return 1 - (i2 - i1) / max(1, t2 - t1)


# ---------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run for CI (about 2 minutes); asserts no timings")
    ap.add_argument("--out", type=Path, default=BENCH, help="where RESULTS.md and results.json go (default: benchmarks/)")
    ap.add_argument("--scratch", type=Path, default=Path("/var/tmp/dpuprof-bench"),
                    help="scratch directory on a real disk (O_DIRECT); the DDP shards are kept here for reuse")
    ap.add_argument("--long-s", type=int, default=None, help="length of the memory/size run (full: 240 s)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install missing tools")
    ap.add_argument("--check-accuracy", action="store_true",
                    help="exit 1 when an accuracy target (CPU-second ratios, not timings) is missed")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.long_s:
        cfg.long_s = args.long_s
    if os.geteuid() != 0:
        print("benchmarks/run.py needs root (dpuprof record and perf record -a): run it with sudo", file=sys.stderr)
        return 2
    missing = ensure_tools(not args.no_install)
    if missing:
        print(f"benchmarks/run.py: missing tools: {', '.join(missing)} "
              f"(apt-get install {' '.join(sorted({TOOLS[m] for m in missing}))})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.scratch.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    machine = machine_info()
    machine["load_before"] = loadavg()
    machine["busy_before"] = busy_fraction()
    log(f"mode {'quick' if cfg.quick else 'full'}; load average {machine['load_before']}")

    make_fio_file(args.scratch / "fio.dat")
    make_text_file(args.scratch / f"pigz-{cfg.pigz_mb}M.txt", cfg.pigz_mb << 20)
    data = ddp_data(args.scratch, cfg)

    results = {"mode": "quick" if cfg.quick else "full", "config": cfg.__dict__, "machine": machine,
               "command": "sudo python3 benchmarks/run.py" + (" --quick" if cfg.quick else "")}
    results["accuracy"] = bench_accuracy(cfg, args.scratch)
    results["overhead"] = bench_overhead(cfg, args.scratch, data)
    results["long"] = bench_long(cfg, args.scratch, data)
    results["startup"] = bench_startup(cfg, args.scratch)
    results["report"] = bench_report(cfg)
    machine["load_after"] = loadavg()
    results["wall_s"] = time.time() - t_start
    results["commands"] = commands(cfg, args.scratch)

    from results_md import evaluate, render  # noqa: E402
    results["targets"] = evaluate(results)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    (args.out / "RESULTS.md").write_text(render(results))
    log(f"wrote {args.out / 'RESULTS.md'} and results.json in {results['wall_s'] / 60:.1f} min")
    if args.check_accuracy:
        bad = [t for t in results["targets"] if t["id"].startswith("accuracy") and t["met"] is False]
        if bad:
            print("accuracy targets missed: " + "; ".join(f"{t['name']}: {t['measured']}" for t in bad),
                  file=sys.stderr)
            return 1
    return 0


def commands(cfg: Config, scratch: Path) -> dict:
    """The exact commands of each benchmark, for RESULTS.md (PORT and FILE as used)."""
    T = cfg.acc_alone_s
    tools = accuracy_tools(T, 5201, scratch)
    rec = "dpuprof record -q -o X.rec"
    return {
        "accuracy_tools": {t.name: [" ".join(p["cmd"]) + (f"  (SIGINT after {p['stop_after_s']} s)"
                                                          if p.get("stop_after_s") else "")
                                    for p in t.procs] for t in tools},
        "accuracy_wrapper": f"{rec} -- python3 benchmarks/together.py SPEC.json TRUTH.json   "
                            f"# with `{' '.join(PERF_RECORD)} -o perf.data` running over the same time",
        "perf_classify": "perf script -F comm,pid,tid,period,ip,sym,dso -> benchmarks/perfclass.py "
                         "(dpuprof/data/rules.toml via dpuprof.record.classify.Classifier)",
        "overhead_iperf3": f"iperf3 -s -1 {' '.join(iperf3_pinning()[0])} & iperf3 -c 127.0.0.1 "
                           f"{' '.join(iperf3_pinning()[1])} -J -O 1 -t {cfg.iperf_s + 1}   "
                           f"(bare | {rec} [--probes P] -- ... | {' '.join(PERF_RECORD)} -o perf.data -- ...)",
        "overhead_fio": " ".join(fio_workload(cfg.fio_s, scratch).make(scratch)[0]),
        "overhead_ddp": f"python3 examples/train_ddp.py --variant plain --duration {cfg.ddp_s} --json "
                        f"--data-dir {scratch / 'ddp'} {' '.join(cfg.ddp_extra)}".strip(),
        "long": (f"{rec} -- python3 examples/train_ddp.py --variant plain --duration {cfg.long_s} ...   "
                 if not cfg.quick else f"{rec} -- (the iperf3 pair above, -t {cfg.long_s + 1})   ") +
                f"# with `{' '.join(PERF_RECORD)} -o perf.data` over the same run; /proc/RECORDER/status sampled",
        "startup": f"{rec} -- date +%s.%N   (printed time minus launch time; also bare and under perf record)",
    }


if __name__ == "__main__":
    sys.exit(main())
