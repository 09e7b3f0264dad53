"""User-space probes: all-reduces, step markers and cipher/codec calls of the workload.

uprobes attach per binary file, so a target can only be attached once a workload process maps its
library (torch is imported after the workload starts). ``UprobeSession.drain`` rescans the
workload's ``/proc/PID/maps`` at every interval and attaches each new library once; whether each
target attached, or why not, is kept in ``status`` (meta key ``uprobes``). A target detached for
being called too often leaves its tables partial: when (meta key ``uprobes_detached``, read by
dpuprof/recording/partial.py) and one warning line (``take_warnings``, printed by record). The
probes themselves are in probes/uprobes.bpf.c; methods and costs in docs/uprobes.md.
"""

from __future__ import annotations

import ctypes as ct
import importlib.util
import os
import re
import time
from dataclasses import dataclass

from dpuprof.errors import UserError
from dpuprof.marker import MARK_MAGIC
from dpuprof.record.drain.maps import Cumulative
from dpuprof.record.load import uprobe_link
from dpuprof.record.drain.mapped import MappedFiles, mapped_files

# Function ids and library ids: keep in step with probes/uprobes.bpf.c.
FUNCS = {0: ("allreduce", None), 1: ("inflate", "decompress"), 2: ("deflate", "compress"),
         3: ("EVP_EncryptUpdate", "encrypt"), 4: ("EVP_DecryptUpdate", "decrypt")}
LIBS = {0: "libz", 1: "libcrypto", 2: "cryptography_rust"}
MARK_KINDS = {0: "step", 1: "ddp_step"}
LOST_KINDS = ("uprobe_stats_map_full", "uprobe_inflight_map_full", "allreduce_bytes_unverified")


@dataclass(frozen=True)
class Target:
    """One probe to attach: ``sym`` in a library whose file name matches ``lib_re``."""

    name: str         # status key, e.g. "gloo::allreduce"
    lib_re: str       # regular expression on the mapped file's path
    sym: str          # symbol (mangled for C++), from .dynsym or .symtab
    entry: str        # BPF function for the uprobe
    ret: str | None   # BPF function for the uretprobe (None: entry only)
    slot: int         # index in the BPF ``hits`` array: lib * 8 + fn


_TORCH = r"/libtorch_cpu\.so$"
_LIBZ = r"/libz\.so\.1(\.[\d.]+)?$"
_LIBCRYPTO = r"/libcrypto\.so\.3$"
_CRYPTO_RUST = r"/cryptography/hazmat/bindings/_rust\.abi3\.so$"
TARGETS = (
    Target("gloo::allreduce", _TORCH, "_ZN4gloo9allreduceERKNS_16AllreduceOptionsE",
           "on_allreduce", "on_allreduce_ret", 24),
    Target("c10d::Reducer::prepare_for_backward", _TORCH,
           "_ZN4c10d7Reducer20prepare_for_backwardERKSt6vectorIN2at6TensorESaIS3_EE", "on_ddp_step", None, 29),
    Target("libz:inflate", _LIBZ, "inflate", "on_inflate_0", "on_inflate_ret_0", 1),
    Target("libz:deflate", _LIBZ, "deflate", "on_deflate_0", "on_deflate_ret_0", 2),
    Target("libcrypto:EVP_EncryptUpdate", _LIBCRYPTO, "EVP_EncryptUpdate", "on_encrypt_1", "on_encrypt_ret_1", 11),
    Target("libcrypto:EVP_DecryptUpdate", _LIBCRYPTO, "EVP_DecryptUpdate", "on_decrypt_1", "on_decrypt_ret_1", 12),
    Target("cryptography_rust:EVP_EncryptUpdate", _CRYPTO_RUST, "EVP_EncryptUpdate",
           "on_encrypt_2", "on_encrypt_ret_2", 19),
    Target("cryptography_rust:EVP_DecryptUpdate", _CRYPTO_RUST, "EVP_DecryptUpdate",
           "on_decrypt_2", "on_decrypt_ret_2", 20),
)
NOT_LOADED = "library not loaded by the workload"
ATTACHED = "attached"
DETACHED = "detached"
#: Most entry hits per second (all processes) a target may take before it is detached: each hit is
#: a trap of ~6-8 us on the reference VM (docs/uprobes.md), so 2000/s costs at most ~1.6 % of a CPU.
MAX_HZ_ENV = "DPUPROF_UPROBE_MAX_HZ"
DEFAULT_MAX_HZ = 2000.0


