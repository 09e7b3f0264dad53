"""``dpuprof project``: project what a DPU would free on a recording, and store the projection in
the current directory (``dir/RUN.rec`` -> ``./RUN.proj.json``) where ``dpuprof report`` finds it.

The current directory, as perf (``perf.data``) and Nsight Systems (``report1.nsys-rep``) write there:
the recording's own folder may be read-only, someone else's, or a fixture inside a checkout."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dpuprof.categories import INFRASTRUCTURE
from dpuprof.cli.common import echo_json, resolve_recording
from dpuprof.errors import UserError
from dpuprof.projection import store

EPILOG = """\b
Examples:
  dpuprof project --dpu bluefield                  # newest *.rec here, BlueField-3
  dpuprof project run.rec --dpu bluefield-2 --format json
  dpuprof project run.rec --dpu ./my-dpu.toml --nodes 32 --gpus-per-node 8
  dpuprof project run.rec --sweep arm_offload.A=0.25:2   # Arm core speed (enters Arm-core capacity)
  dpuprof project run.rec --sweep rdma.o0=0:5000        # one mechanism's dispatch cost, ns
  dpuprof project run.rec --set virtio_fs.mode=async    # a what-if on one mechanism
  dpuprof project run.rec --dpu ideal -o ideal.proj.json
  dpuprof project run.rec --mode sync              # what if every offload were synchronous
  dpuprof project run.rec --dpu ideal --only crypto # an ideal crypto-only offload
  dpuprof project run.rec --time 30:90             # job speedup read from seconds 30-90
"""

#: --mode words: the profile's (sync_os) and the command line's (sync-os) spelling.
MODES = ("sync", "sync-os", "sync_os", "async")
FORMATS = ("terminal", "json")


@click.command(epilog=EPILOG)
@click.argument("recording", required=False)
@click.option("--dpu", default="bluefield", show_default=True, metavar="NAME|PATH",
              help="DPU profile: bluefield (= bluefield-3), bluefield-2, connectx-7, ideal, "
                   "or the path of your own .toml profile. Names ignore case (BlueField-3).")
@click.option("--format", "fmt", default="terminal", show_default=True, type=click.Choice(FORMATS),
              help="Output format on stdout.")
@click.option("-o", "--output", metavar="PATH",
              help="Where to store the projection (default: RUN.proj.json in the current directory, "
                   "where dpuprof report RUN.rec looks for it).")
@click.option("--nodes", metavar="N", type=click.IntRange(1, 1_000_000),
              help="Extrapolate all-reduce time to N nodes (ring, TCP vs RDMA).")
@click.option("--gpus-per-node", metavar="G", type=click.IntRange(1, 4096),
              help="Ranks per node for --nodes (default 1).")
@click.option("--sweep", "sweep_spec", metavar="MECH.PARAM=lo:hi[:points]",
              help="Speedup against one parameter of one mechanism: alpha, A, o0, L, Q, o1 (ns). A bare "
                   "PARAM works only where exactly one mechanism uses it.")
@click.option("--set", "set_specs", multiple=True, metavar="MECH.PARAM=value",
              help="Set one mechanism's parameter (alpha, A, o0, L, Q, o1, mode) for a what-if; repeatable.")
@click.option("--mode", metavar="sync|sync-os|async", type=click.Choice(MODES),
              help="Override every mechanism's execution mode (default: each mechanism's own).")
@click.option("--only", "only", metavar="CATEGORY[,CATEGORY]",
              help="Offload only these categories (network, storage, crypto, compression).")
@click.option("--time", "time_range", default="steady", show_default=True, metavar="START:END|steady",
              help="Window the job speedup is read from: seconds from the start, or 'steady' "
                   "(after warm-up, from step markers or the data).")
def project(recording, dpu, fmt, output, nodes, gpus_per_node, sweep_spec, set_specs, mode, only, time_range):
    """Project what a DPU would free on RECORDING (default: the newest *.rec here).

    For each infrastructure subcategory (network, storage, crypto, compression) and each offload
    mechanism of the DPU, applies the Accelerometer model (ASPLOS 2020) to the measured host CPU,
    with offload counts from the recorded packets, I/Os and socket calls, and the card's capacity
    (line rate, crypto Gb/s, Arm cores). Prints host core-seconds before, after and freed per
    category, host cores available for AI before and after, and a speedup range for the job.
    Every number is traceable to the DPU profile's cited sources.
    """
    # cheap checks first, before pandas is imported (click has checked each option's type and range)
    mode = mode.replace("-", "_") if mode else None
    if gpus_per_node is not None and nodes is None:
        raise UserError("--gpus-per-node needs --nodes")
    only_cats = _only(only)
    # Imported here, not at the top, so --help and a bad option stay fast (after dpuprof.cli is
    # loaded, time.perf_counter around each import, 2-CPU VM): the window parser imports pandas
    # (0.40-0.58 s), then the model and its pydantic schemas take 0.23-0.34 s more.
    from dpuprof.projection.window import parse_range

    window = parse_range(time_range)

    from dpuprof.project import build_projection, from_recording, load_profile
    from dpuprof.project import sweep as sweep_mod
    from dpuprof.recording import load
    from dpuprof.render.formats.projection_terminal import render_terminal

    sweep_args = sweep_mod.parse(sweep_spec) if sweep_spec else None
    profile = sweep_mod.apply_sets(load_profile(dpu), set_specs)
    if sweep_args:  # an ambiguous or unknown target fails before the recording is read
        sweep_mod.resolve(profile.with_overrides(mode=mode) if mode else profile, sweep_args[0])
    path = resolve_recording(recording)
    inp = from_recording(load(path))
    proj = build_projection(inp, profile, nodes=nodes, gpus_per_node=gpus_per_node or 1, mode=mode,
                            only=only_cats, window=window)
    sweep = sweep_mod.sweep(inp, profile, *sweep_args, mode=mode, only=only_cats, window=window) \
        if sweep_args else None
    stamped = store.stamp(proj, path, label=str(recording) if recording else str(path), sweep=sweep,
                        set=list(set_specs) or None)
    stored = _store(stamped, path, output)

    if fmt == "json":
        echo_json(stamped.as_json())
        if stored:
            click.echo(f"dpuprof: projection stored in {stored}", err=True)
        return
    click.echo(render_terminal(stamped, color=sys.stdout.isatty()))
    if stored and output is None:
        click.echo(f"\nStored in {stored} (dpuprof report {path} draws it).")
    elif stored:
        click.echo(f"\nStored in {stored} (draw it with: dpuprof report {path} --projection {stored}).")


def _only(only: str | None) -> tuple[str, ...] | None:
    """``--only network,crypto`` -> the categories; UserError naming the allowed ones."""
    if only is None:
        return None
    cats = tuple(c.strip() for c in only.split(",") if c.strip())
    if not cats or any(c not in INFRASTRUCTURE for c in cats):
        raise UserError(f"--only {only!r}: use categories from {', '.join(INFRASTRUCTURE)}")
    return cats


def _store(proj, recording, output: str | None):
    """Write the projection where ``-o`` says, else where ``report`` looks; the path, or None (with a
    warning) when the default place cannot be written. A named ``-o`` that fails is an error."""
    target = store.default_output(recording) if output is None else Path(output)
    try:
        return store.write(proj, target)
    except OSError as err:
        why = err.strerror or str(err)
        if output is not None:
            raise UserError(f"cannot write {target}: {why}") from None
        click.echo(f"dpuprof: warning: cannot store the projection as {target} ({why}); "
                   "use -o PATH so dpuprof report can find it", err=True)
        return None
