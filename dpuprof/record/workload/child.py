"""Start the recorded command and manage its lifetime.

- Under sudo the command runs as the invoking user (SUDO_UID/SUDO_GID, their groups, HOME, USER,
  LOGNAME) unless ``as_root``; the recording is handed to that user too.
- The recorder blocks SIGINT/SIGTERM/SIGCHLD and takes them synchronously with sigtimedwait, so the
  siginfo says who sent them. A SIGINT typed at the terminal (si_code SI_KERNEL) already reached
  the child through the foreground process group and is not sent twice; a SIGINT or SIGTERM sent to
  the recorder alone (kill, Slurm) is forwarded. The child starts with the signals unblocked.
- Stop escalation for a child that ignores SIGINT: SIGTERM after ``TERM_AFTER_S``, SIGKILL
  ``KILL_AFTER_S`` later (``dpuprof record --term-after/--kill-after`` change them); a second
  Ctrl-C moves one step at once.
- A stop signal (SIGINT, SIGTERM, SIGHUP) that is already pending when the command would start
  (it came while the probes compiled) means the command is never started: see ``pending_stop``.
- ``resolve_command`` finds the command as the child's exec will, before the probes compile, so a
  typo is one line in a fraction of a second, not after seconds of compiling.
"""

from __future__ import annotations

import os
import pwd
import signal
import stat
import subprocess
from dataclasses import dataclass

from dpuprof.errors import UserError

TERM_AFTER_S = 10.0
KILL_AFTER_S = 5.0
HANDLED = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP}
STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SI_KERNEL = 0x80


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    name: str
    home: str


def invoking_user(as_root: bool = False) -> Identity | None:
    """The user who ran sudo, when we are root through sudo; None otherwise."""
    if as_root or os.geteuid() != 0:
        return None
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if not uid or not uid.isdigit() or int(uid) == 0:
        return None
    uid = int(uid)
    try:
        pw = pwd.getpwuid(uid)
        name, home = pw.pw_name, pw.pw_dir
    except KeyError:
        name, home = os.environ.get("SUDO_USER", str(uid)), "/"
    return Identity(uid, int(gid) if gid and gid.isdigit() else uid, name, home)


class CommandNotFound(UserError):
    exit_code = 127


def resolve_command(name: str, user: Identity | None) -> str:
    """The file that ``Child([name, ...], user)`` would execute: ``name`` itself when it holds a
    '/', else the first executable match in $PATH's directories (execvp's search, over the
    PATH the child inherits). Executable means for ``user`` (the invoking user under sudo: the
    command runs as them) or, with None, for dpuprof itself. CommandNotFound (exit 127) when no
    such file exists; UserError "permission denied" when one exists but none may be executed (as
    execvp reports EACCES only when nothing later in PATH runs). The directories on the way are
    not checked for ``user``'s search permission: exec still reports that one (later)."""
    candidates = [name] if "/" in name else [os.path.join(d or ".", name) for d in os.get_exec_path()]
    denied = False
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and _may_execute(path, st, user):
            return path
        denied = True
    if denied:
        raise UserError(f"permission denied: {name}" + (f" (as user {user.name})" if user else ""))
    raise CommandNotFound(f"command not found: {name}")


def _may_execute(path: str, st: os.stat_result, user: Identity | None) -> bool:
    if user is None:
        return os.access(path, os.X_OK)  # dpuprof's own ids, ACLs included
    try:
        if "system.posix_acl_access" in os.listxattr(path):
            return True  # an ACL may allow it: leave the answer to exec rather than refuse a runnable command
    except OSError:
        pass
    if st.st_uid == user.uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in {user.gid, *os.getgrouplist(user.name, user.gid)}:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


class Child:
    """The recorded command. ``returncode`` follows shell convention: 128+N when killed by N."""

    def __init__(self, argv: list[str], user: Identity | None, term_after: float = TERM_AFTER_S,
                 kill_after: float = KILL_AFTER_S, env_extra: dict[str, str] | None = None):
        env = dict(os.environ) | (env_extra or {})  # env_extra: e.g. PYTHONPERFSUPPORT (perfmap.ENV)
        kwargs = {}
        if user is not None:
            env.update(HOME=user.home, USER=user.name, LOGNAME=user.name)
            for var in ("SUDO_UID", "SUDO_GID", "SUDO_USER", "SUDO_COMMAND"):
                env.pop(var, None)
            kwargs = {"user": user.uid, "group": user.gid,
                      "extra_groups": os.getgrouplist(user.name, user.gid)}
        try:
            self.proc = subprocess.Popen(argv, env=env, preexec_fn=_unblock_signals, **kwargs)
        except FileNotFoundError:
            raise CommandNotFound(f"command not found: {argv[0]}") from None
        except PermissionError:
            raise UserError(f"permission denied: {argv[0]}") from None
        self.pid = self.proc.pid
        self.stop_requested_at: float | None = None
        self.escalation = 0  # 0 nothing sent, 1 SIGINT/TERM forwarded, 2 SIGTERM, 3 SIGKILL
        self.term_after, self.kill_after = term_after, kill_after

    def poll(self) -> int | None:
        return self.proc.poll()

    @property
    def returncode(self) -> int | None:
        rc = self.proc.returncode
        if rc is None:
            return None
        return 128 - rc if rc < 0 else rc

    def send(self, sig: int) -> None:
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def escalate(self, now: float) -> None:
        """Move one step: SIGTERM, then SIGKILL."""
        self.stop_requested_at = now
        if self.escalation < 2:
            self.escalation = 2
            self.send(signal.SIGTERM)
        else:
            self.escalation = 3
            self.send(signal.SIGKILL)

    def check_escalation(self, now: float) -> None:
        """Escalate when the child outlives the documented timeouts after a stop request."""
        if self.stop_requested_at is None or self.poll() is not None:
            return
        waited = now - self.stop_requested_at
        if (self.escalation == 1 and waited >= self.term_after) or (self.escalation == 2 and waited >= self.kill_after):
            self.escalate(now)


def _unblock_signals():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
    # A recorder run with ambient capabilities (not root) must not pass them on to the command.
    from dpuprof.record.workload.privilege import clear_ambient  # noqa: PLC0415 -- loaded by `dpuprof --help`; privilege (ctypes) ~5 ms

    clear_ambient()


def block_signals():
    """Block the handled signals in the recorder; returns the previous mask."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)


def pending_stop() -> int | None:
    """Take a pending (blocked) stop signal, if any, and return its number; None when none is pending."""
    if not set(STOP) & signal.sigpending():
        return None
    info = signal.sigtimedwait(STOP, 0)
    return info.si_signo if info is not None else None


def from_terminal(info) -> bool:
    """True when a signal was generated by the tty driver (and so went to the whole group)."""
    return info.si_code == SI_KERNEL
