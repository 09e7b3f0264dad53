"""A small synthetic recording for the report tests, written with the real RecordingWriter.

It is generated at test time (never committed), so the report tests exercise edge cases that the
fixtures may lack -- a recording cut short, psutil mode, hostile strings -- and still run before the
fixtures exist. The fixture tests in test_report_render.py are the ones that matter for realism.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from factory import open_recording

# (folded stack root-first, category, subcategory, weight)
STACKS = [
    ("__libc_start_main (libc.so.6);main (python3.11);_PyEval_EvalFrameDefault (python3.11);"
     "zlib_compress (zlib.cpython-311.so);deflate (libz.so.1);[unknown] (libz.so.1)",
     "compression", "compression.user", 30),
    ("__libc_start_main (libc.so.6);main (python3.11);_PyEval_EvalFrameDefault (python3.11);"
     "_aesni_ctr32_ghash_6x (_rust.abi3.so)", "crypto", "crypto.user", 12),
    ("__libc_start_main (libc.so.6);main (python3.11);_PyEval_EvalFrameDefault (python3.11);"
     "__send (libc.so.6);entry_SYSCALL_64_[k];__x64_sys_sendto_[k];tcp_sendmsg_[k];"
     "tcp_sendmsg_locked_[k];_copy_from_iter_[k]", "network", "network.tcpip", 18),
    ("__libc_start_main (libc.so.6);main (python3.11);__recv (libc.so.6);entry_SYSCALL_64_[k];"
     "__x64_sys_recvfrom_[k];tcp_recvmsg_[k];_copy_to_iter_[k]", "network", "network.tcpip", 14),
    ("ret_from_fork_[k];kthread_[k];run_ksoftirqd_[k];handle_softirqs_[k];net_rx_action_[k];"
     "__napi_poll_[k];virtnet_poll_[k]", "network", "network.driver", 6),
    ("__libc_start_main (libc.so.6);main (python3.11);preadv64 (libc.so.6);entry_SYSCALL_64_[k];"
     "__x64_sys_preadv_[k];ext4_file_read_iter_[k];iomap_dio_rw_[k];blk_mq_submit_bio_[k]",
     "storage", "storage.block", 10),
    ("__libc_start_main (libc.so.6);main (python3.11);_PyEval_EvalFrameDefault (python3.11);"
     "matmul_kernel (libtorch_cpu.so)", "compute", "compute.user", 40),
    ("ret_from_fork_[k];kthread_[k];worker_thread_[k];process_one_work_[k]", "kernel_other",
     "kernel_other.kworker", 5),
    ("cpu_startup_entry_[k];do_idle_[k];default_idle_call_[k]", "idle", "idle", 60),
]


def make_recording(path: Path, *, seed: int = 1, intervals: int = 20, interval_s: float = 0.5,
                   comm: str = "python3", frame_suffix: str = "", complete: bool = True,
                   category_split: bool = True, host: str = "synth-host", t0: float | None = None) -> Path:
    """Write a synthetic recording to ``path`` and return it."""
    rng = random.Random(seed)
    hz = 99.0
    t0 = time.time() - intervals * interval_s if t0 is None else t0
    meta = {"dpuprof_version": "0.1.0", "host": host, "kernel": "6.18.0-synth", "cpu_model": "synthetic",
            "cpu_count": 2, "nic_speeds_mbps": {"eth0": 10000}, "command": ["python3", "train.py"],
            "cwd": "/tmp", "start_time": t0, "mode": "bpf" if category_split else "psutil",
            "sample_freq_hz": hz, "interval_s": interval_s,
            "probes_used": ["cpu_sample", "softirq", "block_io", "net_dev", "sock_io"],
            "probes_unavailable": {"fentry_timing": "fentry load refused (EPERM)"},
            "category_split": category_split, "root_pid": 1000, "recorder_pid": 999, "user": "synth",
            "gpu": None}
    pids = [(0, 0, "swapper/0", "", 0), (1000, 1, comm, "python3 train.py", 1),
            (1001, 1000, "pt_data_worker", "python3 train.py", 1), (55, 2, "ksoftirqd/0", "", 0)]
    stacks = [(i + 1, folded + (frame_suffix if cat != "idle" else ""), cat, sub)
              for i, (folded, cat, sub, _w) in enumerate(STACKS)]

    def tables(k):
        cat_rows, ss_rows = {}, []
        for sid, (folded, cat, sub, weight) in enumerate(STACKS, start=1):
            pid = 0 if cat == "idle" else 55 if "ksoftirqd" in folded or "kthread" in folded else \
                (1001 if sub == "storage.block" else 1000)
            phase = 1.0 + (0.6 if cat == "network" and k % 5 < 2 else 0.0)
            n = max(0, int(rng.gauss(weight * phase * interval_s / 2, 2)))
            if n == 0:
                continue
            ss_rows.append((pid, sid, n))
            key = (pid, cat, sub)
            cat_rows[key] = cat_rows.get(key, 0) + n
        return {
            "cpu_category": [(pid, cat, sub, n, n / hz) for (pid, cat, sub), n in cat_rows.items()]
            if category_split else [],
            "stack_samples": ss_rows if category_split else [],
            "net_io": [("eth0", "tx", rng.randint(40, 60) * 1_000_000, 30_000),
                       ("eth0", "rx", rng.randint(30, 50) * 1_000_000, 25_000),
                       ("lo", "tx", rng.randint(5, 9) * 1_000_000, 900)],
            "block_io": [("vda", "read", rng.randint(8, 12) * 4096 * 256, rng.randint(8, 12) * 256),
                         ("vda", "write", rng.randint(1, 3) * 4096 * 64, rng.randint(1, 3) * 64)],
            "block_latency": [("read", 128, 900), ("read", 256, 300)],
            "sock_io": [(1000, "tcp", "tx", 50_000_000, 700), (1000, "tcp", "rx", 40_000_000, 800)],
            "softirq": [(0, "NET_RX", 3_000_000, 400), (1, "BLOCK", 500_000, 90)],
            "events": [("tcp_retransmit", 1)],
            "proc_cpu": [(1000, 0.6, 0.2), (1001, 0.1, 0.05)],
            "host_cpu": [("user", 0.6), ("system", 0.3), ("softirq", 0.05), ("idle", 0.05),
                         ("iowait", 0.0)],
            "host_disk": [(10_000_000, 500_000, 2500, 120)],
            "host_net": [("eth0", 50_000_000, 40_000_000, 30_000, 25_000)],
            "lost": [("samples_map_full", 1)] if k == 3 else [],
        }

    def processes(k):
        return [(pid, ppid, c, cl, wl, t0, t0 + (k + 1) * interval_s) for pid, ppid, c, cl, wl in pids]

    _, w = open_recording(path, meta=meta, intervals=intervals, t0=t0, interval_s=interval_s, tables=tables,
                          processes=processes, stacks=stacks if category_split else ())
    if complete:
        w.close(end_time=t0 + intervals * interval_s, exit_code=0)
    else:  # like kill -9: no final metadata
        w._db.close()
    return path


def test_synthetic_recording_loads(tmp_path):
    from dpuprof.recording import load

    rec = load(make_recording(tmp_path / "s.rec"))
    assert rec.complete and rec.category_split and rec.workload_pids == {1000, 1001}


def make_projection(rec_path: Path, *, freed_fraction: float = 0.8, sha256: str | None = None) -> Path:
    """Write ``RUN.proj.json`` beside ``rec_path`` following docs/projection-contract.md, from the
    recording's own numbers (a stand-in for ``dpuprof project`` in the report tests)."""
    import hashlib
    import json

    from dpuprof.categories import CATEGORIES, INFRASTRUCTURE
    from dpuprof.recording import load
    from dpuprof.recording.summary import summarize

    rec = load(rec_path)
    s = summarize(rec)
    by_sub = s["host_cpu"]["by_subcategory"] or {}
    rows = []
    mech = {"network": ("rdma", "collectives over RDMA (NCCL/Gloo over IB/RoCE)"),
            "storage": ("snap", "NVMe emulation (SNAP)"), "crypto": ("inline-crypto", "kTLS/IPsec offload"),
            "compression": ("deflate-engine", "code changes to call the DPU compression engine")}
    for sub, before in by_sub.items():
        cat = sub.split(".", 1)[0]
        if cat not in INFRASTRUCTURE:
            continue
        after = before * (1 - freed_fraction)
        rows.append({"category": cat, "subcategory": sub, "mechanism": mech[cat][0], "requires": mech[cat][1],
                     "mode": "async", "alpha": freed_fraction, "A": 1.0, "n": 100, "C": 1e9, "o0": 200,
                     "L": 1000, "Q": 0, "before_s": before, "after_s": after, "freed_s": before - after,
                     "speedup": 1.05, "capacity_limited": False, "notes": "", "sources": ["synthetic"]})
    by_cat = {}
    for c in CATEGORIES:
        before = (s["host_cpu"]["by_category"] or {}).get(c, 0.0)
        freed = sum(r["freed_s"] for r in rows if r["category"] == c)
        by_cat[c] = {"before_s": before, "after_s": before - freed, "freed_s": freed}
    cap = rec.meta["cpu_count"] * rec.duration_s
    infra_b = sum(by_cat[c]["before_s"] for c in INFRASTRUCTURE)
    infra_a = sum(by_cat[c]["after_s"] for c in INFRASTRUCTURE)
    proj = {
        "projection_version": 1, "recording": str(rec_path),
        "recording_sha256": sha256 or hashlib.sha256(Path(rec_path).read_bytes()).hexdigest(),
        "dpu": {"name": "bluefield-3", "file": "bluefield-3.toml", "description": "synthetic test profile"},
        "host": {"cpu_count": rec.meta["cpu_count"], "duration_s": rec.duration_s, "host_capacity_s": cap},
        "rows": rows, "by_category": by_cat,
        "totals": {"before_s": sum(v["before_s"] for v in by_cat.values()),
                   "after_s": sum(v["after_s"] for v in by_cat.values()),
                   "freed_s": sum(v["freed_s"] for v in by_cat.values()), "infrastructure_before_s": infra_b},
        "cores_for_ai": {"before_pct": 100 * (1 - infra_b / cap), "after_pct": 100 * (1 - infra_a / cap),
                         "before_cores": rec.meta["cpu_count"] * (1 - infra_b / cap),
                         "after_cores": rec.meta["cpu_count"] * (1 - infra_a / cap),
                         "assumptions": ["synthetic: freed fraction fixed"]},
        "speedup": {"low": 1.0, "expected": 1.08, "high": 1.25, "pays": True,
                    "assumptions": ["synthetic speedup"]},
        "allreduce": {"nodes": 32, "gpus_per_node": 8, "bytes_per_step": 1e9, "tcp_us": 500.0,
                      "rdma_us": 180.0, "assumptions": ["synthetic all-reduce"]},
        "capacity": [{"resource": "crypto_gbps", "demand": 1.0, "limit": 100.0, "bottleneck": False}],
        "assumptions": ["synthetic projection for the report tests"], "warnings": [],
    }
    out = Path(str(rec_path)[:-4] + ".proj.json")
    out.write_text(json.dumps(proj, indent=1))
    return out
