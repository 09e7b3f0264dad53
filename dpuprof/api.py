"""The Python API for notebooks: ``dpuprof.load(path)`` and ``dpuprof.project_run(run, dpu)``.

A thin layer over the Recording (``dpuprof.recording``), the report model (``dpuprof.render``)
and the projection (``dpuprof.project``): the same numbers ``dpuprof report --format json`` and
``dpuprof project`` print, as pandas DataFrames. Documented, with examples, in docs/api.md.
Units are in the column names (``_s`` seconds; CPU seconds for CPU: one busy core for one second
is 1.0); times ``t_start``/``t_end`` are unix seconds, ``t_s`` seconds from the recording's start.
"""

from __future__ import annotations

import os

from dpuprof.categories import NOT_WORK
from dpuprof.recording import load as load_recording
from dpuprof.render.formats.json_format import run_data
from dpuprof.render.timewindow import windowed
from dpuprof.render.view import build_view, intervals, recorder_pid, workload_stack_samples

__all__ = ["Run", "load", "project_run"]


class Run:
    """One loaded recording (optionally cut to a time window). Get one with :func:`load`."""

    def __init__(self, recording):
        #: the underlying :class:`dpuprof.recording.Recording` (``.table(name)`` for any raw table)
        self.recording = recording

    def __repr__(self) -> str:
        return f"<dpuprof.Run {self.recording.path.name}: {self.duration_s:.1f} s, {self.mode}>"

    # -- plain facts
    @property
    def path(self):
        return self.recording.path

    @property
    def meta(self) -> dict:
        return self.recording.meta

    @property
    def duration_s(self) -> float:
        return self.recording.duration_s

    @property
    def mode(self) -> str:
        return self.recording.info.mode or "?"

    def table(self, name: str):
        """The raw recording table ``name`` (see dpuprof/recording/schema.py) as a DataFrame."""
        return self.recording.table(name)

    def window(self, time: str) -> "Run":
        """This run cut to ``time``: ``"START:END"`` (seconds from the start) or ``"steady"``, as
        ``dpuprof report --time``. The window chosen is in ``summary()["window"]``."""
        return Run(windowed(self.recording, time))

    # -- DataFrames
    def _times(self):
        iv = intervals(self.recording)
        return iv[["t_start", "t_end", "t_s"]].reset_index()

    def categories(self, workload: bool = False):
        """Classified CPU: DataFrame[interval, t_start, t_s, pid, comm, category, subcategory,
        samples, cpu_s], one row per interval x process x subcategory, ``cpu_s`` in CPU seconds.
        Idle rows (category "idle", pid 0) and observer rows (category "observer": samples in
        dpuprof's own BPF programs) are included; ``workload=True`` keeps only the workload's
        processes. Empty for a psutil-mode recording (no category split)."""
        rec = self.recording
        df = rec.table("cpu_category")
        if workload:
            df = df[df["pid"].isin(rec.workload_pids)]
        names = rec.table("processes").drop_duplicates("pid").set_index("pid")["comm"]
        out = df.merge(self._times()[["interval", "t_start", "t_s"]], on="interval", how="left")
        out["comm"] = out["pid"].map(names).fillna("")
        cols = ["interval", "t_start", "t_s", "pid", "comm", "category", "subcategory", "samples", "cpu_s"]
        return out[cols].reset_index(drop=True)

    def stacks(self):
        """Stack samples summed over the run: DataFrame[pid, comm, folded, category, subcategory,
        samples], ``folded`` root first, frames joined by ';' (flamegraph.pl's convention, without
        the process frame the reports put on top). Idle, observer (dpuprof's own BPF programs) and the
        recorder's own process are left out,
        as in every flame graph, so ``samples.sum()`` equals ``dpuprof report --format folded``'s."""
        rec = self.recording
        ss = workload_stack_samples(rec)
        agg = ss.groupby(["pid", "stack_id"], as_index=False)["samples"].sum()
        agg = agg.merge(rec.table("stacks"), on="stack_id", how="inner")
        agg = agg[~agg["category"].isin(NOT_WORK)]
        names = rec.table("processes").drop_duplicates("pid").set_index("pid")["comm"]
        agg["comm"] = agg["pid"].map(names).fillna("")
        out = agg.groupby(["pid", "comm", "folded", "category", "subcategory"], as_index=False)["samples"].sum()
        return out.sort_values("samples", ascending=False, kind="stable").reset_index(drop=True)

    def processes(self):
        """Every process seen: DataFrame[pid, ppid, comm, cmdline, role, cpu_s], ``role``
        "workload" (the recorded command's tree), "recorder" (dpuprof itself) or "other";
        ``cpu_s`` busy CPU seconds from the classified samples (psutil mode: the workload's
        user + system time from proc_cpu, 0 for the rest). Largest first."""
        rec = self.recording
        procs = rec.table("processes").drop_duplicates("pid").copy()
        if rec.category_split:
            cat = rec.table("cpu_category")
            cpu = cat[~cat["category"].isin(NOT_WORK)].groupby("pid")["cpu_s"].sum()
        else:
            pc = rec.table("proc_cpu")
            cpu = (pc["user_s"] + pc["system_s"]).groupby(pc["pid"]).sum()
        procs["cpu_s"] = procs["pid"].map(cpu).fillna(0.0).astype(float)
        rpid = recorder_pid(rec)
        procs["role"] = ["recorder" if p == rpid else "workload" if w else "other"
                         for p, w in zip(procs["pid"], procs["in_workload"])]
        cols = ["pid", "ppid", "comm", "cmdline", "role", "cpu_s"]
        return procs[cols].sort_values("cpu_s", ascending=False, kind="stable").reset_index(drop=True)

    def gpu(self):
        """NVML GPU samples: DataFrame[interval, t_start, t_s, gpu_index, util_pct,
        mem_used_bytes, mem_total_bytes] (bytes; mem_total_bytes NaN in files from before schema
        3); empty where the host had no GPU (``meta["gpu"]`` says why)."""
        g = self.recording.table("gpu")
        if "mem_total_bytes" not in g.columns:
            g = g.assign(mem_total_bytes=float("nan"))
        out = g.merge(self._times()[["interval", "t_start", "t_s"]], on="interval", how="left")
        return out[["interval", "t_start", "t_s", "gpu_index", "util_pct", "mem_used_bytes", "mem_total_bytes"]]

    def summary(self) -> dict:
        """The summary ``dpuprof report --format json`` prints for this run (without a projection):
        host_cpu, workload_cpu, processes, io, net, lost_shares, recorder, window ... in CPU s."""
        view = build_view(self.recording)
        view.recording = self.recording
        return run_data(view)  # with the gpu and steps views, as the JSON has them


