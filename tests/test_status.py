"""The live status line shows what the recording mode collects (dpuprof/record/status.py)."""

from __future__ import annotations

import io
from collections import Counter

from dpuprof.record.status import StatusLine


def test_bpf_mode_shows_samples_and_top_categories():
    line = StatusLine.line(12.0, 400, Counter({"network": 30, "compute": 10}), 0)
    assert "400 samples" in line and "network 75%" in line and "compute 25%" in line


def test_psutil_mode_shows_workload_cpu_and_processes_not_zero_samples():
    line = StatusLine.line(5.0, 0, Counter(), 0, workload_cpu_s=7.25, processes=3)
    assert "workload 7.25 CPU-s in 3 processes" in line and "psutil mode" in line
    assert "samples" not in line and "collecting" not in line
    assert "in 1 process " in StatusLine.line(1.0, 0, Counter(), 0, workload_cpu_s=0.5, processes=1) + " "


def test_update_on_a_pipe_prints_whole_lines():
    out = io.StringIO()
    StatusLine(stream=out, every_s=0).update(1.0, 0, Counter(), 2, workload_cpu_s=1.0, processes=2)
    assert out.getvalue() == "[dpuprof]    1.0s  workload 1.00 CPU-s in 2 processes  (psutil mode: no category split)  lost 2\n"


def test_update_on_a_tty_redraws_one_line_and_clear_erases_it():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    status = StatusLine(stream=out)
    status.update(1.0, 5, Counter({"network": 3}), 0)
    status.update(2.0, 9, Counter({"network": 3}), 0)
    status.clear()
    text = out.getvalue()
    assert "5 samples" in text and "9 samples" in text and "\r\x1b[2K" in text  # redrawn in place
    assert text.endswith("\x1b[2K") and not status._line.shown  # erased, nothing left running
