"""Measured cipher and codec rates from the ``codec_calls`` table (schema v2, uprobes).

``codec_calls`` has one row per (interval, pid, lib, func, direction) with ``calls``, input
``bytes`` and ``duration_ns`` summed (dpuprof.recording.schema). From it and the sampled CPU of the
same processes (``cpu_category``) this module derives what profiles otherwise take as constants:

- bytes one host CPU-second processes (``bytes_per_cpu_s``) and calls per CPU-second, for a
  subcategory (``crypto.user``: encrypt/decrypt calls; ``compression.user``: compress/decompress);
- the direction split (compress against decompress), by time spent in the calls.

Version-1 recordings read ``codec_calls`` empty: every function here then returns ``None`` and the
caller keeps the profile constant (and says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

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

    @property
    def bytes_per_cpu_s(self) -> float:
        return self.bytes / self.cpu_s

    @property
    def calls_per_cpu_s(self) -> float:
        return self.calls / self.cpu_s

    def describe(self) -> str:
        what = "/".join(self.directions) + ("" if self.codecs is None else f" ({'/'.join(self.codecs)})")
        return (f"measured: {self.bytes / 1e6:.1f} MB in {self.calls:.0f} {what} calls (codec_calls uprobes) "
                f"over {self.cpu_s:.3f} s of sampled {self.subcategory} CPU of the same {len(self.pids)} "
                f"process(es) = {self.bytes_per_cpu_s / 1e9:.3g} GB per CPU-second")


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
            directions=None, codecs=None, pids=None) -> Measured | None:
    """Bytes and calls per sampled CPU-second of ``subcategory`` in the processes that made the calls.

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
    return Measured(subcategory, tuple(directions or DIRECTIONS[subcategory]),
                    None if codecs is None else tuple(codecs), float(sel["bytes"].sum()),
                    float(sel["calls"].sum()), float(sel["duration_ns"].sum()), cpu_s, tuple(who))


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
