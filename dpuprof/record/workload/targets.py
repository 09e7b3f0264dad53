"""What the workload is: a launched command, attached processes, a cgroup, or every process.

- ``command`` (``dpuprof record -- CMD``): CMD's process tree, followed from its first fork.
- ``attach`` (``-p PID[,PID...]``): the trees of running processes. Their existing descendants and
  threads are read from /proc and seeded into probes/proc_tree.bpf.c's ``tree`` map; children born
  later join it in the kernel. The processes are only read, never stopped, signalled or ptraced.
- ``cgroup`` (``--cgroup PATH``): every process in a cgroup v2 subtree and its descendants; the
  subtree is re-read every interval, so processes moved in later join.
- ``system-wide`` (``-a`` without a command): every process on the host except the recorder.

``-a`` with a command (or ``-p``/``--cgroup``) keeps that workload and resolves every process's
symbols, not only the workload's (dpuprof always samples every CPU).
"""

from __future__ import annotations

import ctypes as ct
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field

from dpuprof.errors import UserError
from dpuprof.record.workload import child as childmod
from dpuprof.record.workload import procfs
from dpuprof.record.workload.procfs import process_info
from dpuprof.record.workload.child import resolve_command

# A pid that has left the workload's tree stays in the workload this many ``pids`` calls (one per
# drain): its exit's counters and last samples are read in the drains after it is gone.
KEEP_CALLS = 3


@dataclass(frozen=True)
class Target:
    """The user's choice of workload and recording window (``duration_s`` None: no limit)."""

    command: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    system_wide: bool = False
    cgroup: str | None = None
    duration_s: float | None = None

    @property
    def kind(self) -> str:
        """``command``, ``attach``, ``cgroup`` or ``system-wide`` (stored as meta ``workload``)."""
        if self.pids:
            return "attach"
        if self.cgroup:
            return "cgroup"
        return "command" if self.command else "system-wide"


def parse_pids(text: str) -> tuple[int, ...]:
    """``"12,34"`` -> (12, 34); UserError on anything that is not a list of positive integers."""
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t.isdigit() or int(t) <= 0 for t in items):
        raise UserError(f"-p: expected PID[,PID...] (positive whole numbers), got {text!r}")
    return tuple(dict.fromkeys(int(t) for t in items))


def make_target(command, pids_text: str | None, system_wide: bool, cgroup: str | None,
                duration_s: float | None) -> Target:
    """Check that the options name exactly one workload; UserError (one line) when not."""
    command = tuple(command)
    pids = parse_pids(pids_text) if pids_text is not None else ()
    if pids and command:
        raise UserError("-p attaches to running processes and cannot be combined with a command; "
                        "use either dpuprof record -p PID or dpuprof record -- COMMAND")
    if cgroup and (command or pids):
        raise UserError("--cgroup names the workload and cannot be combined with -p or a command")
    if not (command or pids or system_wide or cgroup):
        raise UserError("nothing to record: give a command (dpuprof record -- COMMAND), -p PID, "
                        "--cgroup PATH or -a for the whole host")
    return Target(command=command, pids=pids, system_wide=system_wide, cgroup=cgroup, duration_s=duration_s)


def check_pids(pids, recorder_pid: int) -> dict[int, int]:
    """{pid: start time} of the processes to attach to; UserError for one that does not exist,
    has exited, is a thread, or is dpuprof itself."""
    out = {}
    for pid in pids:
        st = procfs.stat(pid)
        if st is None:
            raise UserError(f"-p {pid}: no such process")
        if st.state in procfs.DEAD_STATES:
            raise UserError(f"-p {pid}: the process has exited (state {st.state})")
        leader = procfs.tgid(pid)
        if leader is not None and leader != pid:
            raise UserError(f"-p {pid}: is a thread of process {leader}; attach to -p {leader}")
        if pid == recorder_pid:
            raise UserError(f"-p {pid}: is dpuprof itself")
        out[pid] = st.starttime
    return out


def cgroup_dir(path: str) -> str:
    """The directory of cgroup ``path``: relative to the cgroup v2 mount (``/system.slice/x.scope``,
    as /proc/PID/cgroup writes it) or a full path under that mount. UserError when there is no
    cgroup v2 hierarchy or no such cgroup."""
    mount = procfs.cgroup2_mount()
    if mount is None:
        raise UserError(f"--cgroup {path}: no cgroup v2 hierarchy is mounted (see /proc/self/mounts)")
    full = os.path.normpath(path)
    if not (full == mount or full.startswith(mount.rstrip("/") + "/")):
        full = os.path.normpath(os.path.join(mount, path.lstrip("/")))
    if not os.path.isfile(os.path.join(full, "cgroup.procs")):
        raise UserError(f"--cgroup {path}: no such cgroup v2 group ({full} has no cgroup.procs)")
    return full


