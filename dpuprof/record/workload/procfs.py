"""Process facts from /proc: parents, threads, start times, namespaces and cgroups.

Used to find the existing process tree of a process that dpuprof attaches to (the BPF ``tree``
map only sees forks after it is loaded), and to tell whether an attached tree is still alive.
Everything here only reads /proc: the processes are never stopped, signalled or ptraced.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import psutil

HOST_PIDNS_INO = 0xEFFFFFFC  # PROC_PID_INIT_INO: the inode of the initial (host) PID namespace
DEAD_STATES = ("Z", "X", "x")  # zombie or dead: the process has exited, whatever its parent does


@dataclass(frozen=True)
class Stat:
    ppid: int
    state: str
    starttime: int  # clock ticks after boot: with the pid, identifies one process across pid reuse


def stat(pid: int) -> Stat | None:
    """/proc/PID/stat's parent, state and start time; None when there is no such task."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except (OSError, ValueError):
        return None
    # comm is in parentheses and may itself hold spaces and ')': split at the last one.
    rest = text[text.rfind(")") + 2:].split()
    try:
        return Stat(ppid=int(rest[1]), state=rest[0], starttime=int(rest[19]))
    except (IndexError, ValueError):
        return None


def alive(pid: int, starttime: int | None = None) -> bool:
    """True while ``pid`` runs (not a zombie) and, when given, is the process started at ``starttime``."""
    st = stat(pid)
    return st is not None and st.state not in DEAD_STATES and (starttime is None or st.starttime == starttime)


def _status(pid: int, keys: tuple[str, ...]) -> dict[str, int] | None:
    """The first number of each /proc/PID/status line named in ``keys`` (e.g. "Tgid"), those
    present; None when the task is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return out


def tgid(pid: int) -> int | None:
    """The process (thread-group leader) that task ``pid`` belongs to; None when gone."""
    fields = _status(pid, ("Tgid",))
    return None if fields is None else fields.get("Tgid")


def voluntary_switches(pid: int) -> int | None:
    """Task ``pid``'s own count of voluntary context switches (the scheduler's nvcsw: the times it
    blocked; for a process id its main thread's, not its threads' sum); None when gone."""
    fields = _status(pid, ("voluntary_ctxt_switches",))
    return None if fields is None else fields.get("voluntary_ctxt_switches")


def code_size(pid: int) -> tuple[int, int] | None:
    """(thread-group id, kB of executable mappings: VmExe + VmLib, the kernel's mm->exec_vm) of task
    ``pid`` from /proc/PID/status; None when gone. A kernel thread has no mappings: 0 kB."""
    fields = _status(pid, ("Tgid", "VmExe", "VmLib"))
    if fields is None or "Tgid" not in fields:
        return None
    return fields["Tgid"], fields.get("VmExe", 0) + fields.get("VmLib", 0)


def tasks(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (empty when it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
    except OSError:
        return []


def all_pids() -> list[int]:
    """Every process visible in /proc."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def parents() -> dict[int, int]:
    """{pid: ppid} for every live process."""
    out = {}
    for pid in all_pids():
        st = stat(pid)
        if st is not None:
            out[pid] = st.ppid
    return out


def descendants(roots, exclude=()) -> dict[int, int]:
    """The live trees under ``roots`` as {task id: tgid of its parent}, threads included, in the
    shape of probes/proc_tree.bpf.c's ``tree`` map (a thread's parent is its own process; a
    root's is its real parent). Processes in ``exclude`` (the recorder) and their subtrees are
    left out."""
    children = defaultdict(list)
    ppid_of = parents()
    for pid, ppid in ppid_of.items():
        children[ppid].append(pid)
    skip = set(exclude)
    out: dict[int, int] = {}
    todo = [r for r in roots if r in ppid_of and r not in skip]
    for root in todo:
        out[root] = ppid_of[root]
    while todo:
        pid = todo.pop()
        for tid in tasks(pid):
            if tid != pid:
                out.setdefault(tid, pid)
        for child in children.get(pid, ()):
            if child not in out and child not in skip:
                out[child] = pid
                todo.append(child)
    return out


def in_host_pidns() -> bool:
    """True when this process sees the host's PID namespace (the one the eBPF probes report)."""
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return True  # no namespace support: there is only one
    return link == f"pid:[{HOST_PIDNS_INO}]"


def ns_pid(pid: int) -> int | None:
    """The pid of ``pid`` inside its innermost PID namespace (the container-side pid), or None
    when it is the same as the host's or unknown."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    ids = [int(x) for x in line.split()[1:]]
                    return ids[-1] if len(ids) > 1 else None
    except (OSError, ValueError):
        pass
    return None


def cgroup2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``/sys/fs/cgroup/unified``
    on a hybrid host), or None."""
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1].replace("\\040", " ")
    except OSError:
        pass
    return None


def cgroup(pid: int) -> str | None:
    """The cgroup v2 path of ``pid`` (``/system.slice/x.service``), or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def namespaces(pid: int) -> tuple[int | None, str | None]:
    """(container-side pid, cgroup v2 path) of ``pid``, as the processes table stores them."""
    if pid <= 0:
        return None, None
    return ns_pid(pid), cgroup(pid)


def process_info(pid: int) -> tuple[int | None, str, str] | None:
    """(ppid, comm, cmdline) of a live process, or None."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return p.ppid(), p.name(), " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


__all__ = ["namespaces", "Stat", "stat", "alive", "tgid", "voluntary_switches", "tasks", "all_pids", "parents", "descendants",
           "in_host_pidns", "ns_pid", "cgroup", "cgroup2_mount", "process_info"]
