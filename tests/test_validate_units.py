"""Pure parts of the validation benchmark (benchmarks/validation/) and of the emulation flags it
adds to examples/train_ddp.py, on hand-derivable cases. The end-to-end run is test_validate_quick."""

from __future__ import annotations

import importlib.util
import subprocess

import pytest

from conftest import PYTHON, REPO

from validation import cells, report, runner, stats  # noqa: E402

spec = importlib.util.spec_from_file_location("train_ddp", REPO / "examples" / "train_ddp.py")
train_ddp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train_ddp)

TINY = ["--image-size", "64", "--crop", "32", "--batch-size", "4", "--shards", "2"]


def test_median_ci_is_seeded_and_brackets_the_median():
    v = [1.0, 1.2, 1.1, 1.3, 0.9]
    a, b = stats.median_ci(v, seed=3), stats.median_ci(v, seed=3)
    assert a == b
    assert a["median"] == 1.1
    assert 0.9 <= a["ci_low"] <= 1.1 <= a["ci_high"] <= 1.3  # bootstrap medians are sample values
    assert a["ci_half_width"] == pytest.approx((a["ci_high"] - a["ci_low"]) / 2)
    same = stats.median_ci([1.25] * 5)
    assert same["ci_low"] == same["ci_high"] == 1.25 and same["ci_half_width"] == 0
    assert stats.ratios([{"a": 2.0, "b": 3.0}]) == [1.5]


def test_judge_targets():
    ci = {"ci_low": 1.28, "ci_high": 1.32, "ci_half_width": 0.02}
    ok = report.judge(1.30, ci, {"expected": 1.33, "low": 1.0, "high": 1.40, "contention_proxy": 1.60})
    assert ok["in_range"] and ok["close"] and ok["passed"]  # 0.03 <= 5 % of 1.30 = 0.065
    assert ok["proxy_close"] is False  # the proxy misses by 0.30
    wide = report.judge(1.30, {"ci_low": 1.0, "ci_high": 1.6, "ci_half_width": 0.3},
                        {"expected": 1.55, "low": 1.0, "high": None, "contention_proxy": 1.55})
    assert wide["close"] and wide["in_range"]  # tolerance = CI half-width 0.3; high None = unbounded
    out = report.judge(0.98, ci, {"expected": 1.0, "low": 1.0, "high": 1.5, "contention_proxy": 1.5})
    assert out["in_range"] is False and out["close"] and out["passed"] is False
    placebo = report.judge(1.01, {"ci_low": 0.97, "ci_high": 1.04, "ci_half_width": 0.035},
                           {"expected": 1.0, "low": 1.0, "high": 1.0, "contention_proxy": 1.0}, placebo=True)
    assert placebo["passed"]
    assert report.judge(1.2, ci, {})["passed"] is None  # no model: not judged


def test_one_category_profile_loads_and_offloads_only_that_category(tmp_path):
    from dpuprof.project import load_profile

    path = runner.one_category_profile("storage", {}, tmp_path / "p.toml")
    prof = load_profile(str(path))
    text = path.read_text()
    assert 'applies_to = ["storage.*"]' in text and "crypto.*" not in text
    assert prof is not None
    eng = runner.one_category_profile("crypto", {"mode": "sync", "L_ns": 50000, "n_from": "cpu_chunks",
                                                 "chunk_bytes": 1048576, "host_bytes_per_cpu_s": 9e9},
                                      tmp_path / "e.toml")
    from dpuprof.tomlcompat import tomllib

    mech = tomllib.loads(eng.read_text())["mechanism"][0]
    assert mech["mode"]["value"] == "sync" and mech["L_ns"]["value"] == 50000
    assert mech["n_from"] == "cpu_chunks" and mech["chunk_bytes"]["value"] == 1048576
    load_profile(str(eng))


def test_speedup_fields_fall_back_to_expected_as_the_proxy():
    f = runner.speedup_fields({"speedup": {"low": 1.0, "expected": 1.2, "high": 1.3}})
    assert f["contention_proxy"] == 1.2 and f["regime"] is None
    g = runner.speedup_fields({"speedup": {"low": 1.0, "expected": 1.0, "high": 1.3, "regime": "worker with slack",
                                           "contention_proxy": 1.5}})
    assert g["contention_proxy"] == 1.5 and g["regime"] == "worker with slack"


def test_cell_selection():
    assert [c.id for c in cells.select(True, False)] == ["a_keeps_up", "c_inline_w1"]
    full = cells.select(False, False)
    assert len(full) == len({c.id for c in full}) >= 10
    assert {c.category for c in full} == {"crypto", "storage", "network", None}
    assert len(cells.select(False, True)) == len(full) + 2
    with pytest.raises(ValueError):
        cells.select(False, False, ["nope"])
    for c in full:
        assert c.args("a") != c.args("b") or c.category is None  # only the placebo is A/A


