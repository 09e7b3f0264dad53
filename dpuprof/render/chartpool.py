"""Draw a report's charts as PNG in forked worker processes while the renderer builds the rest.

Drawing is most of an HTML report's time (matplotlib's import, then each chart's ticks, text and
rasterising), it holds the GIL, and each chart is independent of the others and of the page around
it. So ``start(specs)`` forks a worker per spare CPU (this process, building the page meanwhile,
is one of the ``workers``), each importing matplotlib and drawing its share of the charts, and
returns at once; ``Pending.pngs()`` collects the PNG bytes, in order. The bytes are the same as
drawn here: the same code draws them from the same (inherited) data.

Nothing here can change what is drawn: where fork is unavailable, for fewer than two charts, with
one worker (``dpuprof report -j 1``), or when a worker fails or dies, the charts are drawn here, in
this process, so that an error is raised as in a serial run.
"""

from __future__ import annotations

import os
import pickle

from dpuprof.render.parallel import cpus


def _png(chart) -> bytes:
    from dpuprof.render.charts import to_png

    return to_png(chart.draw())


class Pending:
    """Charts being drawn: ``pngs(progress)`` returns one PNG (bytes) per chart spec, in order."""

    def __init__(self, specs: list, workers: list[tuple[int, int, list[int]]]):
        self.specs = specs
        self._workers = workers  # (pid, read end of its pipe, indices of the charts it draws)

    def __del__(self):  # never collected (the page failed): let the workers go, and reap them
        for pid, fd, _ in self._workers:
            try:
                os.close(fd)  # a worker still writing gets EPIPE and exits
                os.waitpid(pid, 0)
            except OSError:
                pass
        self._workers = []

    def pngs(self, progress=None) -> list[bytes]:
        out: dict[int, bytes] = {}
        workers, self._workers = self._workers, []
        for pid, fd, mine in workers:
            out.update(_collect(pid, fd, mine))
        n = len(self.specs)
        for i, c in enumerate(self.specs):
            if progress:
                progress.step(f"chart {i + 1}/{n}: {c.title}")
            if i not in out:  # not forked, or its worker failed: draw it here
                out[i] = _png(c)
        return [out[i] for i in range(n)]


def start(specs: list, workers: int | None = None) -> Pending:
    """Start drawing the ``figures.Chart`` specs in ``workers`` - 1 forked processes (None: one
    process per CPU in all; 1: none, they are drawn here when ``pngs`` is called)."""
    n = len(specs)
    # this process builds the rest of the page meanwhile, so it counts as one of the processes;
    # a worker imports matplotlib for itself, so more workers than spare CPUs would only cost
    children = min((workers or cpus()) - 1, n)
    if children < 1 or n < 2 or not hasattr(os, "fork"):
        return Pending(specs, [])
    shares = [list(range(k, n, children)) for k in range(children)]  # round robin: costs are alike
    started = []
    for mine in shares:
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process to spare: these charts are drawn here
            os.close(r)
            os.close(w)
            continue
        if pid == 0:  # the worker: draw, send, and leave without running this process's exit code
            os.close(r)
            _work(specs, mine, w)
        os.close(w)
        started.append((pid, r, mine))
    return Pending(specs, started)


def _work(specs: list, mine: list[int], fd: int) -> None:
    status = 1
    try:
        try:
            payload = pickle.dumps({i: _png(specs[i]) for i in mine})
            status = 0
        except BaseException:  # noqa: BLE001 -- the parent draws these again and raises the error itself
            payload = b""
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    finally:
        os._exit(status)


def _collect(pid: int, fd: int, mine: list[int]) -> dict[int, bytes]:
    """The worker's {index: png}; {} when it failed or died (its charts are then drawn here)."""
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return {}
    try:
        got = pickle.loads(data)  # from our own fork, not from a file
    except Exception:  # noqa: BLE001 -- a torn message: draw them here
        return {}
    return got if isinstance(got, dict) and set(got) == set(mine) else {}
