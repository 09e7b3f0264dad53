"""MappedFiles (dpuprof/record/drain/mapped.py) on real processes: a process's maps are read at
first sight, not again while its executable mappings keep their size, again when it maps a library,
and in full every ``full_every`` calls; thread ids and exited processes are skipped."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from dpuprof.record.drain.mapped import MappedFiles
from dpuprof.record.workload import procfs

# The child maps one of these on request: the first the distribution has and a bare interpreter
# has not mapped.
LIBS = ("libgdbm.so.6", "libbz2.so.1.0", "liblzma.so.5")
CHILD = ("import ctypes, sys\n"
         "print('ready', flush=True)\n"
         "for line in sys.stdin:\n"
         "    ctypes.CDLL(line.strip())\n"
         "    print('loaded', flush=True)\n")


def _lib_dir() -> str:
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        if os.path.isdir(d):
            return d
    raise AssertionError("no library directory")


def test_code_size_is_the_processes_and_names_its_group():
    me = os.getpid()
    tgid, kb = procfs.code_size(me)
    with open(f"/proc/{me}/status") as fh:
        fields = dict(line.split(":", 1) for line in fh)
    assert tgid == me and kb == int(fields["VmExe"].split()[0]) + int(fields["VmLib"].split()[0]) > 0
    assert procfs.code_size(threading.get_native_id())[0] == me
    assert procfs.code_size(2 ** 22 + 1) is None


def test_maps_are_read_again_only_when_a_library_can_be_new():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        assert child.stdout.readline().strip() == "ready"
        watch = MappedFiles(full_every=4)
        pids = [child.pid, helper.native_id]  # a thread id among them, as the workload's ids hold
        first = watch.new_files(pids)  # call 1: read
        assert set(first) == {child.pid} and any("python" in f or "libc" in f for f in first[child.pid])
        assert helper.native_id in watch.skipped and watch.maps_read == 1
        assert watch.new_files(pids) == {} and watch.maps_read == 1  # call 2: nothing changed, not read
        lib = next(name for name in LIBS if os.path.exists(os.path.join(_lib_dir(), name))
                   and not any(os.path.basename(f).startswith(name.split(".so")[0] + ".so") for f in first[child.pid]))
        child.stdin.write(lib + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "loaded"
        got = watch.new_files(pids)  # call 3: the executable mappings grew: read, the library is new
        assert watch.maps_read == 2 and list(got) == [child.pid]
        assert any(os.path.basename(f).startswith(lib.split(".so")[0]) for f in got[child.pid]), got
        assert watch.new_files(pids) == {} and watch.maps_read == 3  # call 4: the full re-read, nothing new
    finally:
        stop.set()
        helper.join()
        child.stdin.close()
        child.wait(timeout=30)
    assert watch.new_files([child.pid]) == {} and child.pid in watch.skipped  # exited
    assert child.pid not in watch.files
