"""Measured cipher and codec rates from the ``codec_calls`` table (schema v2, uprobes).

``codec_calls`` has one row per (interval, pid, lib, func, direction) with ``calls``, input
``bytes`` and ``duration_ns`` summed (dpuprof.recording.schema). From it and the sampled CPU of the
same processes (``cpu_category``) this module derives what profiles otherwise take as constants:

- bytes one host CPU-second processes (``bytes_per_cpu_s``) and calls per CPU-second, for a
  subcategory (``crypto.user``: encrypt/decrypt calls; ``compression.user``: compress/decompress);
- the direction split (compress against decompress), by time spent in the calls.

Version-1 recordings read ``codec_calls`` empty: every function here then returns ``None`` and the
caller keeps the profile constant (and says so).

Partial counts (issue 35). The recorder detaches a uprobe called more often than its limit
(``dpuprof record --codec-uprobes``; DPUPROF_UPROBE_MAX_HZ): that target's rows then count only
the calls before the detach, while the sampled CPU they are divided by covers the whole run.
``extrapolate`` scales each such target's bytes, calls and times by span_s / covered_s (the weight
the recording stored: dpuprof/recording/partial.py), i.e. it assumes the call rate after the detach
was the rate before; ``Measured.basis`` is then ``"extrapolated"`` and ``describe`` says "extrapolated
from the first N s of M s". The traps slow the calls while attached, so the scaled figure still
tends low (a 16 KiB AES-GCM loop: 18.3 GB extrapolated from 5.8 GB counted, 30.1 GB called). Where the recording does not say when a target detached (older files)
its counts stay as counted and the basis is ``"lower_bound"``: bytes and calls per CPU-second are at
least the figures given. The projection's rows carry the basis as ``rate_basis``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from dpuprof.recording.partial import DetachedProbe

#: Directions the recorder writes per kind of work, and the subcategory that kind's CPU lands in.
DIRECTIONS = {"crypto.user": ("encrypt", "decrypt"), "compression.user": ("compress", "decompress")}

_LIB_CODECS = (("lz4", re.compile(r"lz4", re.I)), ("zstd", re.compile(r"zstd", re.I)),
               ("snappy", re.compile(r"snappy", re.I)),
               ("deflate", re.compile(r"(^|[/_.-])(libz|zlib|libdeflate|isal|deflate|inflate)", re.I)))


def lib_codec(lib: str, func: str = "") -> str:
    """Codec family of a (lib, func): deflate, lz4, zstd, snappy, or 'other'."""
    for name, pat in _LIB_CODECS:
        if pat.search(lib or "") or pat.search(func or ""):
            return name
    return "other"


@dataclass(frozen=True)
class Measured:
    """What the uprobes measured for one subcategory's calls (units in the names)."""

    subcategory: str
    directions: tuple
    codecs: tuple | None
    bytes: float
    calls: float
    duration_ns: float
    cpu_s: float          # sampled CPU of the same processes in the subcategory, scaled to these calls
    pids: tuple
    counted_bytes: float | None = None  # bytes the rows hold before ``extrapolate`` (None: = bytes)
    basis: str = "measured"  # "measured", "extrapolated" (partial counts scaled up) or "lower_bound"
    detached: tuple = ()     # DetachedProbe of the targets among these calls that stopped early

    @property
    def bytes_per_cpu_s(self) -> float:
        return self.bytes / self.cpu_s

    @property
    def calls_per_cpu_s(self) -> float:
        return self.calls / self.cpu_s

    def describe(self) -> str:
        what = "/".join(self.directions) + ("" if self.codecs is None else f" ({'/'.join(self.codecs)})")
        body = (f"{self.bytes / 1e6:.1f} MB in {self.calls:.0f} {what} calls (codec_calls uprobes) "
                f"over {self.cpu_s:.3f} s of sampled {self.subcategory} CPU of the same {len(self.pids)} "
                f"process(es) = {self.bytes_per_cpu_s / 1e9:.3g} GB per CPU-second")
        if self.basis == "measured":
            return "measured: " + body
        why = ", ".join(_why(p) for p in self.detached)
        counted = "" if self.counted_bytes is None else f"; {self.counted_bytes / 1e6:.1f} MB counted"
        if self.basis == "extrapolated":
            first = min(p.covered_s for p in self.detached if p.weight is not None)
            span = max(p.span_s for p in self.detached if p.weight is not None)
            return (f"extrapolated from the first {first:.1f} s of {span:.1f} s ({why}; scaled by the time it "
                    f"covered, assuming a steady call rate{counted}): " + body)
        return f"lower bound, partial counts ({why}; calls after it not counted{counted}): at least " + body


def _why(p: DetachedProbe) -> str:
    rate = "" if p.calls_per_s is None else f" at {p.calls_per_s:.0f} calls/s"
    when = " (when: not recorded)" if p.weight is None else f" after {p.covered_s:.1f} s"
    return f"uprobe {p.target} detached{rate}{when}"


