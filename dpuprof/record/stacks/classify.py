"""Classify a sampled stack into the category taxonomy with the rules in ``data/rules.toml``.

A stack is given as two lists of frame strings, root first: kernel frames (symbol names) and user
frames (``"symbol (module)"``, ``"[unknown] (module)"`` or ``"[unknown]"``), plus the sampled
thread's name (comm). A kernel stack with an ``[[observer]]`` frame anywhere in it (dpuprof's own
BPF programs, the helpers they call, the kernel code that runs them) is the recorder's cost and
goes to that observer subcategory before any other rule is tried. Otherwise the leaf-most frame
that matches a rule decides; context rules then move memory management, scheduling and syscall
entry/exit work done under a network or storage frame (or in a collective library's transport
thread) to that category; and a kernel sample gets the *cause* named by its leaf-most user frame
that a user-space rule matches (docs/taxonomy.md).
This module needs neither bcc nor root, so tests can classify stacks captured from real recordings.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from dpuprof.categories import IDLE, top_level
from dpuprof.record.stacks import rulefile
from dpuprof.recording.folded import SEP, join as join_frames, split as split_frames

KERNEL_SUFFIX = "_[k]"
NO_KERNEL_MATCH = "kernel_other.other"
NO_USER_MATCH = "compute.other"

_USER_FRAME = re.compile(r"^(?P<sym>.*) \((?P<module>[^()]*)\)$")


def split_user_frame(frame: str) -> tuple[str, str | None]:
    """``"sym (module)"`` -> ``("sym", "module")``; a frame without a module -> ``(frame, None)``."""
    m = _USER_FRAME.match(frame)
    return (m["sym"], m["module"]) if m else (frame, None)


@dataclass(frozen=True)
class Classification:
    """What a stack was filed as: ``subcategory`` (``top.sub``, ``idle`` or ``observer.*``) and ``cause``, the
    user-space work that made the kernel run (``"crypto"``, ``"python-alloc"``; ``""`` when the
    sample is in user mode or no user frame matched a rule)."""

    subcategory: str
    cause: str = ""

    @property
    def category(self) -> str:
        return top_level(self.subcategory)


@dataclass(frozen=True)
class _Rule:
    subcategory: str
    kernel: re.Pattern | None
    module: re.Pattern | None
    user: re.Pattern | None
    cause: str


@dataclass(frozen=True)
class _Context:
    leaf: re.Pattern
    under: frozenset
    suffix: str


@dataclass(frozen=True)
class _Thread:
    subcategory: str
    comm: re.Pattern
    overrides: re.Pattern


@dataclass(frozen=True)
class _UserMatch:
    """A user-frame pattern set (wrapper or cause rules): ``value`` is its category or cause."""

    value: str
    module: re.Pattern | None
    user: re.Pattern | None

    def matches(self, sym: str, module: str | None) -> bool:
        return bool((module is not None and self.module is not None and self.module.match(module))
                    or (self.user is not None and self.user.match(sym)))


def _builtin_text() -> str:
    return resources.files("dpuprof.data").joinpath("rules.toml").read_text()


class Classifier:
    """Rules loaded from TOML; ``classify(kernel_frames, user_frames, comm)`` -> subcategory and
    ``explain(...)`` -> :class:`Classification`.

    ``rules_path`` replaces the built-in rules (tests); ``extra`` names a user's rule file whose
    entries are tried before the built-in ones (``dpuprof record --rules FILE``), so they win.
    ``digest`` is the sha256 of the rule text used (the extra file's, a newline, the base's).
    """

    def __init__(self, rules_path: str | Path | None = None, extra: str | Path | None = None):
        base = _builtin_text() if rules_path is None else rulefile.read(rules_path, str(rules_path))
        texts = [(rulefile.read(extra, f"--rules {extra}"), f"--rules {extra}")] if extra is not None else []
        texts.append((base, "built-in rules.toml" if rules_path is None else str(rules_path)))
        entries = [e for text, origin in texts for e in rulefile.parse(text, origin)]
        self.digest = hashlib.sha256("\n".join(t for t, _ in texts).encode()).hexdigest()
        self._load(entries)
        self._kernel = lru_cache(maxsize=65536)(self._match_kernel)
        self._user = lru_cache(maxsize=65536)(self._match_user)
        self._boundary_cached = lru_cache(maxsize=65536)(self._is_boundary)
        self._thread_cached = lru_cache(maxsize=4096)(self._match_thread)
        self._observer_cached = lru_cache(maxsize=65536)(self._match_observer)
        self._cause_cached = lru_cache(maxsize=65536)(self._frame_cause)

    def _load(self, entries) -> None:
        by = {kind: [e for e in entries if e.kind == kind] for kind in rulefile.KINDS}
        self.rules = [_Rule(e.values["subcategory"], e.pattern("kernel"), e.pattern("module"), e.pattern("user"),
                            e.values.get("cause", top_level(e.values["subcategory"])))
                      for e in by["rule"]]
        self.contexts = [_Context(e.pattern("leaf"), frozenset(e.values["under"]), e.values["suffix"])
                         for e in by["context"]]
        self.threads = [_Thread(e.values["subcategory"], e.pattern("comm"), e.pattern("overrides"))
                        for e in by["thread"]]
        self.wrappers = [_UserMatch(e.values["category"], e.pattern("module"), e.pattern("user"))
                         for e in by["wrapper"]]
        self.causes = [_UserMatch(e.values["cause"], e.pattern("module"), e.pattern("user")) for e in by["cause"]]
        self.causes += [_UserMatch(r.cause, r.module, r.user) for r in self.rules if r.module or r.user]
        self.boundary = rulefile.compile_globs([g for e in by["boundary"] for g in e.values["kernel"]])
        self.entry = rulefile.compile_globs([g for e in by["entry"] for g in e.values["kernel"]])
        self.observers = [(e.values["subcategory"], e.pattern("kernel")) for e in by["observer"]]

    # ------------------------------------------------------------------ per-frame matches (cached)
    def _match_kernel(self, sym: str) -> str | None:
        for rule in self.rules:
            if rule.kernel is not None and rule.kernel.match(sym):
                return rule.subcategory
        return None

    def _match_user(self, frame: str) -> str | None:
        sym, module = split_user_frame(frame)
        for rule in self.rules:
            if module is not None and rule.module is not None and rule.module.match(module):
                return rule.subcategory
            if rule.user is not None and rule.user.match(sym):
                return rule.subcategory
        return None

    def _match_observer(self, sym: str) -> str | None:
        return next((sub for sub, pat in self.observers if pat.match(sym)), None)

    def observer(self, kernel_frames) -> str | None:
        """The observer subcategory of a kernel stack with one of dpuprof's own BPF frames anywhere
        in it (not only at the leaf: the helpers a program calls are its cost too), else None."""
        for frame in kernel_frames:
            found = self._observer_cached(frame)
            if found is not None:
                return found
        return None

    def _is_boundary(self, sym: str) -> bool:
        return self.boundary is not None and bool(self.boundary.match(sym))

    def _match_thread(self, comm: str) -> _Thread | None:
        return next((t for t in self.threads if t.comm.match(comm)), None)

    def thread_rule(self, comm: str | None) -> str | None:
        """The subcategory a thread rule gives threads named ``comm`` (None: no thread rule). Stacks
        of such threads classify differently from the same frames elsewhere, so callers that cache
        a stack's classification key it on this too."""
        t = self._thread_cached(comm) if comm else None
        return t.subcategory if t else None

    # ------------------------------------------------------------------ whole stacks
    def classify(self, kernel_frames, user_frames, comm: str | None = None) -> str:
        """Subcategory (``"network.tcpip"``, ..., ``"idle"`` or ``"observer.bpf"``) of one stack;
        frames root first."""
        return self.explain(kernel_frames, user_frames, comm).subcategory

    def explain(self, kernel_frames, user_frames, comm: str | None = None) -> Classification:
        """Subcategory and cause of one stack (frames root first) sampled in thread ``comm``."""
        thread = self._thread_cached(comm) if comm else None
        if kernel_frames:
            # The recorder's cost wins over every rule and thread rule: it is not the job's work.
            mine = self.observer(kernel_frames)
            if mine is not None:
                return Classification(mine)
            sub = self._classify_kernel(kernel_frames, user_frames, thread)
            # An interrupt or softirq is not work done for the user code it interrupted.
            caused = not any(self._boundary_cached(f) for f in kernel_frames)
            return Classification(sub, self._cause(user_frames) if caused else "")
        sub = NO_USER_MATCH
        for frame in reversed(user_frames):
            found = self._user(frame)
            if found is not None:
                sub = found
                break
        if thread is not None and thread.overrides.match(sub):
            sub = thread.subcategory
        return Classification(sub)

    def _classify_kernel(self, kframes, uframes, thread: _Thread | None) -> str:
        leaf = len(kframes) - 1
        sub = None
        while leaf >= 0:
            sub = self._kernel(kframes[leaf])
            if sub is not None:
                break
            leaf -= 1
        sub = sub or NO_KERNEL_MATCH
        ctx = next((c for c in self.contexts if c.leaf.match(sub)), None)
        if ctx is not None:
            # The nearest frame towards the root with a rule that is not itself context-eligible
            # (mm under mm, the syscall entry) decides: a network or storage frame gives its
            # category; any other (IPC: unix sockets, crypto) or an interrupt or softirq entry
            # ends the walk (interrupt work is not done for the code it interrupted).
            for i in range(leaf - 1, -1, -1):
                if self._boundary_cached(kframes[i]):
                    break
                outer = self._kernel(kframes[i])
                if outer is None or self._eligible(outer):
                    continue
                if top_level(outer) in ctx.under:
                    return f"{top_level(outer)}.{ctx.suffix}"
                break
            else:
                cat = self._wrapper_context(kframes, uframes)
                if cat is None and thread is not None:
                    cat = top_level(thread.subcategory)
                if cat in ctx.under:
                    return f"{cat}.{ctx.suffix}"
        if thread is not None and thread.overrides.match(sub):
            return thread.subcategory
        return sub

    def _eligible(self, sub: str) -> bool:
        return any(c.leaf.match(sub) for c in self.contexts)

    def _wrapper_context(self, kframes, uframes) -> str | None:
        """A system call's category named by the libc wrapper that made it (``pread64`` ->
        storage): a sample in syscall entry/exit code has no frame of the call itself."""
        if not uframes or self.entry is None or not self.entry.match(kframes[0]):
            return None
        sym, module = split_user_frame(uframes[-1])
        return next((w.value for w in self.wrappers if w.matches(sym, module)), None)

    def _cause(self, uframes) -> str:
        for frame in reversed(uframes):
            cause = self._cause_cached(frame)
            if cause:
                return cause
        return ""

    def _frame_cause(self, frame: str) -> str:
        """The first cause rule matching one user frame ("" for none); cached per frame, since the
        recorder classifies every new stack and the same frames recur in most of them (a quarter
        of a --light drain's CPU was this loop over every rule)."""
        sym, module = split_user_frame(frame)
        return next((rule.value for rule in self.causes if rule.matches(sym, module)), "")

    def classify_folded(self, folded: str, comm: str | None = None) -> str:
        """Classify a folded stack as stored in a recording (kernel frames end in ``_[k]``)."""
        kernel, user = split_folded(folded)
        return self.classify(kernel, user, comm)

    def explain_folded(self, folded: str, comm: str | None = None) -> Classification:
        """:meth:`explain` of a folded stack."""
        kernel, user = split_folded(folded)
        return self.explain(kernel, user, comm)


def split_folded(folded: str) -> tuple[list[str], list[str]]:
    """Folded stack text (root first, ';'-separated) -> (kernel frames, user frames), root first."""
    kernel, user = [], []
    for frame in split_frames(folded):
        if frame.endswith(KERNEL_SUFFIX):
            kernel.append(frame[: -len(KERNEL_SUFFIX)])
        else:
            user.append(frame)
    return kernel, user


def fold(kernel_frames, user_frames) -> str:
    """(kernel frames, user frames), root first -> folded text: user frames, then kernel frames.
    (Each kernel frame's suffix goes in with the separator, in one join: no string per frame.)"""
    kernel = (KERNEL_SUFFIX + SEP).join(kernel_frames) + KERNEL_SUFFIX if kernel_frames else ""
    if not user_frames:
        return kernel
    user = join_frames(user_frames)
    return f"{user}{SEP}{kernel}" if kernel_frames else user


__all__ = ["Classifier", "Classification", "split_folded", "split_user_frame", "fold", "IDLE"]
