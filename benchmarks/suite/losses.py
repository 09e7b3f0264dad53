"""What the long run's recording lost, read before the recording is deleted: stack loss per minute
(benchmarks/stack_loss.py's loss_windows, by kind: map loss apart from unwalkable stacks), and the
events each BPF program skipped under the kernel's recursion protection (the `lost` table's
``missed_<program>`` rows) as a share of the events it handled (its run_cnt from BPF statistics)."""

from __future__ import annotations

from pathlib import Path

from stack_loss import COLUMNS, loss_windows

from dpuprof.recording import load

# The kinds judged against the stack-loss target: the maps' loss and other failed walks. An
# unwalkable user stack (code without frame pointers) is a property of the workload's binaries,
# reported beside them and never added in, so that it cannot mask map loss.
JUDGED_KINDS = ("kernel_map", "user_map", "stack_error", "kernel_old", "user_old")


def stack_loss_minutes(rec: Path) -> dict:
    """Per minute of the recording at ``rec``: ``windows``, a list of {window, start_s, samples,
    <kind>: lost stacks, <kind>_pct: % of that minute's host CPU samples} for the kinds of
    stack_loss.COLUMNS the recording has; and ``worst``, per kind, the minute with the largest share
    ({window, pct, count}; pct None when no minute had samples)."""
    df = loss_windows(rec)
    kinds = [name for name, _ in COLUMNS if name in df]
    windows = []
    for row in df.to_dict("records"):
        w = {"window": int(row["window"]), "start_s": float(row["start_s"]), "samples": int(row["samples"])}
        for k in kinds:
            pct = row[k + "_pct"]
            w[k], w[k + "_pct"] = int(row[k]), (None if pct != pct else float(pct))  # NaN: no samples
        windows.append(w)
    return {"windows": windows, "worst": worst_minutes(windows, kinds)}


def worst_minutes(windows: list[dict], kinds: list[str]) -> dict:
    """Per kind, the window with the largest ``<kind>_pct``: {window, pct, count}."""
    out = {}
    for k in kinds:
        rated = [w for w in windows if w.get(k + "_pct") is not None]
        top = max(rated, key=lambda w: w[k + "_pct"], default=None)
        out[k] = ({"window": top["window"], "pct": top[k + "_pct"], "count": top[k]} if top else
                  {"window": None, "pct": None, "count": sum(w.get(k, 0) for w in windows)})
    return out


def missed_events(rec: Path) -> dict[str, int]:
    """{program: events skipped} from the recording's ``missed_<program>`` lost rows, summed."""
    lost = load(rec).table("lost")
    lost = lost[lost["kind"].str.startswith("missed_")]
    return {str(k)[len("missed_"):]: int(v) for k, v in lost.groupby("kind")["count"].sum().items()}


def recursion_shares(missed: dict[str, int], programs: dict[str, dict]) -> dict[str, dict]:
    """Per program (``missed``: missed_events; ``programs``: RssSampler.bpf_programs): {missed,
    runs, share}, share = missed / (runs + missed) as a fraction (a skipped event is not a run),
    None where the program's runs are unknown (no BPF statistics, or no program of that name).
    ``missed`` is the recording's count, or the kernel's own (fdinfo) where that is larger: two
    programs of one short name share one ``missed_<name>`` row. Programs that missed nothing have
    share 0. Largest share first, unknown shares last."""
    out = {}
    for name in sorted(set(missed) | {n for n in programs if n != "?"}):
        prog = programs.get(name)
        n_missed = max(missed.get(name, 0), prog.get("kernel_misses", 0) if prog else 0)
        runs = prog["run_cnt"] if prog else None
        total = None if runs is None else runs + n_missed
        out[name] = {"missed": n_missed, "runs": runs,
                     "share": (n_missed / total if total else (0.0 if total == 0 else None))}
    return dict(sorted(out.items(), key=lambda kv: (kv[1]["share"] is None, -(kv[1]["share"] or 0), kv[0])))