def extrapolate(codec_calls: pd.DataFrame, detached) -> pd.DataFrame:
    """``codec_calls`` with a ``weight`` column and the rows of targets that stopped early scaled up.

    ``detached``: DetachedProbe of the recording. A row's target is ``lib:func``; its weight is 1.0
    when the target was never detached, the probe's ``weight`` (covered_s / span_s) when known (then
    calls, bytes, duration_ns and cpu_ns are divided by it; ``counted_bytes`` keeps the bytes
    counted), NaN when not known (the row stays as counted: a lower bound).
    """
    if codec_calls is None:
        return codec_calls
    df = codec_calls.copy()
    df["counted_bytes"] = df["bytes"].astype(float) if "bytes" in df.columns else 0.0
    df["weight"] = 1.0
    if df.empty or not detached:
        return df
    key = df["lib"].astype(str) + ":" + df["func"].astype(str)
    for probe in detached:
        hit = key == probe.target
        if not hit.any():
            continue
        w = probe.weight
        df.loc[hit, "weight"] = float("nan") if w is None else w
        if w is not None:
            for col in ("calls", "bytes", "duration_ns", "cpu_ns"):
                if col in df.columns:
                    df[col] = df[col].astype(float)
                    df.loc[hit, col] = df.loc[hit, col] / w
    return df


def _calls(codec_calls: pd.DataFrame, subcategory: str, pids=None) -> pd.DataFrame:
    dirs = DIRECTIONS.get(subcategory)
    if dirs is None or codec_calls is None or codec_calls.empty:
        return codec_calls.iloc[0:0] if codec_calls is not None else pd.DataFrame()
    df = codec_calls[codec_calls["direction"].isin(dirs)]
    if pids is not None:
        df = df[df["pid"].isin(pids)]
    if df.empty:
        return df
    return df.assign(codec=[lib_codec(lib, f) for lib, f in zip(df["lib"], df["func"])])


def _select(df: pd.DataFrame, directions=None, codecs=None) -> pd.DataFrame:
    if directions is not None:
        df = df[df["direction"].isin(directions)]
    if codecs is not None:
        df = df[df["codec"].isin(codecs)]
    return df


def measure(codec_calls: pd.DataFrame, cpu_category: pd.DataFrame, subcategory: str,
            directions=None, codecs=None, pids=None, detached=()) -> Measured | None:
    """Bytes and calls per sampled CPU-second of ``subcategory`` in the processes that made the calls.

    ``codec_calls``: as recorded, or as ``extrapolate`` gave it (then ``detached``, the same
    DetachedProbe list, names the targets behind a basis other than "measured").

    ``directions`` / ``codecs`` select a subset of the calls; the subcategory's CPU of those processes
    is then scaled by the subset's share of the time spent in all of that kind's calls. ``pids``
    limits to some processes. None when nothing was measured or no CPU was sampled there.
    """
    allc = _calls(codec_calls, subcategory, pids)
    if allc.empty:
        return None
    sel = _select(allc, directions, codecs)
    if sel.empty or float(sel["bytes"].sum()) <= 0:
        return None
    who = sorted(set(sel["pid"].astype(int)))
    allc = allc[allc["pid"].isin(who)]
    cpu = cpu_category
    cpu_s = float(cpu.loc[(cpu["subcategory"] == subcategory) & cpu["pid"].isin(who), "cpu_s"].sum()) \
        if cpu is not None and not cpu.empty else 0.0
    total_ns = float(allc["duration_ns"].sum())
    frac = float(sel["duration_ns"].sum()) / total_ns if total_ns > 0 else len(sel) / max(1, len(allc))
    cpu_s *= frac
    if cpu_s <= 0:
        return None
    counted, basis, partial = _basis(sel, detached)
    return Measured(subcategory, tuple(directions or DIRECTIONS[subcategory]),
                    None if codecs is None else tuple(codecs), float(sel["bytes"].sum()),
                    float(sel["calls"].sum()), float(sel["duration_ns"].sum()), cpu_s, tuple(who),
                    counted_bytes=counted, basis=basis, detached=partial)


def _basis(sel: pd.DataFrame, detached) -> tuple[float | None, str, tuple]:
    """(bytes counted, basis, the DetachedProbe among ``sel``'s targets) of the selected rows."""
    if "weight" not in sel.columns or (sel["weight"] == 1.0).all():
        return None, "measured", ()
    keys = set(sel["lib"].astype(str) + ":" + sel["func"].astype(str))
    partial = tuple(p for p in detached or () if p.target in keys)
    basis = "lower_bound" if sel["weight"].isna().any() else "extrapolated"
    return float(sel["counted_bytes"].sum()), basis, partial


def time_fraction(codec_calls: pd.DataFrame, subcategory: str, directions=None, codecs=None,
                  within_codecs=None, pids=None) -> float | None:
    """Share (0..1) of the time in ``subcategory``'s calls spent in the selected ones.

    ``within_codecs`` restricts the denominator to those codecs (for a direction split within
    DEFLATE/LZ4). None when nothing was measured.
    """
    allc = _calls(codec_calls, subcategory, pids)
    if within_codecs is not None and not allc.empty:
        allc = allc[allc["codec"].isin(within_codecs)]
    if allc.empty:
        return None
    total = float(allc["duration_ns"].sum())
    part = float(_select(allc, directions, codecs)["duration_ns"].sum())
    return part / total if total > 0 else None
