#!/usr/bin/env python3
"""Data-parallel training on CPU whose data path you choose: the workload behind dpuprof's fixtures.

Two ranks train an MLP with PyTorch DistributedDataParallel (DDP). The gloo backend all-reduces the
gradients over loopback TCP, so the traffic goes through the kernel network stack. Each rank has a
``torch.utils.data.DataLoader`` whose worker processes read the training shards from files on disk.
``--variant`` chooses how the shards are stored and read:

    plain       raw float32 shards, memory-mapped from the page cache (as Arrow/HF datasets do)
    encrypted   the same volume as plain, stored as AES-256-GCM records (1 MiB each), decrypted in
                the loader with the ``cryptography`` package
    compressed  zlib-compressed shards, inflated in the loader
    storage     raw shards read with O_DIRECT in small (16 KiB), aligned, random-order reads, so every
                read reaches the block device (falls back to posix_fadvise(DONTNEED) plus buffered
                reads where O_DIRECT is refused, e.g. on tmpfs)
    compute     a compute-bound baseline: a wider, deeper model, a small dataset kept in memory, and
                gradient accumulation, so there is little IO and one all-reduce per two micro-batches

Stored samples are larger than what the model sees (``--image-size`` against ``--crop``), like
full-resolution images cropped for training: the loader reads, decrypts or inflates every stored
byte, and the model gets a random crop.

The shards are written to ``--data-dir`` (default: a temporary directory, removed at the end) before
training starts. Generation is not timed, and a data directory whose manifest matches the requested
sizes is reused, so ``--generate-only`` can prepare it ahead of a recording.

Run it directly (it starts its ranks itself with torch.multiprocessing)::

    python3 examples/train_ddp.py --variant encrypted --duration 20

or under torchrun, which starts the ranks and sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT::

    torchrun --nproc-per-node 2 examples/train_ddp.py --variant encrypted --duration 20

At the end rank 0 prints one line to stdout (``--json``: one JSON object instead)::

    steps_per_s=4.12 steps=83 duration_s=20.1 variant=encrypted

Progress and diagnostics go to stderr. The exit status is 0 on success and non-zero on failure
(2 for bad arguments, 128+N when stopped by signal N).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import functools
import gc
import json
import mmap
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import warnings
import zlib

VARIANTS = ("plain", "encrypted", "compressed", "storage", "compute")

# Which on-disk format each variant reads. plain and storage share the raw shards: they differ only in
# how they read them (page cache against O_DIRECT).
FORMAT_OF = {
    "plain": "raw",
    "storage": "raw",
    "encrypted": "aesgcm",
    "compressed": "zlib",
    "compute": "memory",
}

# Default sizes per variant, tuned on a 2-core VM (AVX-512 + VAES, virtio-blk) so that each variant's
# signature (network, crypto, compression, storage, compute) is a clear share of CPU while a step stays
# well under a second.
#   image    side of a stored sample (image x image float32 values)
#   crop     side of the random crop the model sees (model input = crop * crop features). Like
#            full-resolution images cropped for training: the loader reads, decrypts or inflates every
#            stored byte (GCM authenticates the whole record), then the model sees the crop.
#   hidden   width of the first (bottleneck) layer; then `layers` layers of `width`
#   batch    samples per micro-batch; one shard file holds one micro-batch
#   shards   shard files in total (split across ranks); compute: batches of samples kept in memory
#   accum    micro-batches per optimizer step (DDP all-reduces once per step)
# plain and encrypted read the same bytes, so their difference in steps/s is the cost of decryption.
# AES-GCM with VAES runs at ~10-14 GB/s per core, so only a large volume (~100 MB per step per rank)
# makes its share visible; zlib inflates at ~0.2 GB/s and 16 KiB O_DIRECT reads cost several us of CPU
# each, so those variants read far less.
_MODEL = dict(crop=128, hidden=384, width=1536, layers=2, batch=16, shards=16, accum=1, workers=1)
DEFAULTS = {
    "plain": dict(_MODEL, image=1280),
    "encrypted": dict(_MODEL, image=1280),
    "compressed": dict(_MODEL, image=256),
    "storage": dict(_MODEL, image=512),
    "compute": dict(image=32, crop=32, hidden=1536, width=1536, layers=3, batch=256, shards=16, accum=2,
                    workers=1),
}

NUM_CLASSES = 10
ALIGN = 4096  # O_DIRECT alignment: file offsets, sizes and buffers are multiples of this
RECORD_BYTES = 1 << 20  # encrypted: each 1 MiB of a shard is its own AES-GCM record (nonce, tag)
NONCE, TAG = 12, 16
MANIFEST_VERSION = 2


def log(msg: str) -> None:
    print(f"[train_ddp] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Arguments


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="CPU DDP training (gloo over loopback TCP) with a selectable data path.",
        epilog="Sizes default per variant; see the DEFAULTS table at the top of this file.",
    )
    p.add_argument("--variant", choices=VARIANTS, default="plain")
    p.add_argument("--steps", type=int, default=None, help="stop after N optimizer steps")
    p.add_argument("--duration", type=float, default=None,
                   help="stop after S seconds of training (default 20 when --steps is not given)")
    p.add_argument("--batch-size", type=int, default=None, help="samples per micro-batch and shard")
    p.add_argument("--workers", type=int, default=None, help="DataLoader worker processes per rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None,
                   help="where shards live; reused when its manifest matches (default: a temp dir, "
                        "removed at exit)")
    p.add_argument("--generate-only", action="store_true",
                   help="write the shards for --variant into --data-dir and exit")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--world-size", type=int, default=2, help="ranks to spawn (ignored under torchrun)")
    p.add_argument("--master-port", type=int, default=0, help="rendezvous port (default: a free one)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    # Sizes: defaults depend on the variant.
    p.add_argument("--image-size", type=int, default=None, help="side of a stored sample")
    p.add_argument("--crop", type=int, default=None, help="side of the crop the model sees")
    p.add_argument("--hidden", type=int, default=None, help="width of the first (bottleneck) layer")
    p.add_argument("--width", type=int, default=None, help="width of the further hidden layers")
    p.add_argument("--layers", type=int, default=None, help="number of further hidden layers")
    p.add_argument("--shards", type=int, default=None, help="shard files in total")
    p.add_argument("--accum", type=int, default=None, help="micro-batches per optimizer step")
    p.add_argument("--io-size", type=int, default=16 * 1024,
                   help="storage: bytes per O_DIRECT read, a multiple of 4096 (default 16384)")
    p.add_argument("--zlib-level", type=int, default=1,
                   help="compressed: zlib level used when writing shards (default 1: fast to write, "
                        "and the costliest to inflate per output byte)")
    p.add_argument("--lr", type=float, default=0.01, help="SGD learning rate")
    p.add_argument("--timeout", type=float, default=600, help="collective timeout in seconds")
    p.add_argument("--mark-step", action="store_true",
                   help="call dpuprof.mark_step() at each optimizer step (markers for dpuprof record)")
    # Validation of dpuprof's projection (benchmarks/validate_projection.py): placement and emulated
    # offloads. None of these changes the default run.
    p.add_argument("--pin-ranks", metavar="CPUS", default=None,
                   help="pin every rank to CPUS (e.g. 0 or 0-1,3); 'A/B' gives rank r the set r mod 2")
    p.add_argument("--pin-workers", metavar="CPUS", default=None,
                   help="pin each rank's DataLoader workers to CPUS; 'A/B' gives rank r's workers set "
                        "r mod 2")
    p.add_argument("--emulate", metavar="KIND=MODE", action="append", default=[],
                   help="emulate an offload (repeatable): crypto=remove | crypto=copy | "
                        "crypto=latency:US | crypto=async:US (encrypted), storage=remove | "
                        "storage=pagecache (storage), "
                        "allreduce=local")
    p.add_argument("--warmup-s", type=float, default=2.0,
                   help="seconds at the start excluded from the steady window (steady_steps_per_s)")
    args = p.parse_args(argv)

    d = DEFAULTS[args.variant]
    for name, key in (("image_size", "image"), ("crop", "crop"), ("hidden", "hidden"),
                      ("width", "width"), ("layers", "layers"), ("batch_size", "batch"),
                      ("shards", "shards"), ("accum", "accum"), ("workers", "workers")):
        if getattr(args, name) is None:
            setattr(args, name, d[key])
    if args.variant == "compute":
        args.crop = args.image_size  # whole in-memory samples, no crop
    if args.steps is None and args.duration is None:
        args.duration = 20.0
    errors = []
    for name in ("image_size", "crop", "hidden", "width", "batch_size", "shards", "accum",
                 "world_size", "threads"):
        if getattr(args, name) < 1:
            errors.append(f"--{name.replace('_', '-')} must be >= 1")
    if args.layers < 0:
        errors.append("--layers must be >= 0")
    if args.crop > args.image_size:
        errors.append("--crop must not exceed --image-size")
    if args.workers < 0:
        errors.append("--workers must be >= 0")
    if args.steps is not None and args.steps < 1:
        errors.append("--steps must be >= 1")
    if args.duration is not None and args.duration <= 0:
        errors.append("--duration must be > 0")
    if args.io_size < ALIGN or args.io_size % ALIGN:
        errors.append(f"--io-size must be a positive multiple of {ALIGN}")
    if not 0 <= args.zlib_level <= 9:
        errors.append("--zlib-level must be 0..9")
    if args.warmup_s < 0:
        errors.append("--warmup-s must be >= 0")
    errors += check_placement(args)
    errors += check_emulation(args)
    if errors:
        p.error("; ".join(errors))
    return args


def parse_cpus(spec: str) -> list[set[int]]:
    """'0-1,3' -> [{0, 1, 3}]; '0/1' -> [{0}, {1}] (one set per rank, rank r takes set r mod n)."""
    sets = []
    for part in spec.split("/"):
        cpus = set()
        for item in part.split(","):
            lo, _, hi = item.strip().partition("-")
            a, b = int(lo), int(hi or lo)  # ValueError on junk
            if a < 0 or b < a:
                raise ValueError(item)
            cpus.update(range(a, b + 1))
        sets.append(cpus)
    return sets


def check_placement(args) -> list[str]:
    errors = []
    for name in ("pin_ranks", "pin_workers"):
        spec = getattr(args, name)
        if spec is None:
            continue
        flag = f"--{name.replace('_', '-')}"
        try:
            sets = parse_cpus(spec)
        except ValueError:
            errors.append(f"{flag} {spec!r}: use a CPU list such as 0, 0-1,3 or 0/1")
            continue
        avail = os.sched_getaffinity(0)
        if any(not cpus <= avail for cpus in sets):
            errors.append(f"{flag} {spec!r}: CPUs outside this process's set {sorted(avail)}")
        setattr(args, name + "_sets", sets)
    if args.pin_workers is not None and args.workers == 0:
        errors.append("--pin-workers needs --workers >= 1")
    return errors


# Which variant each emulation applies to (None: any).
EMULATIONS = {"crypto": ("encrypted", ("remove", "copy", "latency", "async")),
              "storage": ("storage", ("remove", "pagecache")),
              "allreduce": (None, ("local",))}


def check_emulation(args) -> list[str]:
    """Parse --emulate KIND=MODE[:US] into args.emu = {kind: (mode, wait_us)}."""
    errors, args.emu = [], {}
    for spec in args.emulate:
        kind, _, rest = spec.partition("=")
        mode, _, us = rest.partition(":")
        if kind not in EMULATIONS or mode not in EMULATIONS[kind][1]:
            errors.append(f"--emulate {spec!r}: use crypto=remove|copy|latency:US|async:US, "
                          "storage=remove|pagecache or allreduce=local")
            continue
        variant = EMULATIONS[kind][0]
        if variant is not None and args.variant != variant:
            errors.append(f"--emulate {spec!r} needs --variant {variant}")
        wait_us = None
        if mode in ("latency", "async"):
            try:
                wait_us = float(us)
            except ValueError:
                wait_us = -1.0
            if not wait_us >= 0:
                errors.append(f"--emulate {spec!r}: {mode} needs a wait in microseconds, e.g. {mode}:100")
        elif us:
            errors.append(f"--emulate {spec!r}: {mode} takes no value")
        if kind in args.emu:
            errors.append(f"--emulate {kind}= given twice")
        args.emu[kind] = (mode, wait_us)
    return errors


def plain_twin(args) -> argparse.Namespace:
    """The arguments of the raw-format shards that hold the same plaintext as args' encrypted ones
    (the generator draws the same samples for every format given the same sizes and seed)."""
    return argparse.Namespace(**dict(vars(args), variant="plain"))


# --------------------------------------------------------------------------------------------------
# Data: generation and manifest


def payload_bytes(image: int, batch: int) -> int:
    """One shard's plaintext: int64 labels, then float32 images (labels first keeps both aligned)."""
    return batch * 8 + batch * image * image * 4


