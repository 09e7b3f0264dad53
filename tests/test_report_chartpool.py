"""Charts drawn in forked workers (dpuprof/render/chartpool.py) are the bytes drawn in-process,
in order; a failing chart raises here as in a serial run."""

from __future__ import annotations

import pytest

from dpuprof.render import chartpool
from dpuprof.render.figures import Chart


def _bars(n: int):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1.5), dpi=50)
    ax = fig.add_subplot()
    ax.bar(range(n), range(1, n + 1))
    ax.set_title(f"{n} bars")
    return fig


def _specs(k: int) -> list[Chart]:
    return [Chart(f"c{i}", f"chart {i}", "", lambda fig=None, i=i: _bars(i + 1)) for i in range(k)]


def test_workers_draw_the_same_bytes_in_order_as_this_process():
    serial = chartpool.start(_specs(5), workers=1)
    assert serial._workers == []  # -j 1: nothing forked
    want = serial.pngs()
    pending = chartpool.start(_specs(5), workers=3)
    assert len(pending._workers) == 2  # this process counts as one of the three
    got = pending.pngs()
    assert got == want
    assert all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in got)
    assert len(set(got)) == 5  # each chart its own picture


def test_progress_names_every_chart_in_order():
    steps = []

    class P:
        def step(self, msg):
            steps.append(msg)

    chartpool.start(_specs(3), workers=2).pngs(P())
    assert steps == ["chart 1/3: chart 0", "chart 2/3: chart 1", "chart 3/3: chart 2"]


def test_a_chart_that_fails_in_a_worker_raises_here():
    def broken(fig=None):
        raise ValueError("no data for this chart")

    specs = _specs(2) + [Chart("bad", "bad", "", broken)]
    pending = chartpool.start(specs, workers=2)
    assert pending._workers
    with pytest.raises(ValueError, match="no data for this chart"):
        pending.pngs()


def test_an_uncollected_pool_reaps_its_workers():
    import os

    pending = chartpool.start(_specs(3), workers=2)
    pids = [pid for pid, _, _ in pending._workers]
    del pending
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped


def _draw_bars(n: int, fig=None):
    return _bars(n)


def test_a_prestarted_worker_draws_the_same_bytes():
    import functools

    specs = [Chart(f"c{i}", f"chart {i}", "", functools.partial(_draw_bars, i + 1)) for i in range(3)]
    want = chartpool.start(specs, workers=1).pngs()
    chartpool.prestart(2)
    warm_pid = chartpool._warm[0]
    pending = chartpool.start(specs, workers=2)
    assert [pid for pid, _, _ in pending._workers] == [warm_pid]  # the charts went to it
    assert pending.pngs() == want


def test_an_unused_prestarted_worker_is_released():
    import os

    chartpool.prestart(2)
    pid = chartpool._warm[0]
    chartpool.release()
    assert chartpool._warm is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
