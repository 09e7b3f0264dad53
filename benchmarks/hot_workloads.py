"""The loads of benchmarks/hot_loads.py (issue 32): each a command run through together.py and a
parser of what it left, plus what the recording should have counted of it.

- iperf3: loopback TCP flood (the suite's command); counted: bytes received on ``lo``;
- wake-PxT: P processes of wake_threads.py with T threads each;
- fio: 4 KiB O_DIRECT random reads (libaio, iodepth 32) of a loop device over a file on a tmpfs
  (loop_device sets it up once per script run and tears it down); counted: reads completed on
  that loop device.

Pure helpers (parse_fio, loop_devices, recorded_count) are tested in
tests/test_benchmarks_hot_loads.py.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from suite.config import PYTHON, TOGETHER, log
from suite.setup import make_fio_file
from suite.workloads import iperf3_pinning, iperf3_workload

BENCH = Path(__file__).resolve().parent
WAKE = BENCH / "wake_threads.py"
FIO_FILE_BYTES = 256 << 20   # the loop device's size: fio's random reads spread over all of it
FIO_IODEPTH = 32


@dataclass
class Load:
    name: str
    unit: str        # throughput's unit
    what: str        # the command, for the report
    make: Callable   # (work dir) -> (cmd, result() -> {"throughput", "workload_cpu_s", "wall_s", ...})
    # What the recording should count of the load, as the tool counts it: (what, SQL over the
    # recording giving dpuprof's number, its parameters); result() then gives "tool_count".
    counted: tuple[str, str, tuple] | None = None


def _truth(work: Path) -> dict:
    return json.loads((work / "truth.json").read_text())


def _together(work: Path, tools: list[dict]) -> list[str]:
    (work / "spec.json").write_text(json.dumps({"tools": tools}))
    return [*TOGETHER, str(work / "spec.json"), str(work / "truth.json")]


def _host(truth: dict) -> dict:
    """together.py's /proc/stat busy seconds over the tools' run (absent from an old together.py)."""
    return {k: truth[k] for k in ("host_busy_s", "host_window_s") if k in truth}


def iperf3_load(seconds: int) -> Load:
    """The suite's iperf3 workload (suite/workloads.py); throughput in GB/s received. Counted:
    bytes the client sent over its whole run, the omitted first second included (what crossed
    ``lo``; iperf3's end.sum_received.bytes leaves that second out and is kept apart)."""
    workload = iperf3_workload(seconds)

    def make(work: Path):
        cmd, parse = workload.make(work)

        def result() -> dict:
            gbit_s, gb = parse("")
            truth = _truth(work)
            tools = truth["tools"]
            client = json.loads(next(t for t in tools if t["name"] == "client")["stdout"])
            return {"throughput": gbit_s / 8, "workload_cpu_s": sum(t["cpu_s"] for t in tools),
                    "wall_s": max(t["wall_s"] for t in tools), "tool_count": round(gb * 1e9),
                    "iperf3_received_bytes": client["end"]["sum_received"]["bytes"], **_host(truth)}
        return cmd, result
    pin_s, pin_c = iperf3_pinning()
    what = (f"iperf3 -s -1 {' '.join(pin_s)} & iperf3 -c 127.0.0.1 {' '.join(pin_c)} -J -O 1 -t {seconds + 1}"
            .replace("  ", " "))
    counted = ("lo rx bytes",
               "SELECT COALESCE(SUM(bytes), 0) FROM net_io WHERE dev = ? AND direction = 'rx'", ("lo",))
    return Load("iperf3", "GB/s", what, make, counted)


def wake_load(procs: int, threads: int, seconds: int) -> Load:
    """``procs`` wake_threads.py processes of ``threads`` threads; throughput in hashes/s."""
    def make(work: Path):
        cmd = _together(work, [{"name": f"wake{i}", "cmd": [PYTHON, str(WAKE), "--threads", str(threads),
                                                           "--duration", str(seconds)]} for i in range(procs)])

        def result() -> dict:
            truth = _truth(work)
            tools = truth["tools"]
            outs = [json.loads([ln for ln in t["stdout"].splitlines() if ln.startswith("{")][-1]) for t in tools]
            wall = max(t["wall_s"] for t in tools)
            return {"throughput": sum(o["hashes"] for o in outs) / wall,
                    "workload_cpu_s": sum(t["cpu_s"] for t in tools), "wall_s": wall, **_host(truth)}
        return cmd, result
    return Load(f"wake-{procs}x{threads}", "hashes/s",
                f"{procs} x python3 benchmarks/wake_threads.py --threads {threads} --duration {seconds}", make)


def fio_cmd(device: str, seconds: int, out: Path) -> list[str]:
    """fio 4 KiB O_DIRECT random reads of ``device`` (libaio, iodepth 32) for ``seconds``, its JSON
    written to ``out`` (a file: together.py keeps only the last 20,000 characters of stdout)."""
    return ["fio", "--name=randread", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
            "--ioengine=libaio", f"--iodepth={FIO_IODEPTH}", "--time_based", f"--runtime={seconds}",
            "--thread", "--output-format=json", f"--output={out}"]


def fio_load(seconds: int, device: str | None) -> Load:
    """fio_cmd on the loop device ``device`` (loop_device); throughput in IOPS. Counted: reads the
    recording's block_io saw complete on that device, against fio's jobs[0].read.total_ios.
    ``device`` None (not set up yet) builds the Load for its name and text; make() then fails."""
    dev = device or "/dev/loopN"

    def make(work: Path):
        if device is None:
            raise RuntimeError("fio's loop device is not set up (hot_workloads.loop_device)")
        cmd = _together(work, [{"name": "fio", "cmd": fio_cmd(device, seconds, work / "fio.json")}])

        def result() -> dict:
            truth = _truth(work)
            tool = truth["tools"][0]
            fio = parse_fio((work / "fio.json").read_text())
            return {"throughput": fio["iops"], "workload_cpu_s": tool["cpu_s"], "wall_s": tool["wall_s"],
                    "tool_count": fio["total_ios"], "fio_runtime_s": fio["runtime_s"], **_host(truth)}
        return cmd, result
    counted = ("reads on the loop device",
               "SELECT COALESCE(SUM(ios), 0) FROM block_io WHERE dev = ? AND op = 'read'", (Path(dev).name,))
    what = " ".join(fio_cmd(dev, seconds, Path("fio.json")))
    return Load("fio", "IOPS", what, make, counted)


def make_loads(names: list[str], seconds: int, fio_device: str | None = None) -> list[Load]:
    """The Loads named (iperf3, wake-PxT, fio); SystemExit naming the choices on an unknown one."""
    out = []
    for name in names:
        if name == "iperf3":
            out.append(iperf3_load(seconds))
        elif name == "fio":
            out.append(fio_load(seconds, fio_device))
        elif name.startswith("wake-") and "x" in name:
            p, t = name[5:].split("x", 1)
            out.append(wake_load(int(p), int(t), seconds))
        else:
            raise SystemExit(f"unknown load {name!r} (iperf3, wake-PxT, fio)")
    return out


# --- pure helpers ----------------------------------------------------------------------------------

def parse_fio(text: str) -> dict:
    """fio's --output-format=json text (anything before the first ``{`` or after the object is
    ignored: fio may print warnings) as {"iops", "total_ios", "runtime_s"} of jobs[0]'s reads;
    iops is fio's own, else total_ios over the runtime."""
    start = text.index("{")
    data, _ = json.JSONDecoder().raw_decode(text[start:])
    read = data["jobs"][0]["read"]
    runtime_s = read.get("runtime", 0) / 1e3  # ms
    iops = read.get("iops")
    if iops is None:
        iops = read["total_ios"] / runtime_s if runtime_s > 0 else None
    return {"iops": iops, "total_ios": int(read["total_ios"]), "runtime_s": runtime_s}


def loop_devices(losetup_j: str) -> list[str]:
    """The devices in ``losetup -j FILE``'s output (``/dev/loop3: []: (/path)`` per line)."""
    return [ln.split(":", 1)[0] for ln in losetup_j.splitlines() if ln.startswith("/dev/loop")]


def recorded_count(rec: Path, sql: str, params: tuple) -> int | None:
    """``sql`` (one number) over the recording ``rec``, opened read-only; None where it cannot be
    read (no such table in an older recording, not a recording)."""
    try:
        con = sqlite3.connect(f"{rec.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = con.execute(sql, params).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return None if row is None or row[0] is None else int(row[0])


# --- the loop device -------------------------------------------------------------------------------

@contextlib.contextmanager
def loop_device(scratch: Path, size: int = FIO_FILE_BYTES):
    """Yield a loop device (``/dev/loopN``) over a ``size``-byte file of random bytes on a tmpfs
    mounted at ``scratch/tmpfs`` (in RAM: the loop device gives ~200k IOPS with no disk behind it).
    On the way out, also on an exception or Ctrl-C: every loop device backing that file is
    detached (found with ``losetup -j``, so one attached just before an interrupt is found too) and
    the tmpfs unmounted. Nothing else is touched: the mount point is in ``scratch``, the file in it."""
    mnt = scratch / "tmpfs"
    mnt.mkdir()
    backing = mnt / "fio.img"
    try:
        _setup(["mount", "-t", "tmpfs", "-o", f"size={size + (8 << 20)},mode=0700", "dpuprof-hot", str(mnt)])
        make_fio_file(backing, size)  # written, not sparse: reads of a hole would find no page at all
        dev = _setup(["losetup", "--find", "--show", str(backing)]).strip()
        log(f"fio: {dev} over {backing} ({size >> 20} MiB on a tmpfs)")
        yield dev
    finally:
        _teardown(mnt, backing)


def _setup(cmd: list[str]) -> str:
    """``cmd``'s stdout; SystemExit with one line (the command and its error) where it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"hot_loads.py: fio's loop device: `{' '.join(cmd)}` failed: "
                         f"{(out.stderr.strip().splitlines() or ['exit ' + str(out.returncode)])[-1]}")
    return out.stdout


def _teardown(mnt: Path, backing: Path) -> None:
    """Detach the loop devices over ``backing`` and unmount ``mnt`` (only if it is a mount point:
    it is this script's own, made in its scratch dir)."""
    if not mnt.is_mount():
        return
    for _ in range(50):  # a device still open (a fio killed late) detaches when closed (autoclear)
        devs = loop_devices(_losetup_j(backing)) if backing.exists() else []
        if not devs:
            break
        for dev in devs:
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        time.sleep(0.2)
    if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
        log(f"umount {mnt} failed (busy): unmounting it lazily")
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _losetup_j(backing: Path) -> str:
    return subprocess.run(["losetup", "-j", str(backing)], capture_output=True, text=True).stdout