def max_hits_per_s() -> float:
    """The detach threshold: ``DPUPROF_UPROBE_MAX_HZ`` (a positive number) or DEFAULT_MAX_HZ."""
    raw = os.environ.get(MAX_HZ_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_HZ
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UserError(f"{MAX_HZ_ENV}: expected a positive number of hits per second, got {raw!r}")
    return value


def over_limit(hits: dict[int, int], elapsed_s: float, limit_hz: float) -> dict[int, float]:
    """{slot: hits per second} of the slots whose rate over ``elapsed_s`` exceeds ``limit_hz``."""
    if elapsed_s <= 0:
        return {}
    return {slot: n / elapsed_s for slot, n in hits.items() if n / elapsed_s > limit_hz}


def match_targets(paths: set[str], targets=TARGETS) -> list[tuple[Target, str]]:
    """(target, path) for every one of ``targets`` whose library is among ``paths``."""
    return [(t, p) for t in targets for p in sorted(paths) if re.search(t.lib_re, p)]


#: Cipher and codec calls can run at hundreds of thousands a second (``openssl speed``: each a
#: trap), and a target is only detached for being hot at the next drain; so they are attached on
#: request (``record --codec-uprobes``). Collectives and steps run at most thousands a second.
CODEC_PREFIXES = ("libz:", "libcrypto:", "cryptography_rust:")
CODECS_OFF = "off: not requested (dpuprof record --codec-uprobes; each call is a trap)"


def clock_offset_s() -> float:
    """time.time() - CLOCK_MONOTONIC (bpf_ktime_get_ns's clock), from the tightest of a few reads."""
    best = None
    for _ in range(5):
        a = time.monotonic_ns()
        wall = time.time()
        b = time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, wall - (a + b) / 2e9)
    return best[1]


