"""Classify `perf record -g` samples with dpuprof's own rules, for the side-by-side comparison.

``perf script`` prints each sample as a header line (comm, pid/tid, period) followed by its call
chain, leaf first, one ``ADDR SYMBOL (DSO)`` line per frame. Each sample is turned into the two
frame lists dpuprof's classifier takes (root first): kernel frames as plain symbol names (an address
in kernel space), user frames as ``"symbol (module)"`` with the module labelled the way the recorder
labels it (relative to site-packages when inside one, else the base name). Then
``dpuprof.record.stacks.classify.Classifier`` decides, with the same rules file as the recorder.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

from dpuprof.categories import top_level
from dpuprof.record.stacks.classify import Classifier
from dpuprof.record.stacks.symbols import UNKNOWN, clean, module_label

KERNEL_SPACE = 0xFFFF800000000000
# "    python3  6919/6919   2096.345397:   10101010 cpu-clock:ppp: " (fields vary a little)
_HEADER = re.compile(r"^\S.*?\s(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?:(?P<period>\d+)\s+)?")
_FRAME = re.compile(r"^\s+(?P<addr>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


def _user_frame(sym: str, dso: str) -> str:
    sym = clean(sym.split("+0x")[0]) if sym and sym != UNKNOWN else UNKNOWN
    if not dso or dso == UNKNOWN:
        return UNKNOWN  # the recorder's frame for an address that maps to no module
    label = clean(module_label(dso)).replace("(", "[").replace(")", "]")
    return f"{sym} ({label})"


def parse(text: str):
    """Yield (pid, period, kernel frames, user frames) per sample; frames root first."""
    pid = period = None
    kframes: list[str] = []
    uframes: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            if pid is not None:
                yield pid, period, kframes[::-1], uframes[::-1]
            pid = None
            continue
        if not line[0].isspace():
            if pid is not None:
                yield pid, period, kframes[::-1], uframes[::-1]
            m = _HEADER.match(line)
            pid = int(m["pid"]) if m else -1
            period = int(m["period"]) if m and m["period"] else 1
            kframes, uframes = [], []
            continue
        m = _FRAME.match(line)
        if m is None or pid is None:
            continue
        addr = int(m["addr"], 16)
        if addr >= KERNEL_SPACE:
            if addr >= 0xFFFFFFFFFFFFF000:  # PERF_CONTEXT_* markers
                continue
            kframes.append(clean(m["sym"].split("+0x")[0]))
        else:
            uframes.append(_user_frame(m["sym"], m["dso"]))
    if pid is not None:
        yield pid, period, kframes[::-1], uframes[::-1]


def perf_script(perf_data: str) -> str:
    cmd = ["perf", "script", "-i", perf_data, "-F", "comm,pid,tid,period,ip,sym,dso"]
    res = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    if res.returncode != 0 and not res.stdout:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.strip()[:300]}")
    return res.stdout


def classify_perf(perf_data: str, classifier: Classifier | None = None) -> dict[int, dict[str, float]]:
    """{pid: {top-level category (idle included): samples}} for every process in ``perf_data``.

    Samples are counted (each is one period of the cpu-clock event; perf has no other weight)."""
    classifier = classifier or Classifier()
    out: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cache: dict[tuple, str] = {}
    for pid, _period, kframes, uframes in parse(perf_script(perf_data)):
        key = (tuple(kframes), tuple(uframes))
        cat = cache.get(key)
        if cat is None:
            if pid == 0 and not uframes:
                sub = classifier.classify(kframes, uframes) if kframes else "idle"
            else:
                sub = classifier.classify(kframes, uframes or ([] if kframes else ["[no stack]"]))
                if sub == "idle":
                    sub = "kernel_other.other"  # as the recorder: a task's own context is never idle
            cat = cache[key] = top_level(sub)
        out[pid][cat] += 1
    return {pid: dict(cats) for pid, cats in out.items()}
