"""The training workloads in examples/ run, stop and report steps/s (no root needed).

Each run uses tiny sizes so that it takes a few seconds, most of it spawning the two ranks and
importing torch. The tests exercise the real data paths: AES-GCM records, zlib, O_DIRECT reads
(falling back to posix_fadvise where the temp filesystem refuses O_DIRECT), and gloo all-reduce over
loopback TCP.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import children_of, poll_until

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train_ddp.py"
REGENERATE = REPO / "fixtures" / "regenerate"
PYTHON = os.path.realpath(sys.executable)
VARIANTS = ["plain", "encrypted", "compressed", "storage", "compute"]
TINY = ["--image-size", "64", "--crop", "32", "--hidden", "32", "--width", "32", "--layers", "1",
        "--batch-size", "4", "--shards", "4"]
LINE = re.compile(r"^steps_per_s=(\d+(\.\d+)?) steps=(\d+) duration_s=(\d+(\.\d+)?) variant=(\w+)$", re.M)

# Found, not imported: the examples run in subprocesses, and importing torch at collection would
# cost the pytest process seconds of CPU and its memory for the whole session.
_MISSING = [m for m in ("torch", "cryptography") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs {', '.join(_MISSING)}")


def train(*args, timeout=180, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, str(TRAIN), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, **kw)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_runs_and_prints_steps_per_s(variant, data_dir):
    proc = ok(train("--variant", variant, "--steps", "3", "--data-dir", data_dir, *TINY))
    m = LINE.search(proc.stdout)
    assert m, proc.stdout
    assert float(m.group(1)) > 0
    assert int(m.group(3)) == 3
    assert m.group(6) == variant
    # stdout carries the result only; diagnostics go to stderr
    assert proc.stdout.strip().splitlines() == [m.group(0)]


@pytest.mark.slow
def test_json_output_and_duration_stop(data_dir):
    # A short duration: the stop is decided by the ranks' all-reduced clock check, whatever the length
    # (two ranks training for 1.5 s cost the suite seconds of CPU and proved no more).
    duration = 0.5
    proc = ok(train("--variant", "storage", "--duration", duration, "--data-dir", data_dir, "--json",
                    "--io-size", "4096", *TINY))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["variant"] == "storage"
    assert result["steps"] >= 1
    assert result["duration_s"] >= duration - 0.01  # the stop check and the printed duration use two clock reads
    assert result["steps_per_s"] == pytest.approx(result["steps"] / result["duration_s"], rel=0.01)
    assert result["world_size"] == 2
    assert result["io_mode"] in ("o_direct", "fadvise_dontneed")
    assert result["file_bytes_per_step_per_rank"] > 0


def test_generate_only_writes_real_formats_and_is_reused(data_dir):
    """The shards are what they claim: raw payload, AES-GCM records that authenticate, zlib streams."""
    import zlib

    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    dirs = {}
    for variant in ("plain", "encrypted", "compressed"):
        proc = ok(train("--variant", variant, "--generate-only", "--data-dir", data_dir, *TINY, timeout=60))
        assert "generated" in proc.stderr
        again = ok(train("--variant", variant, "--generate-only", "--data-dir", data_dir, *TINY, timeout=60))
        assert "reusing" in again.stderr
        fmt = {"plain": "raw", "encrypted": "aesgcm", "compressed": "zlib"}[variant]
        (d,) = [p for p in data_dir.iterdir() if p.name.startswith(fmt + "-")]
        dirs[variant] = d

    manifest = json.loads((dirs["plain"] / "manifest.json").read_text())
    payload_len = manifest["payload_bytes"]
    assert payload_len == 4 * 8 + 4 * 64 * 64 * 4
    raw = (dirs["plain"] / manifest["files"][0]).read_bytes()
    assert len(raw) % 4096 == 0 and len(raw) >= payload_len  # padded for O_DIRECT

    zmanifest = json.loads((dirs["compressed"] / "manifest.json").read_text())
    blob = (dirs["compressed"] / zmanifest["files"][0]).read_bytes()
    inflated = zlib.decompress(blob)
    assert len(inflated) == payload_len and len(blob) < payload_len  # real redundancy
    assert inflated == raw[:payload_len]  # same seed, same samples

    emanifest = json.loads((dirs["encrypted"] / "manifest.json").read_text())
    name = emanifest["files"][0]
    blob = (dirs["encrypted"] / name).read_bytes()
    key = (dirs["encrypted"] / "key.bin").read_bytes()
    assert len(key) == 32  # AES-256
    assert (dirs["encrypted"] / "key.bin").stat().st_mode & 0o077 == 0
    aead = AESGCM(key)
    nonce, ct = blob[:12], blob[12:]
    assert len(ct) == payload_len + 16  # one record (payload < 1 MiB) plus its tag
    assert aead.decrypt(nonce, ct, f"{name}:0".encode()) == raw[:payload_len]
    assert raw[:payload_len] not in blob
    with pytest.raises(InvalidTag):
        aead.decrypt(nonce, ct[:-1] + bytes([ct[-1] ^ 1]), f"{name}:0".encode())


@pytest.mark.slow
def test_corrupt_ciphertext_fails_the_run(data_dir):
    ok(train("--variant", "encrypted", "--generate-only", "--data-dir", data_dir, *TINY, timeout=60))
    (d,) = data_dir.iterdir()
    for shard in d.glob("shard-*.bin"):
        b = bytearray(shard.read_bytes())
        b[100] ^= 0xFF
        shard.write_bytes(bytes(b))
    proc = train("--variant", "encrypted", "--steps", "2", "--data-dir", data_dir, *TINY)
    assert proc.returncode not in (0, None)
    assert "InvalidTag" in proc.stderr
    assert not LINE.search(proc.stdout)


def test_bad_arguments_exit_2():
    for args in (["--variant", "nope"], ["--steps", "0"], ["--io-size", "1000"],
                 ["--image-size", "16", "--crop", "32"]):
        proc = train(*args, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)


@pytest.mark.slow
def test_sigterm_stops_every_rank(tmp_path, data_dir):
    proc = subprocess.Popen([PYTHON, str(TRAIN), "--variant", "plain", "--duration", "120",
                             "--data-dir", str(data_dir), *TINY],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert poll_until(lambda: len(_ranks(proc.pid)) >= 2, timeout=60, every=0.5), "ranks did not start"
        children = _ranks(proc.pid)
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert poll_until(lambda: not any(_alive(pid) for pid in children), timeout=10), "ranks outlived the launcher"


def _ranks(pid: int) -> list[int]:
    """The launcher's rank processes (not multiprocessing's resource tracker)."""
    ranks = []
    for child in children_of(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"resource_tracker" not in f.read():
                    ranks.append(child)
        except OSError:
            pass
    return ranks


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
def test_runs_under_torchrun(data_dir):
    proc = subprocess.run(["torchrun", "--nproc-per-node", "2", str(TRAIN), "--variant", "compressed",
                           "--steps", "2", "--data-dir", str(data_dir), *TINY],
                          capture_output=True, text=True, timeout=180, cwd=REPO)
    ok(proc)
    m = LINE.search(proc.stdout)
    assert m and m.group(6) == "compressed" and int(m.group(3)) == 2


def test_regenerate_refuses_non_root_and_bad_usage():
    assert os.access(REGENERATE, os.X_OK)
    proc = subprocess.run([str(REGENERATE), "no-such-scenario"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "unknown scenario" in proc.stderr
    proc = subprocess.run([str(REGENERATE), "--long-duration", "soon"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2
    help_ = subprocess.run([str(REGENERATE), "--help"], capture_output=True, text=True, timeout=30)
    assert help_.returncode == 0
    for scenario in ("ddp-plain", "ddp-encrypted", "ddp-compressed", "storage-heavy", "compute-bound", "long"):
        assert scenario in help_.stdout
    if os.geteuid() == 0:
        # Drop to an unprivileged user where we can, to check the root-only refusal itself.
        runuser = shutil.which("runuser") or shutil.which("setpriv")
        if runuser is None:
            pytest.skip("root, and neither runuser nor setpriv to drop privileges")
        if os.path.basename(runuser) == "runuser":
            cmd = [runuser, "-u", "nobody", "--", str(REGENERATE), "ddp-plain"]
        else:
            cmd = [runuser, "--reuid=65534", "--regid=65534", "--clear-groups", str(REGENERATE), "ddp-plain"]
    else:
        cmd = [str(REGENERATE), "ddp-plain"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "root" in proc.stderr