class UprobeSession:
    """The uprobes BPF object, its attachments and its drains.

    ``drain(workload)`` returns (``collectives`` rows (pid, tid, op, count, bytes, duration_ns),
    ``codec_calls`` rows (pid, lib, func, direction, calls, bytes, duration_ns, cpu_ns), ``markers`` rows
    (pid, tid, kind, t unix s), ``lost`` rows (kind, count)) for the interval since the previous
    drain; bytes are payload bytes (collectives: per rank per call; codecs: input bytes consumed);
    duration_ns is wall time from entry to return, cpu_ns the calling thread's on-CPU time in it.
    """

    def __init__(self, bpf, recorder_pid: int, codecs: bool = False):
        """``bpf``: the LoadedProbes (record/load/loaded.py) holding probes/uprobes.bpf.c;
        ``codecs``: also the cipher and codec targets (CODEC_PREFIXES)."""
        self.bpf = bpf
        self.targets = tuple(t for t in TARGETS if codecs or not t.name.startswith(CODEC_PREFIXES))
        self.bpf["wl"][ct.c_uint32(recorder_pid)] = ct.c_uint32(2)  # followed, not counted
        self.offset_s = clock_offset_s()
        self.status: dict[str, str] = {t.name: NOT_LOADED if t in self.targets else CODECS_OFF for t in TARGETS}
        self.paths: dict[str, list[str]] = {}  # target name -> files it is attached to
        self.links: dict[tuple[str, str], list[int]] = {}  # (target name, file) -> its uprobes' fds
        self.limit_hz = max_hits_per_s()
        self.last_drain = time.monotonic()
        self.primed_at: float | None = None  # unix s of the first baseline: calls before it are not counted
        self.attached_at: dict[str, float] = {}  # target name -> unix s it first attached
        self.detached: dict[str, dict] = {}  # target name -> meta uprobes_detached entry
        self.warnings: list[str] = []  # detach lines not yet taken (take_warnings)
        self.tried_paths: set[str] = set()
        self.mapped = MappedFiles()  # each process's executable files (attach_new)
        self.tried_inodes: set[tuple[int, int]] = set()
        self._marks: list[tuple] = []
        self._marks_lost = 0
        # Read at each drain, never waited on: no wake-up per mark. A wake-up is an irq_work, a
        # self-IPI, which on_ddp_step paid at every step: 21.9 us a run beside DDP training here.
        self.bpf["marks"].open_perf_buffer(self._on_mark, page_cnt=64, lost_cb=self._on_lost, wakeup_events=0)
        self.cum = {"coll": Cumulative(), "codec": Cumulative(), "lost": Cumulative(), "hits": Cumulative()}

    def _on_mark(self, _cpu, data, _size):
        ev = self.bpf["marks"].event(data)
        self._marks.append((ev.tgid, ev.tid, MARK_KINDS.get(ev.kind, str(ev.kind)), ev.ns / 1e9 + self.offset_s))

    def _on_lost(self, n):
        self._marks_lost += n

    def attach_new(self, pids) -> bool:
        """Attach the targets of libraries newly mapped by ``pids``; True when ``status`` changed.

        ``pids`` may hold thread ids and exited processes (the workload keeps every id it saw):
        only live thread-group leaders are read, as the threads of a process share its maps, and
        their maps only when they can hold a new library (mapped.py)."""
        paths: set[str] = set()
        for pid, new in self.mapped.new_files(pids).items():
            # A file of another mount namespace is reached through the process's root.
            paths |= {f if os.path.exists(f) else f"/proc/{pid}/root{f}" for f in new}
        return self.attach_paths(paths)

    def attach_paths(self, paths: set[str]) -> bool:
        """Attach every target whose library is in ``paths`` (each file once); True on a change."""
        new = paths - self.tried_paths
        self.tried_paths |= new
        changed = False
        for target, path in match_targets(self._new_files(new), self.targets):
            if self.status[target.name].startswith(DETACHED):
                continue  # too hot: stays off
            result = self._attach(target, path)
            if result == ATTACHED:
                self.paths.setdefault(target.name, []).append(path)
                self.attached_at.setdefault(target.name, time.time())
            if result == ATTACHED or self.status[target.name] != ATTACHED:
                self.status[target.name] = result  # one file attached is enough to say "attached"
            changed = True
        return changed

    def _new_files(self, paths: set[str]) -> set[str]:
        """``paths`` less those naming a file already seen under another name (a symlink, another
        process's root): a uprobe belongs to the file, and attaching it twice would count twice."""
        out = set()
        for path in sorted(paths):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in self.tried_inodes:
                self.tried_inodes.add((st.st_dev, st.st_ino))
                out.add(path)
        return out

    def _attach(self, target: Target, path: str) -> str:
        """Attach ``target`` in ``path`` (entry, then return probe): as uprobe-multi links where
        the kernel has them (they detach together, record/load/uprobe_link.py), else as perf-event
        uprobes."""
        links = self.links.setdefault((target.name, path), [])
        try:
            links.append(uprobe_link.attach(self.bpf, path, target.sym, target.entry))
        except Exception as err:  # a bare Exception when the symbol is absent, OSError when refused
            return f"{path}: {str(err).splitlines()[0][:160]}"
        if target.ret:
            try:
                links.append(uprobe_link.attach(self.bpf, path, target.sym, target.ret, ret=True))
            except Exception as err:
                self._detach(target, path)
                return f"{path}: uretprobe: {str(err).splitlines()[0][:160]}"
        return ATTACHED

    def _detach(self, target: Target, path: str) -> None:
        """Stop ``target``'s probes in ``path``."""
        for fd in self.links.pop((target.name, path), []):
            self.bpf.detach_uprobe(fd)

    def _detach_hot(self) -> bool:
        """Detach every target hit more than ``limit_hz`` times a second since the last drain;
        True when one was. Its status says so, with the rate seen."""
        now = time.monotonic()
        elapsed, self.last_drain = now - self.last_drain, now
        table = self.bpf["hits"]
        cur = {t.slot: (int(table.sum(ct.c_int(t.slot)).value),) for t in TARGETS}
        hits = {slot: n for slot, (n,) in self.cum["hits"].deltas(cur).items()}
        hot = over_limit(hits, elapsed, self.limit_hz)
        changed = False
        for target in self.targets:
            if target.slot not in hot or target.name not in self.paths:
                continue
            for path in self.paths.pop(target.name):
                self._detach(target, path)
            self.status[target.name] = (f"{DETACHED}: {hot[target.slot]:.0f} calls/s, over the limit of "
                                        f"{self.limit_hz:.0f}/s ({MAX_HZ_ENV}); each call is a trap")
            self._note_detach(target.name, hot[target.slot])
            changed = True
        return changed

    def _note_detach(self, name: str, rate: float) -> None:
        """Keep when ``name`` detached (meta ``uprobes_detached``) and its warning line: its rows
        count the calls from ``from`` (its attach, or the first baseline) to ``detached_at`` only."""
        now = time.time()
        start = max(self.attached_at.get(name, now), self.primed_at or 0.0)
        self.detached[name] = {"from": start, "detached_at": now, "calls_per_s": round(rate, 1),
                               "limit_per_s": self.limit_hz}
        self.warnings.append(f"uprobe {name} stopped early: detached after {max(0.0, now - start):.1f} s at "
                             f"{rate:.0f} calls/s (over the limit of {self.limit_hz:.0f}/s, {MAX_HZ_ENV}); "
                             "its counts cover the run up to then only, and dpuprof report and project say so")

    def take_warnings(self) -> list[str]:
        """The warning lines since the last call (one per target detached), for record to print."""
        out, self.warnings = self.warnings, []
        return out

    def prime(self) -> None:
        """Take the baselines now and drop marks so far, so the first interval starts now."""
        self.drain()
        if self.primed_at is None:  # a resume after a duty cycle's off part primes again
            self.primed_at = time.time()

    def drain(self, workload=()) -> tuple[list, list, list, list]:
        self._detach_hot()
        self.attach_new(workload)
        self.bpf["marks"].consume()  # opened without wake-ups: poll would find no buffer readable
        marks, self._marks = self._marks, []
        coll = {(k.tgid, k.tid, FUNCS[k.op][0]): (v.count, v.bytes, v.ns)
                for k, v in self.bpf["coll_stats"].items()}
        codec = {}
        for k, v in self.bpf["codec_stats"].items():
            func, direction = FUNCS.get(k.fn, (str(k.fn), "unknown"))
            codec[(k.tgid, LIBS.get(k.lib, str(k.lib)), func, direction)] = (v.calls, v.bytes, v.ns, v.cpu_ns)
        lost_arr = self.bpf["up_lost"]
        lost = {kind: (int(lost_arr[ct.c_int(i)].value),) for i, kind in enumerate(LOST_KINDS)}
        lost["markers_lost"] = (self._marks_lost,)
        coll_rows = [(*k, *v) for k, v in sorted(self.cum["coll"].deltas(coll).items())]
        codec_rows = [(*k, *v) for k, v in sorted(self.cum["codec"].deltas(codec).items())]
        lost_rows = [(k, n) for k, (n,) in sorted(self.cum["lost"].deltas(lost).items())]
        return coll_rows, codec_rows, sorted(marks, key=lambda m: m[3]), lost_rows

    def contribute(self, tables: dict, workload, writer) -> list[tuple]:
        """Add this interval's collectives, codec_calls and lost rows to ``tables``; return markers.
        A change in what is attached is written to ``writer``'s meta key ``uprobes`` at once."""
        before = self.meta()
        coll, codec, marks, lost = self.drain(workload)
        if self.meta() != before:
            writer.set_meta(**self.meta())
        tables["collectives"] = coll
        tables["codec_calls"] = codec
        tables["lost"] = list(tables.get("lost", [])) + lost
        return marks

    def meta(self) -> dict:
        """Meta keys: ``uprobes`` {target: "attached" or why not}, ``uprobes_paths`` {target: [files]},
        ``uprobes_detached`` {target: {from, detached_at (unix s), calls_per_s, limit_per_s}}."""
        return {"uprobes": dict(self.status), "uprobes_paths": {k: list(v) for k, v in self.paths.items()},
                "uprobes_detached": {k: dict(v) for k, v in self.detached.items()}}