def cgroup_members(directory: str) -> set[int]:
    """Every process in the cgroup subtree at ``directory`` (empty when it was removed)."""
    out: set[int] = set()
    for here, _dirs, files in os.walk(directory):
        if "cgroup.procs" not in files:
            continue
        try:
            with open(os.path.join(here, "cgroup.procs")) as fh:
                out.update(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


class Watched:
    """Stands in for ``child.Child`` when dpuprof launched nothing: same interface, but it never
    signals anything. ``poll()`` returns 0 once a stop was requested (Ctrl-C, SIGTERM) or every
    watched process has exited, None before; ``exited`` tells which."""

    pid = None
    returncode = None

    def __init__(self, workload: "Workload | None"):
        self.workload = workload
        self.stop_requested_at: float | None = None
        self.escalation = 0
        self.exited = False

    def poll(self) -> int | None:
        if self.stop_requested_at is not None or self.exited:
            return 0
        if self.workload is None or self.workload.any_alive():
            return None
        self.exited = True
        return 0

    def send(self, sig: int) -> None:
        """Never forwards: the attached job is not dpuprof's to stop."""

    def escalate(self, now: float) -> None:
        self.stop_requested_at = now

    def check_escalation(self, now: float) -> None:
        pass


@dataclass
class Workload:
    """The live workload of a ``Target`` (see the module docstring).

    ``start()`` launches the command or seeds the tree and returns the child-like handle the
    recorder waits on; ``pids(parents)`` is the workload's pid set (processes and thread ids)
    given the BPF ``tree`` map's {tid: parent tgid}, or None in psutil mode; ``symbolized(pids)``
    the set whose user stacks get full symbols.
    """

    target: Target
    recorder_pid: int = field(default_factory=os.getpid)
    tree_map: object = None  # the BPF ``tree`` map (load/bpfmap.BpfMap), None in psutil mode
    lost_map: object = None  # the BPF ``tree_lost`` array: seeds that did not fit are counted there
    gen_map: object = None  # the BPF ``tree_gen`` array: changed after seeding (probes/proc_tree.bpf.c)
    roots: dict[int, int] = field(default_factory=dict)  # attach/cgroup roots: pid -> start time
    # The workload's pids: those in the tree now, and those that left it (exited) in the last
    # KEEP_CALLS calls (``departed``: their last samples and counters are drained after they
    # leave; without the BPF tree, every pid so far); system-wide, the live processes and those
    # that ran since the previous ``pids`` call only (``ran``). Until 2026-12-07 every pid ever in
    # the tree stayed, threads included: a workload that starts threads all the time made every
    # interval walk them all, and a later process under a reused id (pid_max is 32768 on some
    # hosts) counted as the workload's.
    seen: set[int] = field(default_factory=set)
    departed: dict[int, int] = field(default_factory=dict)  # pid -> the call it left the tree at
    calls: int = 0
    ran: set[int] = field(default_factory=set)  # system-wide: ran since the last ``pids`` call (add_seen)
    count: int = 0  # distinct processes that entered ``seen`` (a reused pid counts again), for the status line
    starts: dict[int, int] = field(default_factory=dict)  # start time of each pid when first seen
    child: object = None
    cgroup_path: str | None = None
    attached: list[dict] = field(default_factory=list)  # [{pid, comm, cmdline}] of the -p roots
    also_seed: list[tuple[object, int]] = field(default_factory=list)  # (BPF map, value) seeded like tree
    started_boot_s: float | None = None  # CLOCK_BOOTTIME when the recording started
    moved_in: set[int] = field(default_factory=set)  # processes that joined the cgroup, started before

    def prepare(self, user=None) -> None:
        """Validate against the running system before anything is loaded (UserError): the
        command can be run by ``user`` (child.resolve_command: a typo exits 127 here), the -p
        processes exist, the cgroup exists."""
        if self.target.command:
            resolve_command(self.target.command[0], user)
        if self.target.pids:
            self.roots = check_pids(self.target.pids, self.recorder_pid)
            for pid in self.roots:  # read now: a root may exit while the probes compile
                info = process_info(pid)
                self.attached.append({"pid": pid, "comm": info[1] if info else "",
                                      "cmdline": info[2] if info else ""})
        if self.target.cgroup:
            self.cgroup_path = cgroup_dir(self.target.cgroup)

    def start(self, user, term_after_s: float, kill_after_s: float, env_extra: dict | None = None):
        """Launch the command (``child.Child``, ``env_extra`` added to its environment) or start
        watching (``Watched``)."""
        if self.target.command:
            self.child = childmod.Child(list(self.target.command), user, term_after_s, kill_after_s,
                                        env_extra=env_extra)
            self.roots = {self.child.pid: 0}
            return self.child
        if self.cgroup_path:
            self._refresh_cgroup()
        else:
            self._seed(self.roots)
        # From here on a process that joins the cgroup is "moved in" (the first ones get their
        # baselines from the recorder right after start).
        self.started_boot_s = time.clock_gettime(time.CLOCK_BOOTTIME)
        return Watched(self if self.roots or self.cgroup_path else None)

    @property
    def root_pid(self) -> int | None:
        return next(iter(self.roots), None)

    # ------------------------------------------------------------------ the tree
    def _seed(self, roots) -> set[int]:
        """Put the live trees under ``roots`` into the BPF tree map; return their task ids.
        Repeated until a pass finds nothing new, so a fork between reading /proc and seeding its
        parent is not missed (after the parent is seeded the kernel adds its children itself)."""
        if self.tree_map is None:
            return set(procfs.descendants(roots, exclude=(self.recorder_pid,)))
        have: set[int] = set()
        lost = 0
        for _ in range(5):
            entries = procfs.descendants(roots, exclude=(self.recorder_pid,))
            new = {t: p for t, p in entries.items() if t not in have}
            if not new:
                break
            for tid, parent in new.items():
                try:
                    self.tree_map[ct.c_uint32(tid)] = ct.c_uint32(parent)
                    # Other probes that follow the tree in their own map (e.g. a membership map
                    # keyed by task id) get the same tasks: see ``also_seed``.
                    for table, value in self.also_seed:
                        table[ct.c_uint32(tid)] = ct.c_uint32(value)
                except Exception:  # an OSError when the map is full (a bare Exception from a bcc table)
                    lost += 1
            have.update(new)
        if lost and self.lost_map is not None:
            self.lost_map[ct.c_int(0)] = ct.c_uint64(self.lost_map[ct.c_int(0)].value + lost)
        if have and self.gen_map is not None:
            # A new generation: sched_wait's per-CPU memory of tasks outside the workload is stale.
            # +2, so it changes even if a fork's +1 came between the read and the write.
            self.gen_map[ct.c_int(0)] = ct.c_uint32((self.gen_map[ct.c_int(0)].value + 2) & 0xFFFFFFFF)
        return have

    def _refresh_cgroup(self) -> None:
        members = cgroup_members(self.cgroup_path) - {self.recorder_pid}
        new = {}
        for pid in members - set(self.roots):
            st = procfs.stat(pid)
            if st is not None:
                new[pid] = st.starttime
        self.roots = {p: s for p, s in self.roots.items() if p in members} | new
        if not new:
            return
        seeded = self._seed(new)
        if self.started_boot_s is None:
            return
        # A process moved into the cgroup during the recording that started before it: its CPU
        # must count from now, not from its start (a child forked inside is new and counts whole).
        # /proc's starttime is truncated to a clock tick, so a process born in the tick the
        # recording started in reads as older: only one whose tick ended before the start is old.
        tick = os.sysconf("SC_CLK_TCK")
        for tid in seeded:
            st = procfs.stat(tid)
            if st is not None and (st.starttime + 1) / tick <= self.started_boot_s and procfs.tgid(tid) == tid:
                self.moved_in.add(tid)

    def take_moved_in(self) -> list[int]:
        """Processes that joined the workload since the last call but ran before the recording
        started (cgroup mode): the recorder takes their CPU baselines before counting them."""
        out, self.moved_in = sorted(self.moved_in), set()
        return out

    def pids(self, parents: dict[int, int] | None) -> set[int]:
        """The workload's pids now, once per drain, with those that left the BPF tree in the last
        KEEP_CALLS calls (every earlier one without it: ``parents`` None, the tree followed
        through /proc);
        system-wide, the live processes and those that ran since the previous call (an exited one
        stays through the interval after the one it ran in: late thread exits, late counters)."""
        if self.target.kind == "system-wide":
            now = set(procfs.all_pids()) | self.ran
            self.ran = set()
        else:
            if self.cgroup_path:
                self._refresh_cgroup()
            now = self._members(parents)
        now.discard(0)
        now.discard(self.recorder_pid)
        self.count += len(now - self.seen)
        if self.target.kind == "system-wide":
            self.seen = now
        else:
            if parents is not None:  # /proc's tree loses an orphan: there every pid stays
                self._keep_departed(now)
            self.seen |= now
        return self.seen

    def _members(self, parents: dict[int, int] | None) -> set[int]:
        """The roots and their descendants now: in the BPF tree ``parents``, else through /proc."""
        now = set()
        for root in self.roots:
            if parents is not None:
                now |= descendants_of(parents, root)
            else:
                now |= {root, *procfs.descendants([root], exclude=(self.recorder_pid,))}
        return now

    def _keep_departed(self, now: set[int]) -> None:
        """Drop from ``seen`` the pids that left the tree KEEP_CALLS calls ago (the proc_tree
        map loses a task some drains after it exits: drain/tree.py; /proc at once)."""
        self.calls += 1
        for pid in self.departed.keys() & now:  # in the tree again: a reused id
            del self.departed[pid]
        for pid in self.seen - now:
            if self.calls - self.departed.setdefault(pid, self.calls) >= KEEP_CALLS:
                del self.departed[pid]
                self.seen.discard(pid)

    def add_seen(self, pids) -> None:
        """System-wide: processes that ran in the interval (sampled or scheduled) but were gone
        before /proc was read are part of the workload too."""
        if self.target.kind == "system-wide":
            ran = {p for p in pids if p > 0 and p != self.recorder_pid}
            self.count += len(ran - self.seen)
            self.seen |= ran
            self.ran |= ran

    def symbolized(self, workload: set[int]):
        """Whose user stacks get full symbols: the workload, or every process with ``-a``."""
        return _Everyone() if self.target.system_wide else workload

    def keep_cmdline(self) -> bool:
        """Command lines of workload processes are stored, except system-wide (every user's)."""
        return self.target.kind != "system-wide"

    def any_alive(self) -> bool:
        """True while some process of the attached trees (or the cgroup) is running."""
        if self.cgroup_path:
            self._refresh_cgroup()
        if any(procfs.alive(p, s) for p, s in self.roots.items()):
            return True
        parents = None
        if self.tree_map is not None:
            parents = {k.value: v.value for k, v in self.tree_map.items()}
        # Not pids(): a poll is no drain, and changes nothing the drains keep.
        for pid in (self._members(parents) | self.seen) - {0, self.recorder_pid, *self.roots}:
            st = procfs.stat(pid)
            if st is None or st.state in procfs.DEAD_STATES:
                continue
            if self.starts.setdefault(pid, st.starttime) == st.starttime:
                return True
        return False

    def meta(self) -> dict:
        """Metadata keys: workload (kind), system_wide, duration_s, attached [{pid, comm, cmdline}],
        cgroup (the cgroup directory)."""
        return {"workload": self.target.kind, "system_wide": self.target.system_wide,
                "duration_s": self.target.duration_s, "attached": self.attached or None,
                "cgroup": self.cgroup_path}


STOP_TEXT = {"command exited": "command exited {rc}", "duration": "the --duration window closed",
             "stopped": "stopped", "workload exited": "every attached process exited"}


def stop_reason(child) -> str:
    """Why the recording ended (meta ``stop_reason``, a key of ``STOP_TEXT``), from the handle
    ``Workload.start`` returned, once the recording loop is over."""
    if isinstance(child, Watched):
        if child.stop_requested_at is not None:
            return "stopped"
        return "workload exited" if child.exited else "duration"
    return "duration" if child.poll() is None else "command exited"


class _Everyone:
    """A set that contains every pid (full symbols for all processes with ``-a``)."""

    def __contains__(self, pid) -> bool:
        return True


__all__ = ["Target", "Workload", "Watched", "stop_reason", "STOP_TEXT", "make_target", "parse_pids", "check_pids", "cgroup_dir",
           "cgroup_members"]


def descendants_of(parents: dict[int, int], root: int) -> set[int]:
    """``root`` and every pid whose parent chain reaches it."""
    children = defaultdict(list)
    for child, parent in parents.items():
        children[parent].append(child)
    out, todo = {root}, [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out
