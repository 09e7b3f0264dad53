"""Unit tests of the uprobes module's pure parts: maps parsing, target matching, file dedup,
the clock offset, and dpuprof.mark_step()'s marker syscall."""

from __future__ import annotations

import errno
import os
import time

import pytest

from dpuprof.record.drain.maps import Cumulative
from dpuprof.record.drain import uprobes

MAPS = """\
55d0c0000000-55d0c0001000 r--p 00000000 fe:01 123 /usr/bin/python3.11
7f0000000000-7f0000100000 r-xp 00010000 fe:01 456 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13
7f0000100000-7f0000200000 r--p 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13
7f0000200000-7f0000300000 r-xp 00000000 fe:01 789 /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so
7f0000300000-7f0000400000 r-xp 00000000 fe:01 790 /tmp/old/libcrypto.so.3 (deleted)
7f0000400000-7f0000500000 rw-p 00000000 00:00 0
7f0000500000-7f0000600000 r-xp 00000000 fe:01 791 /usr/lib/x86_64-linux-gnu/libcrypto.so.3
7f0000600000-7f0000700000 r-xp 00000000 fe:01 792 /venv/site-packages/cryptography/hazmat/bindings/_rust.abi3.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
"""


def test_mapped_files_keeps_executable_files_only():
    files = uprobes.mapped_files(MAPS)
    assert files == {"/usr/lib/x86_64-linux-gnu/libz.so.1.2.13",
                     "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                     "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
                     "/venv/site-packages/cryptography/hazmat/bindings/_rust.abi3.so"}


def test_match_targets_pairs_each_target_with_its_library():
    got = {(t.name, p.rsplit("/", 1)[1]) for t, p in uprobes.match_targets(uprobes.mapped_files(MAPS))}
    assert got == {
        ("gloo::allreduce", "libtorch_cpu.so"), ("c10d::Reducer::prepare_for_backward", "libtorch_cpu.so"),
        ("libz:inflate", "libz.so.1.2.13"), ("libz:deflate", "libz.so.1.2.13"),
        ("libcrypto:EVP_EncryptUpdate", "libcrypto.so.3"), ("libcrypto:EVP_DecryptUpdate", "libcrypto.so.3"),
        ("cryptography_rust:EVP_EncryptUpdate", "_rust.abi3.so"),
        ("cryptography_rust:EVP_DecryptUpdate", "_rust.abi3.so")}


@pytest.mark.parametrize("path", ["/lib/libz.so.1", "/usr/lib/libz.so.1.3.1"])
def test_libz_names_match(path):
    assert [t.name for t, _ in uprobes.match_targets({path})] == ["libz:inflate", "libz:deflate"]


@pytest.mark.parametrize("path", ["/usr/lib/libzstd.so.1", "/usr/lib/libcrypto.so.1.1", "/x/libtorch_cpu.so.bak"])
def test_other_libraries_do_not_match(path):
    assert uprobes.match_targets({path}) == []


def test_new_files_drops_a_second_name_of_the_same_file(tmp_path):
    real = tmp_path / "libz.so.1.2.13"
    real.write_bytes(b"\x7fELF")
    link = tmp_path / "libz.so.1"
    link.symlink_to(real)
    session = object.__new__(uprobes.UprobeSession)  # no BPF needed for the file bookkeeping
    session.tried_inodes = set()
    first = session._new_files({str(real), str(link), str(tmp_path / "missing.so")})
    assert len(first) == 1
    assert session._new_files({str(link)}) == set()


def test_clock_offset_maps_monotonic_to_unix_time():
    offset = uprobes.clock_offset_s()
    assert abs(time.monotonic() + offset - time.time()) < 0.01


def test_mark_step_is_a_failing_getpgid_of_the_magic_pid():
    import dpuprof

    with pytest.raises(ProcessLookupError) as err:
        os.getpgid(dpuprof.marker.MARK_MAGIC)
    assert err.value.errno == errno.ESRCH  # so the marker never touches a real process
    assert dpuprof.mark_step() is None  # and mark_step swallows it


def test_magic_matches_the_bpf_source():
    from dpuprof.record.load.probes import probe_dir

    src = (probe_dir() / "uprobes.bpf.c").read_text()
    assert f"#define MARK_MAGIC ({uprobes.MARK_MAGIC})" in src


def test_over_limit_picks_the_hot_slots_only():
    assert uprobes.over_limit({1: 3000, 2: 100, 11: 0}, 1.5, 1000) == {1: 2000.0}
    assert uprobes.over_limit({1: 3000}, 0.0, 1000) == {}


def test_max_hits_per_s_reads_the_environment(monkeypatch):
    from dpuprof.errors import UserError

    monkeypatch.delenv(uprobes.MAX_HZ_ENV, raising=False)
    assert uprobes.max_hits_per_s() == uprobes.DEFAULT_MAX_HZ
    monkeypatch.setenv(uprobes.MAX_HZ_ENV, "250")
    assert uprobes.max_hits_per_s() == 250.0
    for bad in ("0", "-3", "fast", "nan"):
        monkeypatch.setenv(uprobes.MAX_HZ_ENV, bad)
        with pytest.raises(UserError):
            uprobes.max_hits_per_s()


def test_every_target_has_its_own_hit_slot():
    slots = [t.slot for t in uprobes.TARGETS]
    assert len(set(slots)) == len(slots) and all(0 <= s < 32 for s in slots)


class _Hits:
    """The BPF ``hits`` array: sum(slot) -> an object with ``value``."""

    def __init__(self, counts):
        self.counts = counts

    def sum(self, key):
        return type("V", (), {"value": self.counts.get(key.value, 0)})()


def test_a_detach_is_kept_with_its_times_and_said_once(monkeypatch):
    session = object.__new__(uprobes.UprobeSession)  # no BPF: the bookkeeping around _detach
    hot = next(t for t in uprobes.TARGETS if t.name == "libcrypto:EVP_EncryptUpdate")
    session.bpf = {"hits": _Hits({hot.slot: 68550})}
    session.targets, session.limit_hz = uprobes.TARGETS, 2000.0
    session.status = {t.name: uprobes.ATTACHED for t in uprobes.TARGETS}
    session.paths = {hot.name: ["/lib/libcrypto.so.3"]}
    session.attached_at, session.primed_at = {hot.name: 1000.0}, 1000.5
    session.detached, session.warnings = {}, []
    session.cum = {"hits": Cumulative()}
    session._detach = lambda target, path: None
    monkeypatch.setattr(uprobes.time, "monotonic", lambda: 11.0)
    monkeypatch.setattr(uprobes.time, "time", lambda: 1002.0)
    session.last_drain = 10.0
    assert session._detach_hot()
    assert session.status[hot.name].startswith("detached: 68550 calls/s, over the limit of 2000/s")
    assert session.meta()["uprobes_detached"] == {hot.name: {"from": 1000.5, "detached_at": 1002.0,
                                                             "calls_per_s": 68550.0, "limit_per_s": 2000.0}}
    (line,) = session.take_warnings()
    assert line.startswith("uprobe libcrypto:EVP_EncryptUpdate stopped early: detached after 1.5 s at "
                           "68550 calls/s (over the limit of 2000/s, DPUPROF_UPROBE_MAX_HZ)")
    assert session.take_warnings() == []
