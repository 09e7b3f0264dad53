"""The loaded probes: the seam between loading (load/) and draining (drain/).

``LoadedProbes`` holds what probe_cache.load made from an entry, each by its fd: the maps
(``probes["name"]``, a bpfmap.BpfMap), the programs (``programs``: function name -> fd), and
what is attached (tracepoints, raw tracepoints, the sampler's perf events, uprobes). The drains
read and write maps through it; record/sources.py attaches the sampler and closes it all
(``close``). Nothing here is a ``bcc.BPF``: bcc compiled the probes in the compile child, and
libbcc's C functions (libbcc.py) do the rest.
"""

from __future__ import annotations

import base64
import ctypes as ct
import itertools
import os
import time
from typing import NamedTuple

from dpuprof.record.load import attach, bytecode
from dpuprof.record.load.bpfmap import BpfMap, PerfEventArray
from dpuprof.record.load.libbcc import lib, online_cpus

BPF_PROG_TYPE_KPROBE = 2  # enum bpf_prog_type: a uprobe program attached as a perf event


class Attached(NamedTuple):
    """One tracepoint or raw-tracepoint attachment: its fd, the event and the function on it."""
    fd: int
    event: str  # "category:name" for a tracepoint, "name" for a raw tracepoint
    fn: str


class LoadedProbes:
    """See the module docstring. ``used``/``unavailable``: which probes loaded, and why the
    others did not. ``multi``: the uprobe functions' uprobe-multi copies (uprobe_link.py);
    ``multi_refused``: why the kernel refuses those, or None. ``code``, ``license``,
    ``kern_version``: what a kprobe-type copy of a uprobe function is loaded from (``program``)."""

    def __init__(self, entry: dict, maps: dict[str, BpfMap], programs: dict[str, int], multi: dict[str, int],
                 fd_map: dict[int, int], owned: list[int]):
        self.used, self.unavailable = list(entry["used"]), dict(entry["unavailable"])
        self.maps, self.programs, self.multi = maps, programs, multi
        self.multi_refused: str | None = entry["multi_refused"]
        self.load_errors: dict[str, str] = entry["load_errors"]
        self.code: dict[str, str] = entry["code"]
        self.license, self.kern_version = entry["license"].encode("latin-1"), entry["kern_version"]
        self.tracepoints: dict[str, Attached] = {}
        self.raw_tracepoints: dict[str, Attached] = {}
        self.perf_events: dict[str, list[int]] = {}  # function -> its perf event on each online CPU
        self.links: dict[tuple, int] = {}  # (path, offset, ret, function) -> uprobe-multi link fd
        self.uprobe_events: dict[int, bytes] = {}  # perf-event uprobe fd -> its event name
        self.iter_links: dict[str, int] = {}  # iterator function -> its link fd (``read_iter``)
        self._uprobe_names = itertools.count()  # each perf-event uprobe's name is new
        self._fd_map = fd_map  # the compile child's map fds (in the bytecode) -> these maps' fds
        self._owned = owned  # the maps' and programs' fds, closed last

    def __getitem__(self, name: str) -> BpfMap:
        """Map ``name``; KeyError when the loaded probes have none of that name."""
        return self.maps[name]

    def program(self, name: str, prog_type: int = BPF_PROG_TYPE_KPROBE) -> int:
        """Function ``name``'s program fd; a uprobe function (not loaded as such: its copies are
        uprobe-multi programs) is loaded now as ``prog_type`` from the entry's bytecode. A bare
        Exception (as bcc's load_func) when it cannot be."""
        if name in self.programs:
            return self.programs[name]
        if name not in self.code:
            raise Exception(f"cannot load {name}: {self.load_errors.get(name, 'not loaded by the compile child')}")
        insns = bytecode.relocate(base64.b64decode(self.code[name]), self._fd_map)
        self.programs[name] = bytecode.prog_load(prog_type, name.encode("latin-1"), insns, self.license,
                                                 self.kern_version)
        self._owned.append(self.programs[name])
        return self.programs[name]

    def program_fds(self) -> list[tuple[str, int]]:
        """(function name, fd) of every loaded program, a uprobe function's copies each once."""
        return list(self.programs.items()) + list(self.multi.items())

    def attach_tracepoint(self, key: str, event: str, fn: str) -> None:
        category, _, name = event.partition(":")
        self.tracepoints[key] = Attached(_checked(lib().bpf_attach_tracepoint(self.programs[fn], category.encode(),
                                                                             name.encode()), f"tracepoint {event}"),
                                         event, fn)

    def attach_raw_tracepoint(self, key: str, event: str, fn: str) -> None:
        self.raw_tracepoints[key] = Attached(_checked(lib().bpf_attach_raw_tracepoint(self.programs[fn],
                                                                                      event.encode()),
                                                      f"raw tracepoint {event}"), event, fn)

    def attach_iter(self, fn: str) -> None:
        """Iterator function ``fn`` (bcc's BPF_ITER) on a link, for ``read_iter``."""
        self.iter_links[fn] = _checked(lib().bcc_iter_attach(self.programs[fn], None, 0), f"iterator {fn}")

    def read_iter(self, fn: str) -> bytes:
        """What one run of iterator ``fn`` writes (its program runs once per object, here, in
        the read). OSError when the kernel refuses a read."""
        fd = lib().bcc_iter_create(self.iter_links[fn])
        if fd < 0:
            err = ct.get_errno()
            raise OSError(err, f"cannot read iterator {fn}: {os.strerror(err)}")
        try:
            parts = []
            while chunk := os.read(fd, 1 << 16):
                parts.append(chunk)
            return b"".join(parts)
        finally:
            os.close(fd)

    def attach_perf_event(self, fn: str, ev_type: int, ev_config: int, sample_freq: int, pid: int = -1,
                          sleep=time.sleep) -> None:
        """Function ``fn`` on a perf event of ``ev_type``/``ev_config`` on every online CPU,
        sampling at ``sample_freq`` Hz (the cpu-clock sampler); of process ``pid`` only, or all.

        The CPUs' events are opened ``1 / (sample_freq x CPUs)`` s apart (one period in all: 10 ms
        at 99 Hz), so that their timers, which keep the phase they start with, never fire on two
        CPUs at once. Opened together, every CPU sampled at the same instant, and a sample then
        saw what the other CPUs' handlers did to it: on_sample runs ~15 us, and a CPU that took
        its sample while holding a socket's lock held it that much longer, while the CPU waiting
        for the lock was sampled spinning. Short-lived curl helpers, each reading a TLS stream
        (benchmarks/short_helpers.py, four runs each way, perf -F 499 beside): 0.0-19.9 % of their
        samples in lock_sock's spin (perf: 0.0-2.2 %) and 16.2-39.5 % crypto opened together;
        0.0-0.2 % and 32.4-34.4 % apart, as perf."""
        fds = self.perf_events.setdefault(fn, [])
        cpus = online_cpus()
        for i, cpu in enumerate(cpus):
            if i:
                sleep(1.0 / sample_freq / len(cpus))
            fds.append(_checked(lib().bpf_attach_perf_event(self.programs[fn], ev_type, ev_config, 0, sample_freq,
                                                            pid, cpu, -1), f"perf event of {fn} on CPU {cpu}"))

    def detach_perf_event(self, fn: str) -> None:
        for fd in self.perf_events.pop(fn, []):
            lib().bpf_close_perf_event_fd(fd)

    def attach_uprobe(self, path: bytes, offset: int, fn: str, ret: bool) -> int:
        """Function ``fn`` as a perf-event uprobe (uretprobe when ``ret``) at ``offset`` of
        ``path``: where the kernel refuses uprobe-multi links (uprobe_link.attach). Its fd."""
        name = f"dpuprof_{os.getpid()}_{next(self._uprobe_names)}_{'r' if ret else 'p'}".encode()
        fd = lib().bpf_attach_uprobe(self.program(fn), 1 if ret else 0, name, path, offset, -1, 0)
        self.uprobe_events[_checked(fd, f"uprobe {fn} in {path.decode(errors='replace')}")] = name
        return fd

    def detach_uprobe(self, fd: int) -> None:
        """Close uprobe ``fd``: a uprobe-multi link or a perf-event uprobe."""
        for key in [k for k, v in self.links.items() if v == fd]:
            del self.links[key]
        name = self.uprobe_events.pop(fd, None)
        if name is None:
            os.close(fd)
        else:
            lib().bpf_close_perf_event_fd(fd)
            lib().bpf_detach_uprobe(name)

    def close(self) -> None:
        """Detach everything and close every fd (idempotent). The attachments are closed from
        parallel threads first (attach.close_in_parallel: each waits for grace periods)."""
        closes = [lambda fd=fd: os.close(fd) for fd in [*self.links.values(), *self.iter_links.values(),
                                                       *(a.fd for a in self.raw_tracepoints.values())]]
        closes += [lambda fd=fd: lib().bpf_close_perf_event_fd(fd)
                   for fd in [*(a.fd for a in self.tracepoints.values()), *self.uprobe_events,
                              *(fd for fds in self.perf_events.values() for fd in fds)]]
        names = list(self.uprobe_events.values())
        self.links, self.raw_tracepoints, self.tracepoints, self.uprobe_events, self.perf_events = {}, {}, {}, {}, {}
        self.iter_links = {}
        attach.close_in_parallel(closes)
        for name in names:
            lib().bpf_detach_uprobe(name)
        for m in self.maps.values():
            if isinstance(m, PerfEventArray):
                m.close()
        for fd in self._owned:
            os.close(fd)
        self.maps, self.programs, self.multi, self._owned = {}, {}, {}, []


def _checked(fd: int, what: str) -> int:
    """``fd`` made close-on-exec, or an OSError naming ``what`` when it is negative."""
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, f"cannot attach {what}: {os.strerror(err)}")
    os.set_inheritable(fd, False)
    return fd
