#!/usr/bin/env python3
"""Stack loss over a long run: record N minutes of examples/train_ddp.py and print, per window,
the share of CPU samples whose kernel or user stack was lost, by kind (the `lost` table).

    sudo python3 benchmarks/stack_loss.py                  # 3 minutes, one row per minute
    sudo python3 benchmarks/stack_loss.py --minutes 10     # the full proof
    python3 benchmarks/stack_loss.py --from fixtures/long/recording.rec --markdown

Before the fix in dpuprof/record/drain/maps.py (bcc 0.26's StackTrace.clear() is a no-op, so the stack
maps filled up), user stack loss grew from ~9 % in minute 0 to ~35 % in minute 7 of a 10-minute
run; with the maps emptied every interval it should stay well under 1 % in every window.

Denominator: every CPU sample of the host in the window (stack_samples, idle included, plus those
dropped when the counts map was full) -- the loss counters are host-wide too.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # dpuprof from this checkout, installed or not
from dpuprof.recording import load  # noqa: E402

# (column, lost kinds): map loss is what the stack-map fix is about; unwalkable is another loss.
COLUMNS = (
    ("kernel_map", ("kernel_stack_collision", "kernel_stack_map_full")),
    ("user_map", ("user_stack_collision", "user_stack_map_full")),
    ("user_unwalkable", ("user_stack_unwalkable",)),
    ("stack_error", ("kernel_stack_error", "user_stack_error")),
    # Recordings made before the error codes were told apart (every failed walk lumped together).
    ("kernel_old", ("kernel_stack_lost",)),
    ("user_old", ("user_stack_lost",)),
)


def loss_windows(path, window_s: float = 60.0):
    """Per window of ``window_s`` seconds from the recording's first interval: a DataFrame with
    columns ``window`` (0, 1, ...), ``start_s`` (s since the start), ``samples`` (host CPU samples),
    and for each COLUMNS name the lost stack count and ``<name>_pct`` (% of samples): the ``*_old``
    columns for recordings with the old lumped kinds, the others otherwise."""
    rec = load(path)
    iv = rec.table("intervals")
    t0 = float(iv["t_start"].min())
    win = ((iv.set_index("interval")["t_start"] - t0) // window_s).astype(int)
    ss = rec.table("stack_samples")
    samples = ss.groupby(ss["interval"].map(win))["samples"].sum()
    lost = rec.table("lost")
    lost = lost.assign(window=lost["interval"].map(win))
    dropped = lost[lost["kind"] == "samples_map_full"].groupby("window")["count"].sum()
    out = pd.DataFrame({"samples": samples.add(dropped, fill_value=0)}).fillna(0)
    old = lost["kind"].isin(("kernel_stack_lost", "user_stack_lost")).any()
    for name, kinds in COLUMNS:
        if name.endswith("_old") != old:
            continue  # show one generation of kinds: the recording has the one or the other
        hit = lost[lost["kind"].isin(kinds)]
        out[name] = hit.groupby("window")["count"].sum().reindex(out.index, fill_value=0)
        out[name + "_pct"] = 100.0 * out[name] / out["samples"].where(out["samples"] > 0)
    out.index.name = "window"
    out = out.reset_index()
    out.insert(1, "start_s", out["window"] * window_s)
    return out.astype({"samples": int})


def render(df, markdown: bool) -> str:
    """The table as text (aligned columns) or a Markdown table."""
    names = [c for c, _ in COLUMNS if c in df]
    head = ["window", "start s", "samples"] + [f"{n} lost (%)" for n in names]
    rows = [[str(int(r.window)), f"{r.start_s:.0f}", str(int(r.samples))]
            + [f"{int(getattr(r, n))} ({getattr(r, n + '_pct'):.2f} %)" for n in names]
            for r in df.itertuples()]
    total = df["samples"].sum()
    rows.append(["all", "", str(int(total))]
                + [f"{int(df[n].sum())} ({100.0 * df[n].sum() / total if total else 0:.2f} %)" for n in names])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in [head] + rows)


def record(out: Path, minutes: float, freq: int, data_dir: str | None) -> None:
    """Record ``minutes`` of train_ddp (plain) with this checkout's dpuprof into ``out``."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "dpuprof", "record", "-q", "-F", str(freq), "-o", str(out), "--",
           sys.executable, str(REPO / "examples" / "train_ddp.py"), "--duration", str(minutes * 60)]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"stack_loss: dpuprof record exited {proc.returncode}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=3.0, help="minutes of training to record (default 3)")
    p.add_argument("--window", type=float, default=60.0, help="seconds per row (default 60)")
    p.add_argument("-F", "--freq", type=int, default=99, help="sampling frequency (default 99)")
    p.add_argument("--data-dir", help="train_ddp shards, kept and reused (default: a temp dir)")
    p.add_argument("--keep", type=Path, help="keep the recording at this path")
    p.add_argument("--from", dest="source", type=Path, help="read this recording instead of recording")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args(argv)
    if args.source:
        print(render(loss_windows(args.source, args.window), args.markdown))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "stack_loss.rec"
        record(out, args.minutes, args.freq, args.data_dir)
        print(f"stack loss per {args.window:.0f} s, {args.minutes:g} min of train_ddp at {args.freq} Hz, "
              f"load average {os.getloadavg()[0]:.2f} at the end:")
        print(render(loss_windows(out, args.window), args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
