"""Run the agent: the recorder in system-wide mode, writing rotating files, feeding /metrics.

Nothing is duplicated from dpuprof/record: the recorder (recorder.py) records every process
(``Target(system_wide=True)``, as ``record -a``) with its probes loaded once for the agent's whole
life; only its writer is RotatingWriter (rotate.py), through the recorder's ``writer_factory``.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Callable

from prometheus_client import start_http_server

from dpuprof.agent.background import RotationWorker
from dpuprof.agent.metrics import IntervalMetrics
from dpuprof.agent.options import AgentOptions, light_probes
from dpuprof.agent.rotate import directory_writer_factory
from dpuprof.errors import UserError
from dpuprof.record.load.probes import DEFAULT_PROBES
from dpuprof.record.recorder import Options, Recorder
from dpuprof.record.sources import make_source, release_freed_memory
from dpuprof.record.workload.targets import Target


@dataclass
class AgentResult:
    """How the agent ended: ``seconds`` recorded, ``files`` kept (newest last), ``write_ok``
    False after a write error (reported through ``on_error``)."""
    seconds: float
    files: list
    write_ok: bool


def serve_metrics(metrics: IntervalMetrics, listen: tuple[str, int]):
    """Serve ``metrics.registry`` at http://ADDR:PORT/metrics in a daemon thread (prometheus-client's
    server); UserError (one line) when the address cannot be bound. Returns the server."""
    addr, port = listen
    try:
        server, _thread = start_http_server(port, addr=addr, registry=metrics.registry)
    except OSError as err:
        why = "in use by another program" if err.errno == errno.EADDRINUSE else (err.strerror or str(err))
        raise UserError(f"--listen {addr}:{port}: cannot listen there ({why})") from None
    return server


def rotation_worker(opts: AgentOptions, metrics: IntervalMetrics, on_error: Callable[[str], None]):
    """The background thread for completed files (background.py) with the tasks ``opts`` asks
    for -- ``--push`` (push.py), then ``--project`` (projecting.py) -- or None when it asks for
    neither. Their series go in ``metrics.registry``; a push's failure is a line for ``on_error``."""
    tasks = []
    if opts.push:
        from dpuprof.agent.push import Pusher  # noqa: PLC0415 -- requests only with --push

        tasks.append(Pusher(opts.push, opts.node, metrics.registry, warn=on_error))
    if opts.project:
        from dpuprof.agent.projecting import Projector  # noqa: PLC0415 -- pandas and the model only with --project

        tasks.append(Projector(opts.project, opts.node, metrics.registry))
    if not tasks:
        return None

    return RotationWorker(tasks)


def recorder_options(opts: AgentOptions):
    """The recorder's Options for ``opts``: system-wide, the light probe set unless ``probes``."""
    return Options(command=[], output=opts.directory, freq_hz=opts.freq_hz, interval_s=opts.interval_s,
                   probes=list(opts.probes) or light_probes(DEFAULT_PROBES), quiet=True, as_root=True,
                   target=Target(system_wide=True, duration_s=opts.duration_s), duty=opts.duty)


def run_agent(opts: AgentOptions, on_error: Callable[[str], None], on_ready: Callable[[str], None] | None = None,
              metrics: IntervalMetrics | None = None) -> AgentResult:
    """Record until SIGTERM/SIGINT (or ``duration_s``); the caller has blocked the stop signals
    (child.block_signals) before any thread starts, so the recorder takes them. ``on_ready`` gets
    one line once /metrics is served."""
    rec_opts = recorder_options(opts)
    make_source(rec_opts).check()  # privileges, bcc, host PID namespace: one line before anything starts

    metrics = metrics or IntervalMetrics(opts.node, weight=opts.duty[1] / opts.duty[0] if opts.duty else 1.0)
    worker = rotation_worker(opts, metrics, on_error)  # a bad --project profile: UserError now

    def rotated(path, pids):
        metrics.rotated(path, pids)
        if worker is not None:
            worker.submit(path)
        # Closing a file (VACUUM) and dropping a window's rows free MBs that glibc keeps: 2-5 MB
        # back each time in a system-wide run beside a loop of short-lived processes.
        release_freed_memory()

    server = serve_metrics(metrics, opts.listen)
    if on_ready is not None:
        on_ready(f"serving http://{opts.listen[0]}:{server.server_port}/metrics; recordings in {opts.directory}")
    made = []

    def factory(path, meta, owner):
        writer = directory_writer_factory(opts.directory, opts.node, rotate_s=opts.rotate_s,
                                          rotate_bytes=opts.rotate_bytes, keep=opts.keep,
                                          on_interval=metrics.add, on_rotate=rotated,
                                          on_forget=metrics.forget)(path, meta, owner)
        made.append(writer)
        return writer

    try:
        res = Recorder(rec_opts, status=None, on_error=on_error, writer_factory=factory).run()
    finally:
        server.shutdown()
        if worker is not None:
            worker.close()
    files = [p for p in made[0].files if p.exists()] if made else []
    return AgentResult(seconds=res.seconds, files=files, write_ok=res.write_ok)
