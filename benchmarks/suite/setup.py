"""Set-up before measuring: the tools installed with apt-get, and the scratch inputs (fio's file,
pigz's text, the DDP shards) written once and reused."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

from .config import PYTHON, ROOT, TOOLS, Config, log


def ensure_tools(install: bool) -> list[str]:
    """Install missing tools with apt-get (root, Debian); return those still missing."""
    missing = [b for b in TOOLS if shutil.which(b) is None]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        pkgs = sorted({TOOLS[b] for b in missing})
        log(f"installing {' '.join(pkgs)} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", *pkgs]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
    return [b for b in TOOLS if shutil.which(b) is None]



def make_fio_file(path: Path, size: int = 256 << 20) -> None:
    """Random bytes (incompressible, and never in the page cache for O_DIRECT reads), for fio."""
    if path.exists() and path.stat().st_size == size:
        return
    log(f"writing {path} ({size >> 20} MiB, for fio's O_DIRECT reads)")
    with open(path, "wb") as fh:
        for _ in range(size >> 20):
            fh.write(os.urandom(1 << 20))
        fh.flush()
        os.fsync(fh.fileno())


def make_text_file(path: Path, size: int = 256 << 20) -> None:
    """Compressible text (random words, about 3:1 with deflate), for pigz."""
    if path.exists() and path.stat().st_size == size:
        return
    log(f"writing {path} ({size >> 20} MiB of text, for pigz)")
    rng = random.Random(7)
    alphabet = "etaoinshrdlcumwfgypbvkjxqz"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 10))) for _ in range(20000)]
    chunk = " ".join(rng.choice(words) for _ in range(800_000)).encode()[: 4 << 20]
    with open(path, "wb") as fh:
        written = 0
        while written < size:
            # Rotate the chunk so no two 32 KiB windows repeat exactly (deflate's window).
            k = rng.randrange(len(chunk))
            piece = (chunk[k:] + chunk[:k])[: size - written]
            fh.write(piece)
            written += len(piece)


def ddp_data(scratch: Path, cfg: Config) -> Path:
    """The DDP training's shards under ``scratch``/ddp (train_ddp.py --generate-only reuses them)."""
    data = scratch / "ddp"
    cmd = [PYTHON, str(ROOT / "examples" / "train_ddp.py"), "--variant", "plain", "--generate-only",
           "--data-dir", str(data), *cfg.ddp_extra]
    log("preparing the DDP shards (reused when present)")
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return data

