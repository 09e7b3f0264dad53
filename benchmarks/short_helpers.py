#!/usr/bin/env python3
"""Short-lived helpers (issue 24): a WebDataset-style loader that fetches each HTTPS shard with
one ``curl``, recorded by ``dpuprof record`` while ``perf record -a -g -F 499`` records the same
run; the crypto share and the unresolved share of curl's samples, side by side.

    sudo python3 benchmarks/short_helpers.py                              # 8 shards x 4 epochs
    sudo python3 benchmarks/short_helpers.py --tree old=/tmp/main --tree new=.   # checkouts in turn
    sudo python3 benchmarks/short_helpers.py --into benchmarks/results.json      # RESULTS.md's section 6

``benchmarks/run.py`` runs it too (its section 6 and target row); ``--into`` puts a separate run's
rows into a results.json and re-renders the RESULTS.md beside it.

A local ``openssl s_server -WWW`` (TLS 1.3, a throw-away self-signed certificate) serves the
shards on 127.0.0.1; the loader (``sh``) runs ``curl -sk URL -o /dev/null`` per shard and epoch,
as WebDataset's ``pipe:curl`` does, so every curl lives a fraction of a second (here 0.2-0.5 s of
wall time), less than dpuprof's 1-s drain interval. The server is not part of the recorded
workload. perf's samples are classified with dpuprof's own rules (perfclass.py); the curl
processes are the recording's (comm ``curl``), so both count the same processes.

``unresolved``: samples whose leaf user frame names no module (``[unknown]`` alone), which the
classifier can only file as compute.other. Scratch files go to a temporary directory (removed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # dpuprof from this checkout
sys.path.insert(0, str(REPO / "benchmarks"))  # perfclass, results_md, suite
import results_md  # noqa: E402
from perfclass import parse, perf_script  # noqa: E402
from suite.report import short_helpers_table  # noqa: E402

from dpuprof.categories import top_level  # noqa: E402
from dpuprof.record.stacks.classify import Classifier  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_shards(directory: Path, shards: int, mib: int) -> None:
    """``shards`` files of ``mib`` MiB of random bytes, and a self-signed certificate."""
    for i in range(shards):
        with open(directory / f"shard-{i:03d}.tar", "wb") as fh:
            fh.write(os.urandom(mib << 20))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-days", "1", "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem")],
                   check=True, capture_output=True)


def loader_script(port: int, shards: int, epochs: int) -> str:
    urls = " ".join(f"https://127.0.0.1:{port}/shard-{i:03d}.tar" for i in range(shards))
    return f"for e in $(seq {epochs}); do for u in {urls}; do curl -sk \"$u\" -o /dev/null || exit 1; done; done"


def dpuprof_curl(rec: Path) -> tuple[set[int], dict]:
    """(curl pids, {samples, crypto, unresolved}) of the recording's workload."""
    with sqlite3.connect(rec) as db:
        rows = db.execute(
            "SELECT ss.pid, ss.category, s.folded, ss.samples FROM v_stack_samples ss "
            "JOIN stacks s USING (stack_id) JOIN processes p ON p.pid = ss.pid "
            "WHERE p.in_workload = 1 AND p.comm = 'curl'").fetchall()
    pids, out = set(), {"samples": 0, "crypto": 0, "unresolved": 0}
    for pid, category, folded, n in rows:
        user = [f for f in folded.split(";") if not f.endswith("_[k]")]
        pids.add(pid)
        out["samples"] += n
        out["crypto"] += n if category == "crypto" else 0
        out["unresolved"] += n if user and user[-1] == "[unknown]" else 0
    return pids, out


def perf_curl(perf_data: Path, pids: set[int]) -> dict:
    """{samples, crypto, unresolved} of ``pids``' samples in perf_data, with dpuprof's rules."""
    classifier, out = Classifier(), {"samples": 0, "crypto": 0, "unresolved": 0}
    for pid, _period, kframes, uframes in parse(perf_script(str(perf_data))):
        if pid not in pids:
            continue
        out["samples"] += 1
        out["crypto"] += top_level(classifier.classify(kframes, uframes or ["[no stack]"])) == "crypto"
        out["unresolved"] += bool(not kframes and uframes and uframes[-1] == "[unknown]")
    return out


def one_run(label: str, tree: Path, work: Path, port: int, shards: int, epochs: int) -> list[dict]:
    """Record the loader once with dpuprof (checkout ``tree``) and perf together: a row per tool."""
    rec, perf_data = work / f"{label}.rec", work / f"{label}.perf.data"
    perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "499", "-o", str(perf_data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf's start-up (reading every process's maps) before the workload starts
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "dpuprof", "record", "-q", "-F", "499", "-o", str(rec), "--",
                          "sh", "-c", loader_script(port, shards, epochs)],
                         cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    perf.send_signal(signal.SIGINT)
    perf.wait()
    if res.returncode != 0:
        raise SystemExit(f"dpuprof record failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    pids, ours = dpuprof_curl(rec)
    theirs = perf_curl(perf_data, pids)
    return [{"run": label, "tool": tool, "processes": len(pids), "samples": c["samples"],
             "crypto_pct": 100 * c["crypto"] / max(c["samples"], 1),
             "unresolved_pct": 100 * c["unresolved"] / max(c["samples"], 1), "wall_s": wall}
            for tool, c in (("dpuprof", ours), ("perf", theirs))]


def measure(trees: list[tuple[str, str]], shards: int = 8, epochs: int = 4, shard_mib: int = 24) -> dict:
    """The loader recorded once per checkout in ``trees`` [(label, path)]: {"shards", "epochs",
    "shard_mib", "rows": [one_run's rows]}. Needs root, perf, openssl and curl."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="dpuprof-short-") as tmp:
        work = Path(tmp)
        make_shards(work, shards, shard_mib)
        port = _free_port()
        server = subprocess.Popen(["openssl", "s_server", "-quiet", "-WWW", "-accept", f"127.0.0.1:{port}",
                                   "-cert", "cert.pem", "-key", "key.pem"], cwd=work,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            for label, tree in trees:
                rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip()
                rows += one_run(f"{label} ({rev or 'no git'})", Path(tree).resolve(), work, port, shards, epochs)
        finally:
            server.terminate()
            server.wait()
    return {"shards": shards, "epochs": epochs, "shard_mib": shard_mib, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--shard-mib", type=int, default=24)
    ap.add_argument("--tree", action="append", default=[], metavar="[LABEL=]PATH",
                    help="record with dpuprof from this checkout (repeatable; default: this one)")
    ap.add_argument("--into", type=Path, metavar="RESULTS_JSON",
                    help="store the rows as that results.json's short_helpers and re-render its RESULTS.md")
    args = ap.parse_args(argv)
    trees = [(t.split("=", 1) if "=" in t else (Path(t).name, t)) for t in args.tree] or [("this", str(REPO))]
    res = measure(trees, args.shards, args.epochs, args.shard_mib)
    print("\n".join(short_helpers_table(res)))
    if args.into:
        data = json.loads(args.into.read_text())
        res["measured_utc"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        res["command"] = "sudo python3 benchmarks/short_helpers.py " + " ".join(argv if argv is not None else sys.argv[1:])
        data["short_helpers"] = res
        data["targets"] = results_md.evaluate(data)
        args.into.write_text(json.dumps(data, indent=1, default=str))
        return results_md.main([str(args.into)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