def format_params(args) -> dict:
    fmt = FORMAT_OF[args.variant]
    params = {
        "manifest_version": MANIFEST_VERSION,
        "format": fmt,
        "image": args.image_size,
        "batch": args.batch_size,
        "shards": args.shards,
        "num_classes": NUM_CLASSES,
        "seed": args.seed,
    }
    if fmt == "zlib":
        params["zlib_level"] = args.zlib_level
    if fmt == "aesgcm":
        params["record_bytes"] = RECORD_BYTES
    return params


def format_dir(data_dir: str, args) -> str:
    """One directory per format and size, so variants with different sizes can share a --data-dir."""
    p = format_params(args)
    name = f"{p['format']}-i{p['image']}-b{p['batch']}-n{p['shards']}-s{p['seed']}"
    if "zlib_level" in p:
        name += f"-z{p['zlib_level']}"
    return os.path.join(data_dir, name)


def read_manifest(path: str) -> dict | None:
    try:
        with open(os.path.join(path, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def make_batch(rng, image: int, batch: int):
    """Image-like samples: per-pixel normal noise around a class-dependent mean, quantized to steps of
    1/4 and clipped to [-4, 4] (33 levels, like 8-bit pixels after normalisation). Any crop shows the
    class through its mean, so the task is learnable; the quantization gives zlib real redundancy."""
    import numpy as np

    y = rng.integers(0, NUM_CLASSES, batch)
    x = rng.standard_normal((batch, image, image), dtype=np.float32)
    x += np.linspace(-0.5, 0.5, NUM_CLASSES, dtype=np.float32)[y][:, None, None]
    np.multiply(x, 4, out=x)
    np.round(x, out=x)
    np.clip(x, -16, 16, out=x)
    np.multiply(x, 0.25, out=x)
    return x, y.astype(np.int64)


def records(n: int):
    """(start, end) of each AES-GCM record of an n-byte payload."""
    return [(s, min(s + RECORD_BYTES, n)) for s in range(0, n, RECORD_BYTES)]


def record_aad(name: str, index: int) -> bytes:
    return f"{name}:{index}".encode()  # binds each record to its file and position


def write_file(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def generate(data_dir: str, args) -> str:
    """Write the shards for args.variant under data_dir/<format>/ unless a matching set exists there.
    Returns that directory."""
    import numpy as np

    if args.variant == "encrypted" and "crypto" in getattr(args, "emu", {}):
        generate(data_dir, plain_twin(args))  # the plaintext an emulated crypto engine hands back
    out = format_dir(data_dir, args)
    want = format_params(args)
    have = read_manifest(out)
    if have is not None and {k: have.get(k) for k in want} == want:
        log(f"reusing shards in {out}")
        return out
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    fmt = want["format"]
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    files, sizes = [], []
    if fmt == "memory":
        # One small file with every sample; each rank loads it once and keeps it in memory.
        x, y = make_batch(rng, args.image_size, args.shards * args.batch_size)
        write_file(os.path.join(out, "data.bin"), y.tobytes() + x.tobytes())
        files.append("data.bin")
        sizes.append(os.path.getsize(os.path.join(out, "data.bin")))
    else:
        aead = None
        if fmt == "aesgcm":
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            key = AESGCM.generate_key(bit_length=256)
            fd = os.open(os.path.join(out, "key.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            aead = AESGCM(key)
        for i in range(args.shards):
            x, y = make_batch(rng, args.image_size, args.batch_size)
            payload = y.tobytes() + x.tobytes()
            del x
            name = f"shard-{i:05d}.bin"
            if fmt == "raw":
                pad = (-len(payload)) % ALIGN  # whole blocks, so every O_DIRECT read is full-sized
                data = payload + b"\0" * pad
            elif fmt == "aesgcm":
                parts = []
                mv = memoryview(payload)
                for r, (s, e) in enumerate(records(len(payload))):
                    nonce = os.urandom(NONCE)
                    parts += [nonce, aead.encrypt(nonce, mv[s:e], record_aad(name, r))]
                data = b"".join(parts)
            elif fmt == "zlib":
                data = zlib.compress(payload, args.zlib_level)
            else:  # pragma: no cover
                raise AssertionError(fmt)
            write_file(os.path.join(out, name), data)
            files.append(name)
            sizes.append(len(data))
    manifest = dict(want, files=files, file_bytes=sizes,
                    payload_bytes=payload_bytes(args.image_size, args.batch_size),
                    created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    write_file(os.path.join(out, "manifest.json"), json.dumps(manifest, indent=1).encode())
    os.sync()  # so the first timed reads do not compete with writeback
    log(f"generated {len(files)} {fmt} file(s), {sum(sizes) / 2**20:.1f} MiB, in {out} "
        f"({time.perf_counter() - t0:.1f} s)")
    return out


# --------------------------------------------------------------------------------------------------
# Data: reading (runs in DataLoader worker processes)


class ShardDataset:
    """Item i is shard file i, which holds one micro-batch. Reading, decrypting and inflating all
    happen here, in the DataLoader worker, into buffers each worker allocates once; what leaves the
    worker is a random crop of every sample. ``clock`` (seconds) and ``sleep`` time the emulated
    crypto engine's waits; tests pass a fake pair, so no test waits on the real clock."""

    def __init__(self, directory: str, manifest: dict, variant: str, crop: int, io_size: int, seed: int,
                 emu: dict | None = None, plain_dir: str | None = None, clock=time.perf_counter, sleep=time.sleep):
        self.dir = directory
        self.files = manifest["files"]
        self.file_bytes = manifest["file_bytes"]
        self.batch = manifest["batch"]
        self.image = manifest["image"]
        self.payload = manifest["payload_bytes"]
        self.crop = crop
        self.variant = variant
        self.io_size = io_size
        self.seed = seed
        self.items = 0
        self._aead = None
        self._map = None  # the mapped shard (plain, encrypted, compressed)
        self._plain_buf = None  # decrypted payload (encrypted)
        self._dio_buf = None  # page-aligned buffer for O_DIRECT (storage)
        self.io_mode = "o_direct" if variant == "storage" else "mmap"
        emu = emu or {}
        self.crypto_emu = emu.get("crypto")  # (mode, wait_us) or None
        self.storage_emu = emu.get("storage", (None,))[0]
        self.plain_dir = plain_dir
        self._pending = None  # crypto=async: (mapping, ready time) of the request in flight
        self._clock, self._sleep = clock, sleep
        self._mem = None  # storage=remove: every shard's bytes, in memory
        if self.storage_emu == "remove":
            self._mem = [self._read_whole(j) for j in range(len(self.files))]
            self.io_mode = "memory"
        elif self.storage_emu == "pagecache":
            self.io_mode = "pagecache"
        elif variant == "storage" and not self._o_direct_works():
            self.io_mode = "fadvise_dontneed"
            log("O_DIRECT refused on this filesystem; dropping the page cache with "
                "posix_fadvise(DONTNEED) before each read instead")

    def __len__(self):
        return len(self.files)

    def _path(self, i):
        return os.path.join(self.dir, self.files[i])

    def _o_direct_works(self) -> bool:
        try:
            fd = os.open(self._path(0), os.O_RDONLY | os.O_DIRECT)
        except OSError as err:
            if err.errno == errno.EINVAL:
                return False
            raise
        buf = mmap.mmap(-1, ALIGN)
        try:
            os.preadv(fd, [buf], 0)
        except OSError as err:
            if err.errno == errno.EINVAL:
                return False
            raise
        finally:
            buf.close()
            os.close(fd)
        return True

    def __getitem__(self, i):
        try:
            if self.variant == "plain":
                payload = self._read_mapped(i)
            elif self.variant == "encrypted" and self.crypto_emu is not None:
                payload = self._emulated_decrypt(i)
            elif self.variant == "encrypted":
                payload = self._decrypt(i, self._read_mapped(i))
            elif self.variant == "compressed":
                payload = zlib.decompress(self._read_mapped(i), bufsize=self.payload)
            else:
                payload = self._read_storage(i)
            if len(payload) < self.payload:
                raise ValueError(f"{self.files[i]}: {len(payload)} bytes, expected {self.payload}")
            self.items += 1
            return self._crop(payload, i)
        finally:
            if self._map is not None:
                # The crop is a copy; the views must go before the mapping can.
                payload = None
                with contextlib.suppress(BufferError):  # a view survives only in a traceback
                    self._map.close()
                self._map = None

    def _crop(self, payload, i):
        import torch

        b, s, c = self.batch, self.image, self.crop
        with warnings.catch_warnings():
            # zlib returns read-only bytes; the views are only read, then copied.
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            y = torch.frombuffer(payload, dtype=torch.int64, count=b)
            x = torch.frombuffer(payload, dtype=torch.float32, count=b * s * s, offset=b * 8)
        g = torch.Generator().manual_seed(hash((self.seed, i, self.items)) & 0x7FFFFFFF)
        r, col = torch.randint(0, s - c + 1, (2,), generator=g).tolist()
        # Copies: nothing returned may point into the shard's mapping or the worker's buffers.
        x = x.view(b, s, s)[:, r:r + c, col:col + c].clone(memory_format=torch.contiguous_format)
        return x.view(b, c * c), y.clone()

    def _read_mapped(self, i) -> memoryview:
        """Map the whole shard read-only, as Arrow/HF datasets and numpy.memmap loaders do: the bytes
        come from the page cache (from disk on a miss) without a copy into the process."""
        size = self.file_bytes[i]
        with open(self._path(i), "rb") as f:
            if os.fstat(f.fileno()).st_size != size:
                raise OSError(f"{self._path(i)}: size changed since generation")
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # map every page up front
            self._map = mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)
        return memoryview(self._map)

    def _decrypt(self, i, blob: memoryview) -> memoryview:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._aead is None:
            with open(os.path.join(self.dir, "key.bin"), "rb") as f:
                self._aead = AESGCM(f.read())
            self._plain_buf = bytearray(self.payload)
        out = memoryview(self._plain_buf)
        name = self.files[i]
        pos = 0
        for r, (s, e) in enumerate(records(self.payload)):
            nonce = blob[pos:pos + NONCE]
            ct = blob[pos + NONCE:pos + NONCE + (e - s) + TAG]
            pos += NONCE + (e - s) + TAG
            if hasattr(self._aead, "decrypt_into"):  # cryptography >= 47: no temporary copy
                self._aead.decrypt_into(nonce, ct, record_aad(name, r), out[s:e])
            else:
                out[s:e] = self._aead.decrypt(nonce, ct, record_aad(name, r))
        if pos != len(blob):
            raise ValueError(f"{name}: {len(blob)} bytes, records account for {pos}")
        return out

    def _map_plain(self, i) -> mmap.mmap:
        """The raw twin of encrypted shard i (the same plaintext), mapped as _read_mapped maps."""
        with open(os.path.join(self.plain_dir, self.files[i]), "rb") as f:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            return mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ)

    def _emulated_decrypt(self, i) -> memoryview:
        """An emulated crypto engine (--emulate crypto=...) that hands back shard i's plaintext, read
        from its raw twin (mapped as _read_mapped maps the ciphertext), so the cipher is gone:

        - remove: the plaintext is where the host reads it, as if an engine had written it there by
          DMA (no host CPU): what is left is exactly the plain variant's path.
        - copy: the same bytes copied into the reused buffer _decrypt writes (the cipher replaced by
          a memcpy on the calling thread: the host still touches every byte once).
        - latency:US: as remove, then a wait of US microseconds per 1 MiB record on the calling thread
          (a sync engine serving the shard's records one after another; one sleep, so timer slack is
          paid once).
        - async:US: the same wait, overlapped: each call submits its request and consumes the one
          made at the previous call, waiting only for what is left of it. The engine is a timer (a
          deadline), not a thread: it does no host CPU work, so a helper thread would only add
          scheduling noise. The batch returned is the previous call's shard (any shard of this
          rank's share is as good for training); the first call is served in line."""
        import numpy as np

        mode, wait_us = self.crypto_emu
        mapped = self._map_plain(i)
        if mode == "copy":
            self._map = mapped
            if self._plain_buf is None:
                self._plain_buf = bytearray(self.payload)
            np.copyto(np.frombuffer(self._plain_buf, dtype=np.uint8),
                      np.frombuffer(mapped, dtype=np.uint8, count=self.payload))
            return memoryview(self._plain_buf)
        wait_s = (wait_us or 0.0) * len(records(self.payload)) / 1e6
        if mode != "async":
            self._map = mapped  # closed by __getitem__ after the crop
            if wait_s > 0:
                self._sleep(wait_s)
            return memoryview(mapped)
        if self._pending is None:  # nothing in flight yet: this first request is served in line
            self._sleep(wait_s)
            done = self._map_plain(i)
        else:
            done, ready_at = self._pending
            left = ready_at - self._clock()
            if left > 0:
                self._sleep(left)
        self._pending = (mapped, self._clock() + wait_s)  # consumed at the next call
        self._map = done  # closed by __getitem__ after the crop
        return memoryview(done)

    def _read_whole(self, i) -> mmap.mmap:
        """storage=remove: one shard's bytes in anonymous memory (read once, before training)."""
        buf = mmap.mmap(-1, self.file_bytes[i])
        with open(self._path(i), "rb") as f:
            n = f.readinto(buf)
        if n != self.file_bytes[i]:
            raise OSError(f"{self._path(i)}: short read {n} of {self.file_bytes[i]} bytes")
        return buf

    def _read_storage(self, i) -> memoryview:
        """Read a raw shard in io_size pieces, in a shuffled order (random access to records, as a
        sample-level shuffle does), either with O_DIRECT into page-aligned mmap memory, or after
        dropping the file's page cache so that buffered reads miss."""
        path = self._path(i)
        size = self.file_bytes[i]  # a multiple of ALIGN (padded at generation)
        if self._dio_buf is None or len(self._dio_buf) < size:
            self._dio_buf = mmap.mmap(-1, max(self.file_bytes))  # anonymous: page-aligned
        mv = memoryview(self._dio_buf)[:size]
        offsets = list(range(0, size, self.io_size))
        import random

        random.Random(hash((self.seed, i, self.items))).shuffle(offsets)
        if self.io_mode == "memory":  # storage=remove: the same pieces, copied from memory
            src = memoryview(self._mem[i])
            for off in offsets:
                end = min(off + self.io_size, size)
                mv[off:end] = src[off:end]
            return mv
        if self.io_mode == "o_direct":
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        elif self.io_mode == "pagecache":  # storage=pagecache: the same reads, served by the cache
            fd = os.open(path, os.O_RDONLY)
        else:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            for off in offsets:
                end = min(off + self.io_size, size)
                n = os.preadv(fd, [mv[off:end]], off)
                if n != end - off:
                    raise OSError(f"short read on {path} at {off}: {n} of {end - off} bytes")
        finally:
            os.close(fd)
        return mv


class MemoryDataset:
    """compute variant: every sample lives in memory; item i is a random micro-batch drawn from it."""

    def __init__(self, directory: str, manifest: dict, seed: int):
        import numpy as np

        n = manifest["shards"] * manifest["batch"]
        d = manifest["image"] ** 2
        raw = np.fromfile(os.path.join(directory, "data.bin"), dtype=np.uint8)
        self.y = raw[: n * 8].view(np.int64).copy()
        self.x = raw[n * 8: n * 8 + n * d * 4].view(np.float32).reshape(n, d).copy()
        self.batch = manifest["batch"]
        self.seed = seed
        self.io_mode = "memory"

    def __len__(self):
        return 1 << 30  # items are random batches; the sampler decides how many are drawn

    def __getitem__(self, i):
        import numpy as np
        import torch

        idx = np.random.default_rng((self.seed, i)).integers(0, len(self.y), self.batch)
        return torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])


class RankSampler:
    """An endless stream of item indices for one rank: the rank's share of the shards, reshuffled every
    epoch (as DistributedSampler does, without an end, so a run stops by steps or time)."""

    def __init__(self, n_items: int, rank: int, world: int, seed: int, endless_range: bool = False):
        self.n, self.rank, self.world, self.seed = n_items, rank, world, seed
        self.endless_range = endless_range

    def __iter__(self):
        import numpy as np

        if self.endless_range:
            i = self.rank
            while True:
                yield i
                i += self.world
        mine = np.arange(self.rank, self.n, self.world)
        if len(mine) == 0:
            mine = np.arange(self.n)
        epoch = 0
        while True:
            order = mine.copy()
            np.random.default_rng((self.seed, epoch)).shuffle(order)
            yield from order.tolist()
            epoch += 1


# --------------------------------------------------------------------------------------------------
# Model and training (one process per rank)


def build_model(args):
    """crop*crop inputs -> hidden (a bottleneck) -> `layers` x width -> classes, with ReLUs.

    Every weight stays under 32 MB: glibc serves allocations below that from its heap, so the gradient
    buffers of each step mostly do not come back as fresh zeroed pages (page faults)."""
    import torch.nn as nn

    layers = [nn.Linear(args.crop * args.crop, args.hidden), nn.ReLU()]
    width = args.hidden
    for _ in range(args.layers):
        layers += [nn.Linear(width, args.width), nn.ReLU()]
        width = args.width
    layers.append(nn.Linear(width, NUM_CLASSES))
    return nn.Sequential(*layers)


def pin_process(sets: list[set[int]] | None, index: int) -> None:
    """Pin every thread of this process (threads made later inherit it) to sets[index mod n]."""
    if not sets:
        return
    cpus = sets[index % len(sets)]
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cpus)


def _pin_worker(sets, rank: int, _worker_id: int) -> None:
    pin_process(sets, rank)


def local_reduce_hook(world: int):
    """allreduce=local: a DDP communication hook that replaces the all-reduce of each gradient bucket
    with a reduction of world copies of the local gradient (the sum a world-way all-reduce computes,
    then DDP's division by world), in place, with no communication. Bucketing, hooks and the
    optimizer are unchanged; only the network is gone."""
    import torch

    def hook(_state, bucket):
        buf = bucket.buffer()
        buf.add_(buf, alpha=world - 1).div_(world)
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    return hook


def steady_rate(step_ends: list[float], warmup_s: float) -> dict:
    """Steps/s over the steady window: from the end of the first step that ends at or after warmup_s
    (seconds since the timed start) to the end of the last step. None fields when too few steps."""
    start = next((k for k, t in enumerate(step_ends) if t >= warmup_s), None)
    n = None if start is None else len(step_ends) - 1 - start
    span = None if not n else step_ends[-1] - step_ends[start]
    return {"warmup_s": warmup_s,
            "steady_steps": n or 0,
            "steady_s": None if span is None else round(span, 3),
            "steady_steps_per_s": round(n / span, 4) if span else None}


def train(rank: int, world: int, args, data_path: str, local_rank: int = 0) -> dict:
    pin_process(getattr(args, "pin_ranks_sets", None), rank)  # before torch and gloo start threads
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(args.threads)
    with contextlib.suppress(RuntimeError):  # only settable before any inter-op work
        torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        if data_path is None:  # torchrun: the first local rank writes the shards, the others wait
            root = args.data_dir
            if local_rank == 0:
                generate(root, args)
            dist.barrier()
            data_path = format_dir(root, args)
        manifest = read_manifest(data_path)
        if manifest is None:
            raise RuntimeError(f"no manifest.json in {data_path}")

        torch.manual_seed(args.seed)
        model = build_model(args)
        n_params = sum(p.numel() for p in model.parameters())
        ddp = DDP(model, gradient_as_bucket_view=True)
        if "allreduce" in args.emu:
            ddp.register_comm_hook(None, local_reduce_hook(world))
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

        if args.variant == "compute":
            dataset = MemoryDataset(data_path, manifest, args.seed)
            sampler = RankSampler(0, rank, world, args.seed, endless_range=True)
            file_bytes_per_batch = 0
        else:
            plain_dir = (format_dir(os.path.dirname(data_path), plain_twin(args))
                         if "crypto" in args.emu else None)
            dataset = ShardDataset(data_path, manifest, args.variant, args.crop, args.io_size, args.seed,
                                   emu=args.emu, plain_dir=plain_dir)
            sampler = RankSampler(len(dataset), rank, world, args.seed)
            file_bytes_per_batch = sum(manifest["file_bytes"]) / len(manifest["files"])
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, sampler=sampler, num_workers=args.workers,
            persistent_workers=args.workers > 0, prefetch_factor=2 if args.workers > 0 else None,
            # Fork, as a torchrun-launched rank would: a rank started by torch.multiprocessing
            # inherits the "spawn" start method, and spawned workers re-import torch (seconds).
            multiprocessing_context="fork" if args.workers > 0 else None,
            worker_init_fn=(functools.partial(_pin_worker, args.pin_workers_sets, rank)
                            if args.pin_workers else None))

        if rank == 0:
            log(f"variant={args.variant} world={world} params={n_params / 1e6:.1f}M "
                f"grad_MB/step={n_params * 4 / 1e6:.0f} batch={args.batch_size}x{args.accum} "
                f"image={args.image_size} crop={args.crop} "
                f"data_MB/step/rank={file_bytes_per_batch * args.accum / 1e6:.1f} "
                f"workers/rank={args.workers} io_mode={dataset.io_mode}")

        it = iter(loader)
        # Move the objects of imports and setup out of the collector's way (as large training jobs do),
        # so full collections do not rescan them every few steps.
        gc.collect()
        gc.freeze()
        dist.barrier()
        t0 = time.perf_counter()
        steps = 0
        step_ends = []  # seconds since t0 at the end of each step: the steady window's clock
        loss_sum = torch.zeros(())
        while True:
            for micro in range(args.accum):
                x, y = next(it)
                sync = contextlib.nullcontext() if micro == args.accum - 1 else ddp.no_sync()
                with sync:
                    loss = F.cross_entropy(ddp(x), y) / args.accum
                    loss.backward()
                loss_sum += loss.detach()
            opt.step()
            if args.mark_step:
                import dpuprof  # cheap after the first step; dpuprof must be importable
                dpuprof.mark_step()
            opt.zero_grad(set_to_none=True)
            step_ends.append(time.perf_counter() - t0)
            steps += 1
            if args.steps is not None and steps >= args.steps:
                break
            if args.duration is not None:
                # Every rank must stop after the same step, or the others wait in the next all-reduce.
                flag = torch.tensor([float(time.perf_counter() - t0 >= args.duration)])
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item() > 0:
                    break
        elapsed = time.perf_counter() - t0
        final_loss = float(loss.detach()) * args.accum
        mean_loss = float(loss_sum) / steps
        del it
        dist.barrier()
        return {
            "variant": args.variant,
            "steps": steps,
            "duration_s": round(elapsed, 3),
            "steps_per_s": round(steps / elapsed, 4),
            "samples_per_s": round(steps * args.accum * args.batch_size * world / elapsed, 2),
            "world_size": world,
            "batch_size": args.batch_size,
            "accum": args.accum,
            "workers": args.workers,
            "image_size": args.image_size,
            "crop": args.crop,
            "hidden": args.hidden,
            "width": args.width,
            "layers": args.layers,
            "params": n_params,
            "grad_bytes_per_step": n_params * 4,
            "file_bytes_per_step_per_rank": int(file_bytes_per_batch * args.accum),
            "io_mode": dataset.io_mode,
            "io_size": args.io_size if args.variant == "storage" else None,
            "mean_loss": round(mean_loss, 4),
            "final_loss": round(final_loss, 4),
            "seed": args.seed,
            "torch": torch.__version__,
            "emulate": list(args.emulate),
            "pin_ranks": args.pin_ranks,
            "pin_workers": args.pin_workers,
            **steady_rate(step_ends, args.warmup_s),
        }
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def emit(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, sort_keys=True), flush=True)
    else:
        print(f"steps_per_s={result['steps_per_s']:.2f} steps={result['steps']} "
              f"duration_s={result['duration_s']:.1f} variant={result['variant']}", flush=True)


