"""What is measured: the single-purpose tools of the accuracy runs (with their ground truth) and the
workloads of the overhead runs (iperf3, fio, DDP training), each a command and a parser of its
output; and the exact command lines, for RESULTS.md."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .config import BENCH, PERF_RECORD, PYTHON, ROOT, TOGETHER, Config

def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for iperf3 and tcp_stream.py)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fio_cmd(scratch: Path, seconds: int) -> list[str]:
    """fio 4 KiB O_DIRECT random reads (psync) of scratch/fio.dat for ``seconds``, JSON output."""
    return ["fio", "--name=randread", f"--filename={scratch / 'fio.dat'}", "--rw=randread", "--bs=4k",
            "--direct=1", "--ioengine=psync", "--size=256M", "--time_based", f"--runtime={seconds}",
            "--thread", "--output-format=json"]


@dataclass
class Tool:
    name: str
    category: str
    truth: str          # "utime" or "stime": which of the tool's CPU times is its category
    procs: list         # together.py tool specs
    why: str


def accuracy_tools(T: int, port: int, scratch: Path) -> list[Tool]:
    """The accuracy runs' tools, each running ``T`` seconds (iperf3 on ``port``, inputs in ``scratch``),
    with the CPU time (utime or stime) that is their category's ground truth."""
    fio = fio_cmd(scratch, T)
    return [
        Tool("tcp_stream", "network", "stime",
             [{"name": "tcp_stream server", "cmd": [PYTHON, str(BENCH / "tcp_stream.py"), "server", str(port)]},
              {"name": "tcp_stream client", "cmd": [PYTHON, str(BENCH / "tcp_stream.py"), "client", str(port), str(T)],
               "delay_s": 0.5}],
             "loopback TCP of blocking calls only (benchmarks/tcp_stream.py; iperf3's stime also holds "
             "its pselect6 waits): its kernel time is the socket send/receive path"),
        Tool("openssl", "crypto", "utime",
             [{"name": "openssl speed", "cmd": ["openssl", "speed", "-evp", "aes-256-gcm", "-seconds", str(T),
                                                 "-bytes", "16384"]}],
             "AES-256-GCM in libcrypto: its user time is the cipher"),
        Tool("fio", "storage", "stime", [{"name": "fio", "cmd": fio}],
             "4 KiB O_DIRECT random reads (psync): its kernel time is the read path down to the device"),
        Tool("pigz", "compression", "utime",
             [{"name": "pigz", "cmd": ["pigz", "-p", "1", "-6", "-c", str(pigz_input(scratch))],
               "stop_after_s": T, "stdout": "null"}],
             "deflate in libz.so.1 (dynamically linked): its user time is compression"),
        Tool("zstd", "compression", "utime",
             [{"name": "zstd -b", "cmd": ["zstd", "-b3", f"-i{max(1, T // 2)}"]}],
             "zstd's in-memory benchmark (compress, then decompress): its user time is compression"),
    ]


def pigz_input(scratch: Path) -> Path:
    """The largest pigz input present (the full suite writes 256 MiB, --quick 64 MiB)."""
    files = sorted(scratch.glob("pigz-*M.txt"), key=lambda p: p.stat().st_size)
    return files[-1] if files else scratch / "pigz-256M.txt"


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
    """iperf3 over loopback through together.py (server and client pinned); metric Gbit/s, work GB."""
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
    """fio random reads; metric kIOPS, work thousands of IOs."""
    def make(work: Path):
        cmd = fio_cmd(scratch, seconds)

        def parse(stdout: str) -> tuple[float, float]:
            read = json.loads(stdout[stdout.index("{"):])["jobs"][0]["read"]
            return read["iops"] / 1e3, read["total_ios"] / 1e3
        return cmd, parse
    return Workload("fio", "kIOPS", make, "k IOs")


def ddp_workload(seconds: int, data: Path, cfg: Config) -> Workload:
    """examples/train_ddp.py --variant plain on the shards in ``data``; metric steps/s, work steps."""
    def make(_work: Path):
        cmd = [PYTHON, str(ROOT / "examples" / "train_ddp.py"), "--variant", "plain", "--duration",
               str(seconds), "--data-dir", str(data), "--json", *cfg.ddp_extra]

        def parse(stdout: str) -> tuple[float, float]:
            line = json.loads([ln for ln in stdout.splitlines() if ln.strip().startswith("{")][-1])
            return float(line["steps_per_s"]), float(line["steps"])
        return cmd, parse
    return Workload("ddp", "steps/s", make, "steps")


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
                         "(dpuprof/data/rules.toml via dpuprof.record.stacks.classify.Classifier)",
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