def start(bpf, recorder_pid: int, codecs: bool = False) -> UprobeSession:
    """A session over ``bpf`` (which holds the uprobes program), with the libraries findable now
    already attached (``known_paths``); ``codecs``: the cipher and codec targets too."""
    session = UprobeSession(bpf, recorder_pid, codecs)
    session.attach_paths(known_paths())
    return session


def known_paths() -> set[str]:
    """Target libraries findable before the workload starts: this interpreter's torch and
    cryptography packages (found without importing them) and the libz/libcrypto it maps itself.
    Attaching them now catches calls made before the first drain; uprobes follow the file, so
    any process that maps it later is covered (the BPF side keeps only the workload's)."""
    import zlib  # noqa: F401, PLC0415  (maps libz.so.1 into this process where the module links it)

    try:
        import _hashlib  # noqa: F401, PLC0415  (maps libcrypto)
    except ImportError:
        pass
    with open("/proc/self/maps") as fh:
        paths = mapped_files(fh.read())
    for pkg, rel in (("torch", "lib/libtorch_cpu.so"), ("cryptography", "hazmat/bindings/_rust.abi3.so")):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            if os.path.exists(os.path.join(root, rel)):
                paths.add(os.path.realpath(os.path.join(root, rel)))
    return paths


__all__ = ["TARGETS", "UprobeSession", "mapped_files", "match_targets", "start", "MARK_MAGIC"]
