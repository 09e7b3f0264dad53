"""Unit tests: the perf-map parser and incremental reader, the trampoline return offset, and the
``python_frames`` meta line (dpuprof/record/stacks/perfmap.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dpuprof.record.stacks import perfmap
from dpuprof.record.stacks.perfmap import PerfMap, frame_name, parse_line, python_frames_status, return_offset


def test_parse_line():
    assert parse_line("7fadfcee9fdb b py::f:/x/y.py\n") == (0x7FADFCEE9FDB, 11, "py::f:/x/y.py")
    assert parse_line("7f00 10 py::<module>:<frozen importlib._bootstrap> extra") == (
        0x7F00, 16, "py::<module>:<frozen importlib._bootstrap> extra")
    for bad in ("", "7f00 b", "zz b py::f", "7f00 0 py::f", "7f00 b "):
        assert parse_line(bad) is None, bad


def test_frame_name_is_safe_in_folded_text():
    assert frame_name("py::a;b:/x.py") == "py::a:b:/x.py (perf-map)"


def test_incremental_reader_keeps_offset_and_waits_for_whole_lines(tmp_path):
    path = tmp_path / "perf-1.map"
    pm = PerfMap(1, str(path))
    assert not pm.refresh() and pm.lookup(0x1000) is None  # no file yet: not an error
    path.write_text("1000 b py::f:/a.py\n100b b py::g:/a.py\n1016 b py::h")  # h still being written
    assert pm.refresh()
    assert [e[2] for e in pm.entries] == ["py::f:/a.py", "py::g:/a.py"]
    assert pm.first == (0x1000, 11) and (pm.lo, pm.hi) == (0x1000, 0x1016)
    read_so_far = pm.offset
    with open(path, "a") as fh:
        fh.write(":/b.py\n0800 b py::early:/c.py\n")
    assert pm.refresh() and pm.offset > read_so_far
    assert pm.lookup(0x1016 + 6) == "py::h:/b.py"
    assert pm.lookup(0x0806) == "py::early:/c.py" and pm.lo == 0x0800
    assert pm.first == (0x1000, 11)  # the file's first entry, not the lowest address
    assert not pm.refresh()  # nothing new


def test_return_name_excludes_the_trampoline_start(tmp_path):
    path = tmp_path / "perf-2.map"
    path.write_text("1000 b py::f:/a.py\n")
    pm = PerfMap(2, str(path))
    pm.refresh()
    assert pm.return_name(0x1006) == "py::f:/a.py"
    assert pm.return_name(0x1000) is None  # a pointer to the trampoline, not a return address
    assert pm.return_name(0x100B) is None and pm.return_name(0xFFF) is None


def test_return_offset_of_cpython_trampolines():
    # CPython 3.12.1 and 3.13.0 x86-64 (read from the processes): sub $8,%rsp; call *%rcx; add $8,%rsp; ret
    assert return_offset(bytes.fromhex("4883ec08ffd14883c408c3")) == 6
    # a frame-pointer variant: push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret
    assert return_offset(bytes.fromhex("554889e5ffd15dc3")) == 6
    assert return_offset(b"\x90\x90\xc3") is None


def test_status_line(monkeypatch):
    assert python_frames_status([sys.executable], False) == "off: --no-python-frames"
    monkeypatch.setattr(perfmap, "interpreter_version", lambda exe, user=None: ("cpython", 3, 11))
    assert python_frames_status([sys.executable, "x.py"], True) == \
        "off: CPython 3.11 has no perf trampoline (needs >= 3.12)"
    monkeypatch.setattr(perfmap, "interpreter_version", lambda exe, user=None: ("cpython", 3, 12))
    assert python_frames_status([sys.executable], True).startswith("on (perf trampoline, CPython 3.12")
    assert python_frames_status(["true"], True).startswith("on where a CPython >= 3.12 process runs")
    monkeypatch.setattr(perfmap, "interpreter_version", lambda exe, user=None: None)
    assert python_frames_status([sys.executable], True).endswith("did not tell its version)")


def test_command_interpreter_reads_shebangs(tmp_path):
    script = tmp_path / "tool"
    script.write_text(f"#!/usr/bin/env -S {sys.executable} -u\nprint(1)\n")
    script.chmod(0o755)
    assert perfmap.command_interpreter([str(script)]) == sys.executable
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho\n")
    plain.chmod(0o755)
    assert perfmap.command_interpreter([str(plain)]) is None
    assert perfmap.command_interpreter(["no-such-command-dpuprof"]) is None


def test_stride_is_the_smallest_gap(tmp_path):
    path = tmp_path / "perf-3.map"
    path.write_text("1000 b py::a:/x.py\n")
    pm = PerfMap(3, str(path))
    pm.refresh()
    assert pm.stride() == 11  # one entry: its size
    with open(path, "a") as fh:  # CPython 3.13 pads its 11-byte trampolines to 16
        fh.write("1030 b py::b:/x.py\n1010 b py::c:/x.py\n")
    pm.refresh()
    assert pm.stride() == 16


class _StubSym:
    """Symbolizer stand-in: names two trampoline return addresses, like Symbolizer.python."""

    names = {0x1006: "py::outer:/a.py (perf-map)", 0x1011: "py::inner:/a.py (perf-map)"}

    def python(self, pid, addr):
        return self.names.get(addr)


def test_drain_orders_python_frames_outermost_first_and_drops_unnamed():
    from collections import defaultdict

    from dpuprof.record.drain.samples import SampleDrainer

    drainer = SampleDrainer(defaultdict(lambda: None), _StubSym(), classifier=None)
    scanned = [0x1011, 0x2000, 0x1006, 0, 0, 0, 0, 0]  # innermost first, as the probe stores them
    assert drainer._python(7, scanned) == ["py::outer:/a.py (perf-map)", "py::inner:/a.py (perf-map)"]


def test_remove_maps_takes_only_exited_processes_maps_written_during_the_recording(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = int(gone.stdout)  # exited and reaped: no /proc entry (unless the pid is reused at once)
    live = os.getpid()
    since = time.time() - 1.0  # file times come from the kernel's coarse clock: up to a tick behind
    for pid in (dead, live):
        (tmp_path / f"perf-{pid}.map").write_text("1000 b py::f:/a.py\n")
    older = dead + 1 if not os.path.exists(f"/proc/{dead + 1}") else dead + 2
    (tmp_path / f"perf-{older}.map").write_text("1000 b py::f:/a.py\n")
    os.utime(tmp_path / f"perf-{older}.map", (since - 60, since - 60))  # from before the recording
    target = tmp_path / "someone-elses-file"
    target.write_text("keep")
    link = older + 1 if not os.path.exists(f"/proc/{older + 1}") else older + 2
    (tmp_path / f"perf-{link}.map").symlink_to(target)
    assert perfmap.remove_maps({dead, live, older, link, 999999999}, since, str(tmp_path)) == [dead]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([f"perf-{live}.map", f"perf-{older}.map", f"perf-{link}.map", "someone-elses-file"])
    assert target.read_text() == "keep"
