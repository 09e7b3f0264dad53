"""Classify a sampled stack into the category taxonomy with the rules in ``data/rules.toml``.

A stack is given as two lists of frame strings, root first: kernel frames (symbol names) and user
frames (``"symbol (module)"``, ``"[unknown] (module)"`` or ``"[unknown]"``). The leaf-most frame that
matches a rule decides (see the header of rules.toml). This module needs neither bcc nor root, so
tests can classify stacks captured from real recordings.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from dpuprof.categories import CATEGORIES, IDLE, top_level

KERNEL_SUFFIX = "_[k]"
NO_KERNEL_MATCH = "kernel_other.other"
NO_USER_MATCH = "compute.other"

_USER_FRAME = re.compile(r"^(?P<sym>.*) \((?P<module>[^()]*)\)$")


def split_user_frame(frame: str) -> tuple[str, str | None]:
    """``"sym (module)"`` -> ``("sym", "module")``; a frame without a module -> ``(frame, None)``."""
    m = _USER_FRAME.match(frame)
    return (m["sym"], m["module"]) if m else (frame, None)


@dataclass(frozen=True)
class _Rule:
    subcategory: str
    kernel: re.Pattern | None
    module: re.Pattern | None
    user: re.Pattern | None


def _compile(globs) -> re.Pattern | None:
    if not globs:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


class Classifier:
    """Rules loaded from a TOML file; ``classify(kernel_frames, user_frames)`` -> subcategory."""

    def __init__(self, rules_path: str | Path | None = None):
        if rules_path is None:
            text = resources.files("dpuprof.data").joinpath("rules.toml").read_text()
        else:
            text = Path(rules_path).read_text()
        self.rules = [self._rule(r) for r in tomllib.loads(text)["rule"]]
        self.digest = hashlib.sha256(text.encode()).hexdigest()  # which rules classified a recording
        self._kernel = lru_cache(maxsize=65536)(self._match_kernel)
        self._user = lru_cache(maxsize=65536)(self._match_user)

    @staticmethod
    def _rule(raw: dict) -> _Rule:
        sub = raw["subcategory"]
        if sub != IDLE and top_level(sub) not in CATEGORIES:
            raise ValueError(f"rules: unknown category in subcategory {sub!r}")
        return _Rule(sub, _compile(raw.get("kernel")), _compile(raw.get("module")), _compile(raw.get("user")))

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

    def classify(self, kernel_frames, user_frames) -> str:
        """Subcategory (``"network.tcpip"``, ..., or ``"idle"``) of one stack; frames root first."""
        for sym in reversed(kernel_frames):
            sub = self._kernel(sym)
            if sub is not None:
                return sub
        if kernel_frames:
            return NO_KERNEL_MATCH
        for frame in reversed(user_frames):
            sub = self._user(frame)
            if sub is not None:
                return sub
        return NO_USER_MATCH

    def classify_folded(self, folded: str) -> str:
        """Classify a folded stack as stored in a recording (kernel frames end in ``_[k]``)."""
        kernel, user = split_folded(folded)
        return self.classify(kernel, user)


def split_folded(folded: str) -> tuple[list[str], list[str]]:
    """Folded stack text (root first, ';'-separated) -> (kernel frames, user frames), root first."""
    kernel, user = [], []
    for frame in folded.split(";") if folded else []:
        if frame.endswith(KERNEL_SUFFIX):
            kernel.append(frame[: -len(KERNEL_SUFFIX)])
        else:
            user.append(frame)
    return kernel, user


def fold(kernel_frames, user_frames) -> str:
    """(kernel frames, user frames), root first -> folded text: user frames, then kernel frames."""
    return ";".join([*user_frames, *(f + KERNEL_SUFFIX for f in kernel_frames)])