def test_train_ddp_cpu_lists_and_steady_rate():
    assert train_ddp.parse_cpus("0-1,3") == [{0, 1, 3}]
    assert train_ddp.parse_cpus("0/1") == [{0}, {1}]
    with pytest.raises(ValueError):
        train_ddp.parse_cpus("2-1")
    r = train_ddp.steady_rate([0.5, 1.0, 2.0, 3.0, 4.0], warmup_s=1.5)
    assert r["steady_steps"] == 2 and r["steady_s"] == 2.0 and r["steady_steps_per_s"] == 1.0
    assert train_ddp.steady_rate([0.5], warmup_s=1.0)["steady_steps_per_s"] is None


def test_train_ddp_emulation_arguments():
    a = train_ddp.parse_args(["--variant", "encrypted", "--emulate", "crypto=latency:25",
                              "--emulate", "allreduce=local"])
    assert a.emu == {"crypto": ("latency", 25.0), "allreduce": ("local", None)}
    assert train_ddp.parse_args([]).emu == {}  # the default run emulates nothing
    for bad in (["--emulate", "crypto=remove"], ["--variant", "encrypted", "--emulate", "crypto=async"],
                ["--variant", "storage", "--emulate", "storage=remove:3"], ["--workers", "0", "--pin-workers", "0"]):
        proc = subprocess.run([PYTHON, str(REPO / "examples" / "train_ddp.py"), *bad], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and "error:" in proc.stderr, bad


@pytest.fixture
def shards(tmp_path):
    cmd = [PYTHON, str(REPO / "examples" / "train_ddp.py"), "--variant", "encrypted", "--emulate", "crypto=remove",
           "--generate-only", "--data-dir", str(tmp_path), *TINY]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    args = train_ddp.parse_args(["--variant", "encrypted", "--data-dir", str(tmp_path), *TINY])
    enc = train_ddp.format_dir(str(tmp_path), args)
    return enc, train_ddp.format_dir(str(tmp_path), train_ddp.plain_twin(args)), train_ddp.read_manifest(enc)


def _dataset(shards, emu, clock=None):
    enc, plain, manifest = shards
    timing = {"clock": clock, "sleep": clock.sleep} if clock else {}
    return train_ddp.ShardDataset(enc, manifest, "encrypted", 32, 4096, 0, emu=emu, plain_dir=plain, **timing)


def _plaintexts(shards):
    real = _dataset(shards, None)
    out = []
    for i in range(2):
        out.append(bytes(real._decrypt(i, real._read_mapped(i))))
        real._map.close()
    return out


def _call(ds, i, n):
    got = bytes(ds._emulated_decrypt(i)[:n])
    ds._map.close()
    return got


@pytest.mark.parametrize("mode", ["remove", "copy"])
def test_crypto_emulation_hands_back_the_decrypted_bytes(shards, mode):
    plain = _plaintexts(shards)
    emu = _dataset(shards, {"crypto": (mode, None)})
    for i in range(2):
        assert _call(emu, i, len(plain[i])) == plain[i]  # the same plaintext, without the cipher
    assert (emu._plain_buf is not None) == (mode == "copy")  # remove: no copy into a buffer


class FakeClock:
    """A clock (seconds) that only ``sleep`` and ``advance`` move; ``slept`` lists each sleep."""

    def __init__(self):
        self.now, self.slept = 100.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s

    def advance(self, s: float) -> None:
        self.now += s


def test_crypto_latency_waits_on_the_caller_and_async_overlaps(shards):
    plain = _plaintexts(shards)
    n = len(plain[0])
    wait = 0.1 * len(train_ddp.records(shards[2]["payload_bytes"]))  # 100 ms per record
    clock = FakeClock()
    sync = _dataset(shards, {"crypto": ("latency", 100000.0)}, clock)
    assert _call(sync, 1, n) == plain[1]
    assert clock.slept == [pytest.approx(wait)]  # the whole wait, on the caller, in one sleep
    clock = FakeClock()
    asy = _dataset(shards, {"crypto": ("async", 100000.0)}, clock)
    assert _call(asy, 0, n) == plain[0]  # primes the pipeline: served in line
    assert clock.slept == [pytest.approx(wait)]
    clock.advance(1.2 * wait)  # the rank's step: the engine finishes meanwhile
    got = _call(asy, 1, n)  # consumes the request made one call earlier
    assert clock.slept == [pytest.approx(wait)]  # no wait left
    assert got == plain[0]
    clock.advance(0.1 * wait)
    assert _call(asy, 0, n) == plain[1]  # and now shard 1's, with the rest of its wait
    assert clock.slept == [pytest.approx(wait), pytest.approx(0.9 * wait)]


def test_workers_0_reads_on_the_rank_thread():
    """--workers 0 (the inline cells): train_ddp's DataLoader settings call the dataset on the
    iterating (rank) thread, in the rank's process."""
    import os
    import threading

    import torch

    seen = []

    class Probe:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            seen.append((os.getpid(), threading.get_ident()))
            return torch.zeros(1)

    loader = torch.utils.data.DataLoader(Probe(), batch_size=None, num_workers=0, persistent_workers=False,
                                         prefetch_factor=None, multiprocessing_context=None)
    assert len(list(loader)) == 3
    assert set(seen) == {(os.getpid(), threading.get_ident())}