def load(path: str | os.PathLike, time: str | None = None) -> Run:
    """Load the recording at ``path`` (optionally cut to ``time``, see :meth:`Run.window`).
    Raises :class:`dpuprof.errors.UserError` with one line for a missing or damaged file."""
    run = Run(load_recording(path))
    return run.window(time) if time else run


def project_run(run, dpu: str = "bluefield-3", **options):
    """The :class:`dpuprof.projection.schema.Projection` of ``run`` (a :class:`Run`, a Recording or
    a path) on DPU profile ``dpu`` (a shipped name -- bluefield, bluefield-3, bluefield-2,
    connectx-7, ideal -- or a .toml path): what :func:`dpuprof.project.assemble.build_projection`
    returns (docs/projection-contract.md; ``.as_json()`` is the file's dict). ``options`` are that
    function's: ``nodes``, ``gpus_per_node``, ``mode``, ``only``, ``window``. Nothing is written
    (``dpuprof project`` also stores RUN.proj.json with the recording's sha256).
    """
    # Imported here, not at the top: the model (pydantic profile schema, assembler) adds 0.17 s to
    # dpuprof.load's 0.53 s (time python3 -c 'import dpuprof.api' with and without
    # dpuprof.project.assemble, 2-CPU VM), and until it is imported, the old spelling
    # dpuprof.project(run, dpu) fails with dpuprof.__getattr__'s message naming this function.
    from dpuprof.project.assemble import build_projection  # noqa: PLC0415 -- the model: see the comment above
    from dpuprof.project.inputs import from_recording  # noqa: PLC0415 -- the model: see the comment above
    from dpuprof.project.profiles import load_profile  # noqa: PLC0415 -- the model: see the comment above

    if isinstance(run, (str, os.PathLike)):
        run = load(run)
    rec = run.recording if isinstance(run, Run) else run
    return build_projection(from_recording(rec), load_profile(dpu), **options)


def __getattr__(name):
    if name == "project":  # the old name, with the new one in the message
        raise AttributeError("dpuprof.api.project is now dpuprof.api.project_run (dpuprof.project_run(run, dpu))")
    raise AttributeError(f"module 'dpuprof.api' has no attribute {name!r}")