def spawned_rank(rank: int, world: int, args, data_path: str) -> None:
    """Entry point of a rank started by torch.multiprocessing."""
    # The parent forwards SIGINT/SIGTERM; die quietly on them instead of printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    result = train(rank, world, args, data_path)
    if rank == 0:
        emit(result, args.json)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    args = parse_args(argv)
    under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ and "LOCAL_RANK" in os.environ

    if under_torchrun:
        local_rank = int(os.environ["LOCAL_RANK"])
        temp_dir = None
        if args.data_dir is None:
            # Every local rank must agree on the directory: derive it from the rendezvous port.
            temp_dir = os.path.join(tempfile.gettempdir(),
                                    f"dpuprof-train-{os.environ.get('MASTER_PORT', '0')}")
            args.data_dir = temp_dir
        if args.generate_only:
            if local_rank == 0:
                generate(args.data_dir, args)
            return 0
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        try:
            result = train(rank, world, args, None, local_rank=local_rank)
        finally:
            if temp_dir is not None and local_rank == 0:
                shutil.rmtree(temp_dir, ignore_errors=True)
        if rank == 0:
            emit(result, args.json)
        return 0

    state = {"ctx": None, "signal": None}

    def on_signal(signum, _frame):
        state["signal"] = signum
        if state["ctx"] is None:  # still generating: unwind, removing the temp dir
            raise SystemExit(128 + signum)
        for proc in state["ctx"].processes:  # forward to the ranks; join() then reports their exit
            if proc.is_alive():
                os.kill(proc.pid, signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)

    temp_dir = None
    if args.data_dir is None:
        temp_dir = tempfile.mkdtemp(prefix="dpuprof-train-")
        args.data_dir = temp_dir
    try:
        data_path = generate(args.data_dir, args)
        if args.generate_only:
            return 0
        import torch.multiprocessing as mp

        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.master_port or free_port())
        state["ctx"] = mp.start_processes(spawned_rank, args=(args.world_size, args, data_path),
                                          nprocs=args.world_size, join=False, start_method="spawn")
        try:
            while not state["ctx"].join(timeout=1.0):
                pass
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
            if state["signal"] is None:
                log(f"training failed: {err}")
                return 1
        if state["signal"] is not None:
            log(f"stopped by signal {state['signal']}")
            return 128 + state["signal"]
        return 0
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
