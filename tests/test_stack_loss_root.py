"""Root test: stack map loss stays flat over a run (issue 11).

bcc 0.26's ``StackTrace.clear()`` is a no-op, so before the fix in dpuprof/record/drain/samples.py the
stack maps were never emptied: they filled up and ``bpf_get_stackid`` failed with -EEXIST on ever
more hash-bucket collisions (user stacks lost: 9 % of samples in minute 0 of fixtures/long, 35 % in
minute 7). With every drained stack id deleted, loss stays under 1 % of samples in every 3-s
window of a 12-s DDP training run (benchmarks/stack_loss.py --minutes N for longer), and the drained
stack map is really empty after each drain.
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PYTHON, REPO, dpuprof

pytestmark = [pytest.mark.root, pytest.mark.slow]

SMALL = ["--image-size", "256", "--crop", "128", "--batch-size", "16", "--shards", "8"]
WINDOW_S = 3.0  # 12-s run: three or four full windows (benchmarks/stack_loss.py runs minutes)
BOUND_PCT = 1.0


def _stack_loss_module():
    spec = importlib.util.spec_from_file_location("stack_loss", REPO / "benchmarks" / "stack_loss.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stack_map_loss_stays_under_one_percent_per_window(tmp_path):
    out = tmp_path / "ddp.rec"
    proc = dpuprof("record", "-q", "-o", out, "--", PYTHON, REPO / "examples" / "train_ddp.py",
                   "--duration", "12", "--data-dir", tmp_path / "shards", *SMALL, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mod = _stack_loss_module()
    df = mod.loss_windows(out, WINDOW_S)
    print(mod.render(df, markdown=False))
    full = df[df["samples"] >= 0.5 * df["samples"].max()]  # the last, partial window has few samples
    assert len(full) >= 3, df
    # (Run on the code before the fix, whose recordings lump every failed walk together, the test
    # checks those kinds instead -- and fails: 1.8 % of user stacks lost in the first window.)
    old = "kernel_map" not in df
    for col in ("kernel_old", "user_old") if old else ("kernel_map", "user_map"):
        worst = full[col + "_pct"].max()
        assert worst <= BOUND_PCT, f"{col} stack loss reached {worst:.2f} % of samples in a window:\n{df}"
    # The kinds are told apart: unwalkable user stacks and other errors are counted on their own,
    # and both stay rare in this frame-pointer-poor (but fully mapped) workload.
    assert old or (full["user_unwalkable_pct"] <= 5).all() and (full["stack_error_pct"] <= 1).all(), df


def test_drain_empties_the_drained_stack_maps():
    """The measurement behind the fix: after each drain the drained buffer's stack maps hold no
    stack (bcc's StackTrace.clear() alone leaves them full), and the other buffer is untouched.

    Run in a fresh interpreter that samples only itself: the drain symbolises every sampled
    process, and a pytest process that other tests made import torch takes a minute to symbolise."""
    proc = subprocess.run([PYTHON, "-c", "import test_stack_loss_root as t; t.drain_check()"],
                          cwd=Path(__file__).parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def drain_check():
    """The body of test_drain_empties_the_drained_stack_maps (raises AssertionError on failure)."""
    import os
    import threading

    from dpuprof.record.load import probes
    from dpuprof.record.load.bcc_loader import import_bcc
    from dpuprof.record.stacks.classify import Classifier
    from dpuprof.record.drain.samples import SampleDrainer
    from dpuprof.record.stacks.symbols import Symbolizer

    bcc = import_bcc()
    bpf, used, _ = probes.load(bcc.BPF, ["cpu_sample"])
    assert used == ["cpu_sample"]
    try:
        bpf.attach_perf_event("on_sample", bcc.PerfType.SOFTWARE, bcc.PerfSWConfig.CPU_CLOCK, 999, pid=os.getpid())
        drainer = SampleDrainer(bpf, Symbolizer(bcc.BPF), Classifier())
        stop = threading.Event()

        def spin():  # varied user stacks: recursion of varying depth
            def deep(n):
                return deep(n - 1) if n else sum(range(2000))
            i = 0
            while not stop.is_set():
                deep(i % 40)
                i += 1

        worker = threading.Thread(target=spin)
        worker.start()
        try:
            drainer.prime()
            for _ in range(3):
                time.sleep(0.5)
                written = drainer.buf  # the buffer the program writes until the flip
                before = len(list(bpf[f"stacks{written}"].keys()))
                out = drainer.drain(set())
                assert before > 0 and drainer.cleared >= before, (before, drainer.cleared)
                assert not list(bpf[f"stacks{written}"].keys()) and not list(bpf[f"spill{written}"].keys())
                assert sum(out["stacks"].values()) > 0
        finally:
            stop.set()
            worker.join()
    finally:
        bpf.close()
