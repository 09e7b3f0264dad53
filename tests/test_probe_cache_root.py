"""Root tests of the probe cache (dpuprof/record/load/probe_cache.py): an entry the compile child
made is stored, a later start loads it without a compiler and gets what the compiled start got,
and a damaged, foreign or stale entry is never used."""

from __future__ import annotations

import base64
import json
import os
import stat
import time

import pytest

from conftest import open_fds

pytestmark = pytest.mark.root

WANTED = ["proc_tree", "cpu_sample", "sched_wait", "softirq", "uprobes"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    from dpuprof.record.load import probe_cache

    where = tmp_path / "probe-cache"
    monkeypatch.setenv(probe_cache.ENV, str(where))
    return where


def _shape(bpf) -> dict:
    """What a load made, by name: maps with their type and size, programs, attachments."""
    return {"maps": sorted((name, type(t).__name__, t.max_entries) for name, t in bpf.maps.items()),
            "funcs": sorted(bpf.programs), "tracepoints": sorted(bpf.tracepoints), "raw": sorted(bpf.raw_tracepoints)}


def _no_fork(monkeypatch):
    def refuse():
        raise AssertionError("a cache hit must not fork a compile child")

    monkeypatch.setattr(os, "fork", refuse)


def test_a_stored_load_is_replayed_without_a_compile_and_works(cache, monkeypatch):
    from dpuprof.record.load import probes
    from dpuprof.record.load.bcc_loader import import_bcc

    bcc = import_bcc()
    before = open_fds()
    t0 = time.monotonic()
    first, used, unavailable = probes.load(bcc.BPF, WANTED)
    compiled_s = time.monotonic() - t0
    try:
        shape, hooks = _shape(first), probes.hooks(first)
    finally:
        first.close()
    (entry,) = cache.iterdir()
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(cache.stat().st_mode) == 0o700
    with monkeypatch.context() as m:
        _no_fork(m)
        t0 = time.monotonic()
        bpf, used2, unavailable2 = probes.load(bcc.BPF, WANTED)
        replayed_s = time.monotonic() - t0
    print(f"compiled in {compiled_s:.2f} s, replayed in {replayed_s:.2f} s")
    try:
        assert (used2, unavailable2) == (used, unavailable) and sorted(used) == sorted(WANTED)
        assert _shape(bpf) == shape and probes.hooks(bpf) == hooks
        assert not any(os.get_inheritable(fd) for fd in open_fds() - before)  # the command inherits no probe
        tree = bpf["tree"]
        tree[tree.Key(os.getpid())] = tree.Leaf(0)
        pid = os.fork()  # the replayed fork tracepoint follows this fork
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        assert tree[tree.Key(pid)].value == os.getpid()
        threads = bpf["sw_threads"]
        assert threads[threads.Key(pid)].exit_ts > 0  # sched_wait's switch program saw it exit
        bpf.attach_perf_event("on_sample", bcc.PerfType.SOFTWARE, bcc.PerfSWConfig.CPU_CLOCK, 99)
        end = time.time() + 0.5
        while time.time() < end:
            pass  # on-CPU, so the sampler fires
        assert len(list(bpf["counts"].items())) > 0
        assert bpf.program("on_ddp_step") >= 0  # the kprobe-type copy, from the bytecode
    finally:
        bpf.close()
    assert open_fds() - before == set()


def test_a_damaged_or_foreign_entry_is_not_used_and_is_replaced(cache, monkeypatch):
    from dpuprof.record.load import probe_cache, probes
    from dpuprof.record.load.bcc_loader import import_bcc

    bcc = import_bcc()
    probes.load(bcc.BPF, ["proc_tree"])[0].close()
    (entry,) = cache.iterdir()
    doc = json.loads(entry.read_text())
    doc["funcs"][-1][2] = base64.b64encode(bytes(8)).decode()  # the maps load, then a program is refused
    entry.write_text(json.dumps(doc))
    before = open_fds()
    bpf = probes.load(bcc.BPF, ["proc_tree"])[0]  # compiled again
    bpf.close()
    assert open_fds() - before == set()  # what the failed replay made is closed
    hit = probe_cache.read(cache, entry.stem)  # the compile stored a good entry again
    assert hit is not None and hit["funcs"]
    loaded = probe_cache.load(hit)
    assert len(loaded.programs) == len(hit["funcs"])
    loaded.close()
    os.chmod(entry, 0o666)  # writable by anyone: never loaded into the kernel
    assert probe_cache.read(cache, entry.stem) is None
    os.chmod(entry, 0o600)
    os.chmod(cache, 0o777)
    assert probe_cache.read(cache, entry.stem) is None


def test_the_key_follows_what_the_load_depends_on(cache, monkeypatch):
    from dpuprof.record.load import probe_cache
    from dpuprof.record.load.probes import cache_key

    key = cache_key(["proc_tree", "cpu_sample"])
    assert key == cache_key(["cpu_sample", "proc_tree"])
    assert key != cache_key(["proc_tree"])
    monkeypatch.setenv("DPUPROF_MAP_ENTRIES", "counts=1024")
    assert key != cache_key(["proc_tree", "cpu_sample"])
    monkeypatch.delenv("DPUPROF_MAP_ENTRIES")
    monkeypatch.setenv(probe_cache.ENV, "/elsewhere")  # where the cache is does not change what is in it
    assert key == cache_key(["proc_tree", "cpu_sample"])
    monkeypatch.setenv(probe_cache.ENV, "relative/path")
    assert probe_cache.directory() is None


def test_the_cache_is_on_by_default_in_the_users_home_and_off_on_request(monkeypatch):
    import pwd
    from pathlib import Path

    from dpuprof.record.load import probe_cache

    monkeypatch.delenv(probe_cache.ENV, raising=False)
    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    assert probe_cache.directory() == home / ".cache" / "dpuprof" / "probes"
    monkeypatch.setenv(probe_cache.ENV, "off")
    assert probe_cache.directory() is None
    monkeypatch.delenv(probe_cache.ENV)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)  # an arbitrary uid in a container
    assert probe_cache.directory() is None


def test_only_the_newest_entries_are_kept(tmp_path):
    from dpuprof.record.load import probe_cache

    where = tmp_path / "cache"
    for i in range(probe_cache.KEEP + 2):
        probe_cache.store(where, f"k{i}", {"format": probe_cache.FORMAT, "i": i})
        os.utime(where / f"k{i}.json", (1000 + i, 1000 + i))  # stored one after the other
    probe_cache.store(where, "k0", {"format": probe_cache.FORMAT, "i": 0})  # used again: newest now
    kept = {p.stem for p in where.glob("*.json")}
    assert len(kept) == probe_cache.KEEP and "k0" in kept and "k1" not in kept and "k2" not in kept
    assert probe_cache.read(where, "k0") == {"format": probe_cache.FORMAT, "i": 0}
    (where / "k5.json").write_text('{"format": 0}')  # another format: removed, not used
    assert probe_cache.read(where, "k5") is None and not (where / "k5.json").exists()
