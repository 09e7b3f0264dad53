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

import atexit
import os
import pickle
import threading

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


#: (pid, write end for the charts, read end for the PNGs) of the worker ``prestart`` forked
_warm: tuple[int, int, int] | None = None


def prestart(workers: int | None = None) -> None:
    """Fork one worker now, before the recordings are loaded, to import matplotlib meanwhile (its
    import is as long as loading a long recording); the next ``start`` sends it its charts.
    Nothing is forked with one process (``workers`` 1, or one CPU) or without fork."""
    global _warm
    if _warm is not None or (workers or cpus()) < 2 or not hasattr(os, "fork"):
        return

    specs_r, specs_w = os.pipe()
    pngs_r, pngs_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (specs_r, specs_w, pngs_r, pngs_w):
            os.close(fd)
        return
    if pid == 0:
        os.close(specs_w)
        os.close(pngs_r)
        _serve(specs_r, pngs_w)
    os.close(specs_r)
    os.close(pngs_w)
    _warm = (pid, specs_w, pngs_r)
    atexit.register(release)


def _serve(specs_fd: int, pngs_fd: int) -> None:
    """The pre-started worker: import matplotlib while reading its charts (pickled {index: chart};
    nothing when the report needs none), then draw them and send {index: png} back."""
    status = 1
    try:
        importer = threading.Thread(target=_import_charts, daemon=True)
        importer.start()  # reading the charts below must not wait for the import: the sender blocks
        with os.fdopen(specs_fd, "rb") as fh:
            data = fh.read()
        importer.join()
        payload = b""
        if data:
            try:
                mine = pickle.loads(data)  # from our own parent, not from a file
                payload = pickle.dumps({i: _png(c) for i, c in mine.items()})
                status = 0
            except BaseException:  # noqa: BLE001 -- the parent draws these again and raises itself
                payload = b""
        else:
            status = 0
        with os.fdopen(pngs_fd, "wb") as fh:
            fh.write(payload)
    finally:
        os._exit(status)


def _import_charts() -> None:
    try:
        import dpuprof.render.charts  # noqa: F401 -- the point: matplotlib imported ahead of time
    except BaseException:  # noqa: BLE001 -- drawing imports it again and meets the error there
        pass


def _take_warm(specs: list, mine: list[int]):
    """Hand charts ``mine`` to the pre-started worker: its (pid, fd, mine), or None (none started,
    or the charts cannot be sent: they are then drawn as if it had not been started)."""
    global _warm
    if _warm is None:
        return None
    pid, specs_w, pngs_r = _warm
    _warm = None
    try:
        data = pickle.dumps({i: specs[i] for i in mine})
    except Exception:  # noqa: BLE001 -- not picklable: release the worker, fork as usual
        data = b""
    try:
        with os.fdopen(specs_w, "wb") as fh:
            fh.write(data)
    except OSError:
        data = b""
    if not data:
        os.close(pngs_r)
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
        return None
    return pid, pngs_r, mine


def release() -> None:
    """A pre-started worker that got no charts (the report failed, or drew none) is told so (its
    input closes) and reaped; called at exit and when ``dpuprof report`` ends."""
    global _warm
    if _warm is not None:
        pid, specs_w, pngs_r = _warm
        _warm = None
        for fd in (specs_w, pngs_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass


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
    warm = _take_warm(specs, shares[0])
    if warm is not None:  # the pre-started worker draws the first share
        started.append(warm)
        shares = shares[1:]
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
