"""Measured quantities the model needs: CPU demand per subcategory, offload counts, and the shares
of a subcategory that a mechanism can take, all computed from the recording's DataFrames.

- ``demand(inp)``: DataFrame[category, subcategory, host_s, workload_s] -- CPU seconds per
  subcategory, host-wide and for the workload's own processes; idle excluded.
- ``Features``: counts (packets, block I/Os, socket calls and bytes) and share functions. Shares
  read stack evidence where the taxonomy alone cannot tell: kTLS/IPsec versus dm-crypt for
  ``crypto.kernel``, codec and direction for ``compression.user``. Where the evidence is missing
  the share is 0 (conservative) and a warning says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from dpuprof.categories import NOT_WORK, top_level
from dpuprof.project import codecs
from dpuprof.project.inputs import ProjectionInput
from dpuprof.recording.folded import split as split_frames

#: sock_io protocols that travel over IP (the recorder writes other families' numbers, e.g. "0" for unix).
IP_PROTOCOLS = ("tcp", "udp", "sctp", "mptcp", "udplite")

# --------------------------------------------------------------------------------- CPU demand


def demand(inp: ProjectionInput) -> pd.DataFrame:
    """CPU seconds per subcategory: DataFrame[category, subcategory, host_s, workload_s].

    ``host_s``: all processes (idle, and observer: dpuprof's own BPF programs, excluded);
    ``workload_s``: the job's own processes.
    Sorted by category then subcategory.
    """
    cpu = inp.table("cpu_category")
    cols = ["category", "subcategory", "host_s", "workload_s"]
    if cpu.empty:
        return pd.DataFrame(columns=cols)
    busy = cpu[~cpu["category"].isin(NOT_WORK)]
    busy = busy.assign(subcategory=busy["subcategory"].where(busy["subcategory"] != "", busy["category"]))
    host = busy.groupby("subcategory")["cpu_s"].sum()
    wl = busy[busy["pid"].isin(inp.workload_pids)].groupby("subcategory")["cpu_s"].sum()
    out = pd.DataFrame({"host_s": host, "workload_s": wl}).fillna(0.0)
    out.index.name = "subcategory"
    out = out.reset_index()
    out["category"] = out["subcategory"].map(top_level)
    return out[cols].sort_values(["category", "subcategory"]).reset_index(drop=True)


# ------------------------------------------------------------------------- stack evidence

_NET_CRYPTO = re.compile(r"^(tls_|esp_|esp4_|esp6_|xfrm)")
_STORAGE_CRYPTO = re.compile(r"^(kcryptd|crypt_convert|crypt_map|crypt_page|dm_crypt|fscrypt_|blk_crypto)")
_CODEC_MODULES = (
    ("deflate", re.compile(r"(^|/)(libz\.so|zlib[^/]*\.so|libdeflate|libisal|isal/)")),
    ("lz4", re.compile(r"(^|/)(liblz4|lz4/)")),
    ("zstd", re.compile(r"(^|/)(libzstd|zstd[^/]*\.so|zstandard/)")),
    ("snappy", re.compile(r"(^|/)(libsnappy|snappy/)")),
)
_CODEC_SYMBOLS = (
    ("deflate", re.compile(r"^(deflate|inflate|compress2?$|uncompress|zlib_|crc32_z|adler32)")),
    ("lz4", re.compile(r"^(LZ4_|lz4)")),
    ("zstd", re.compile(r"^(ZSTD_|HUF_|FSE_|zstd)")),
    ("snappy", re.compile(r"snappy", re.I)),
)
# File-system implementation below the page cache: the work a DPU-side file system (virtio-fs)
# would take over. Page-cache hits (filemap_read copying to the user) stay on the host.
_FS_IMPL = re.compile(r"^(__)?(ext4|ext4fs|jbd2|xfs|btrfs|f2fs|iomap|mpage|do_mpage|nfs|squashfs|erofs|"
                      r"writeback|do_writepages|block_write|__block_write|mark_buffer_dirty)")
_DECOMPRESS = re.compile(r"decompress|inflate|uncompress|decode", re.I)
_COMPRESS = re.compile(r"compress|deflate|encode", re.I)


def _frames(folded: str) -> list[tuple[str, str | None]]:
    """Frames leaf first, as (symbol, module or None for kernel frames)."""
    out = []
    for frame in reversed(split_frames(folded)):
        if frame.endswith("_[k]"):
            out.append((frame[:-4], None))
        elif frame.endswith(")") and " (" in frame:
            sym, mod = frame[:-1].rsplit(" (", 1)
            out.append((sym, mod))
        else:
            out.append((frame, ""))
    return out


def crypto_kind(folded: str) -> str:
    """'network' (kTLS/IPsec), 'storage' (dm-crypt/fscrypt) or 'unknown': leaf-most match wins."""
    for sym, mod in _frames(folded):
        if mod is None:
            if _NET_CRYPTO.match(sym):
                return "network"
            if _STORAGE_CRYPTO.match(sym):
                return "storage"
    return "unknown"


def below_page_cache(folded: str) -> bool:
    """True when a storage.fs stack runs file-system code (ext4, xfs, iomap, ...), not just the page cache."""
    return any(mod is None and _FS_IMPL.match(sym) for sym, mod in _frames(folded))


def codec(folded: str) -> tuple[str, str]:
    """(codec, direction) of a compression stack.

    codec: deflate, lz4, zstd, snappy or unknown (leaf-most frame whose module or symbol names a
    codec); direction: compress, decompress or unknown (leaf-most frame whose symbol says which).
    """
    name = "unknown"
    direction = "unknown"
    for sym, mod in _frames(folded):
        if name == "unknown":
            for cand, pat in _CODEC_MODULES:
                if mod and pat.search(mod):
                    name = cand
                    break
            else:
                for cand, pat in _CODEC_SYMBOLS:
                    if pat.search(sym):
                        name = cand
                        break
        if direction == "unknown" and sym and sym != "[unknown]":
            if _DECOMPRESS.search(sym):
                direction = "decompress"
            elif _COMPRESS.search(sym):
                direction = "compress"
        if name != "unknown" and direction != "unknown":
            break
    return name, direction


# ------------------------------------------------------------------------------- features

@dataclass
class Features:
    """Counts and shares measured from one ProjectionInput."""

    inp: ProjectionInput
    warnings: list = field(default_factory=list)

    def __post_init__(self) -> None:
        """One warning per uprobe that stopped early: the recording's line, and what the projection
        does with its counts (codec_calls scaled up, or taken as a lower bound; other tables as counted)."""
        cc = self.inp.table("codec_calls")
        codec_keys = set(cc["lib"].astype(str) + ":" + cc["func"].astype(str)) if not cc.empty else set()
        for p in self.inp.detached:
            if p.target not in codec_keys:
                how = "its counts are read as recorded (a lower bound)"
            elif p.weight is None:
                how = "its codec_calls are taken as a lower bound (the detach time is not recorded)"
            else:
                how = (f"its codec_calls are scaled by {1 / p.weight:.2f} (extrapolated from the first "
                       f"{p.covered_s:.1f} s, assuming a steady call rate)")
            self._warn(f"{p.line()}; projection: {how}")

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    # ---- counts over the whole recording
    @cached_property
    def net(self) -> dict:
        """Network bytes/packets: tx_bytes, rx_bytes, packets, and loopback share of bytes."""
        net = self.inp.table("net_io")
        if net.empty:
            return {"tx_bytes": 0.0, "rx_bytes": 0.0, "packets": 0.0, "lo_bytes": 0.0,
                    "off_host_tx_bytes": 0.0, "off_host_rx_bytes": 0.0}
        by_dir = net.groupby("direction")[["bytes", "packets"]].sum()
        get = lambda d, c: float(by_dir.loc[d, c]) if d in by_dir.index else 0.0  # noqa: E731
        off = net[net["dev"] != "lo"]
        off_dir = off.groupby("direction")["bytes"].sum() if not off.empty else pd.Series(dtype=float)
        return {"tx_bytes": get("tx", "bytes"), "rx_bytes": get("rx", "bytes"),
                "packets": float(net["packets"].sum()),
                "lo_bytes": float(net.loc[net["dev"] == "lo", "bytes"].sum()),
                "off_host_tx_bytes": float(off_dir.get("tx", 0.0)), "off_host_rx_bytes": float(off_dir.get("rx", 0.0))}

    @cached_property
    def packets(self) -> float:
        if self.net["packets"] > 0:
            return self.net["packets"]
        sirq = self.inp.table("softirq")
        n = float(sirq.loc[sirq["vector"].isin(["NET_RX", "NET_TX"]), "count"].sum()) if not sirq.empty else 0.0
        if n > 0:
            self._warn("no per-device packet counts; used NET_RX/NET_TX softirq counts as the packet count")
        return n

    @cached_property
    def block_ios(self) -> float:
        blk = self.inp.table("block_io")
        if not blk.empty and blk["ios"].sum() > 0:
            return float(blk["ios"].sum())
        disk = self.inp.table("host_disk")
        n = float(disk["read_count"].sum() + disk["write_count"].sum()) if not disk.empty else 0.0
        if n > 0:
            self._warn("no block-layer I/O counts; used /proc disk counters as the I/O count")
        return n

    @cached_property
    def sockets(self) -> dict:
        """Socket payload: workload and host bytes and calls (TCP if present, else all IP protocols)."""
        sock = self.inp.table("sock_io")
        out = {"wl_bytes": 0.0, "all_bytes": 0.0, "wl_calls": 0.0, "wl_send_calls": 0.0,
               "wl_send_bytes": 0.0, "all_send_bytes": 0.0, "senders": 0, "protocol": None}
        if sock.empty:
            return out
        proto = "tcp" if (sock["protocol"] == "tcp").any() else None
        sock = sock[sock["protocol"] == proto] if proto else sock[sock["protocol"].isin(IP_PROTOCOLS)]
        wl = sock[sock["pid"].isin(self.inp.workload_pids)]
        send = wl[wl["direction"] == "send"]
        senders = send.groupby("pid")["bytes"].sum()
        out.update(wl_bytes=float(wl["bytes"].sum()), all_bytes=float(sock["bytes"].sum()),
                   wl_calls=float(wl["calls"].sum()), wl_send_calls=float(send["calls"].sum()),
                   wl_send_bytes=float(send["bytes"].sum()),
                   all_send_bytes=float(sock.loc[sock["direction"] == "send", "bytes"].sum()),
                   senders=int((senders > 0).sum()), protocol=proto or "ip")
        return out

    @cached_property
    def _socket_pids(self) -> set:
        """Processes that moved IP socket payload (unix-domain sockets never reach a NIC)."""
        sock = self.inp.table("sock_io")
        sock = sock[sock["protocol"].isin(IP_PROTOCOLS)]
        if sock.empty:
            return set()
        per = sock.groupby("pid")["bytes"].sum()
        return set(per[per > 0].index.astype(int))

    @cached_property
    def _cpu_by_pid(self) -> pd.DataFrame:
        cpu = self.inp.table("cpu_category")
        return cpu.groupby(["subcategory", "pid"], as_index=False)["cpu_s"].sum() if not cpu.empty \
            else pd.DataFrame(columns=["subcategory", "pid", "cpu_s"])

    def count(self, n_from: str) -> float:
        """Offloads over the whole recording for a mechanism's ``n_from`` (not ``cpu_chunks``)."""
        if n_from == "none":
            return 0.0
        if n_from == "packets":
            return self.packets
        if n_from == "block_ios":
            return self.block_ios
        if n_from == "workload_socket_calls":
            calls = self.sockets["wl_calls"]
            if calls <= 0 and self.packets > 0:
                self._warn("no socket call counts for the workload (the default recorder counts socket "
                           "bytes, not calls: record --probes default,sock_io counts calls); counted one "
                           "RDMA work request per packet instead (an upper bound)")
                return self.packets
            return calls
        raise ValueError(f"count({n_from!r}) is computed per row")

    # ---- shares of a subcategory
    @cached_property
    def _stack_samples(self) -> pd.DataFrame:
        """Samples per (pid, subcategory, stack): columns pid, subcategory, folded, samples."""
        stacks = self.inp.table("stacks")
        samples = self.inp.table("stack_samples")
        if stacks.empty or samples.empty:
            return pd.DataFrame(columns=["pid", "subcategory", "folded", "samples"])
        per = samples.groupby(["pid", "stack_id"], as_index=False)["samples"].sum()
        return per.merge(stacks[["stack_id", "folded", "subcategory"]], on="stack_id", how="inner")

    def _evidence(self, subcategory: str) -> pd.DataFrame:
        """``subcategory``'s samples per (pid, stack) with crypto kind, codec, direction and fs_impl.

        Columns pid, subcategory, samples, crypto, codec, direction, fs_impl. Computed per
        subcategory on first use: the frame scans are per distinct stack, and a long recording holds
        tens of thousands of stacks in subcategories no share rule asks about.
        """
        cache = self.__dict__.setdefault("_evidence_cache", {})
        if subcategory in cache:
            return cache[subcategory]
        cols = ["pid", "subcategory", "samples", "crypto", "codec", "direction", "fs_impl"]
        per = self._stack_samples
        per = per[per["subcategory"] == subcategory].copy()
        if per.empty:
            cache[subcategory] = pd.DataFrame(columns=cols)
            return cache[subcategory]
        unique = per["folded"].unique()
        kinds = {f: crypto_kind(f) for f in unique}
        codecs_ = {f: codec(f) for f in unique}
        fs_impl = {f: below_page_cache(f) for f in unique}
        per["crypto"] = per["folded"].map(kinds)
        per["codec"] = per["folded"].map(lambda f: codecs_[f][0])
        per["direction"] = per["folded"].map(lambda f: codecs_[f][1])
        per["fs_impl"] = per["folded"].map(fs_impl)
        cache[subcategory] = per[cols]
        return cache[subcategory]

    def _stack_share(self, subcategory: str, workload: bool, pred, what: str) -> float:
        ev = self._evidence(subcategory)
        if workload:
            ev = ev[ev["pid"].isin(self.inp.workload_pids)]
        total = float(ev["samples"].sum()) if not ev.empty else 0.0
        if total <= 0:
            who = "the workload's processes" if workload else "any process"
            self._warn(f"no stacks recorded for {subcategory} in {who}: cannot tell {what}, so none of "
                       "that CPU is counted as offloadable")
            return 0.0
        return float(ev.loc[pred(ev), "samples"].sum()) / total

    def share(self, kind: str, subcategory: str, workload: bool) -> float:
        """Fraction (0..1) of ``subcategory``'s CPU a mechanism with ``share = kind`` covers.

        ``remainder`` is resolved by the model (what earlier mechanisms left).
        """
        if kind == "all":
            return 1.0
        if kind == "collective_traffic":
            s = self.sockets
            if workload:
                return 1.0  # the job's own network work is its own (collective) traffic: assumption
            if s["all_bytes"] <= 0:
                self._warn("no socket byte counts: assumed all network work is the job's collective traffic")
                return 1.0
            return min(1.0, s["wl_bytes"] / s["all_bytes"])
        if kind == "network_crypto_stacks":
            return self._stack_share(subcategory, workload, lambda e: e["crypto"] == "network",
                                     "kTLS/IPsec from other kernel crypto")
        if kind == "deflate":
            return self._stack_share(subcategory, workload, lambda e: e["codec"] == "deflate",
                                     "which codec ran")
        if kind == "deflate_lz4_decompress":
            return self._decompress_share(subcategory, workload)
        if kind == "socket_processes":
            per = self._cpu_by_pid[self._cpu_by_pid["subcategory"] == subcategory]
            if workload:
                per = per[per["pid"].isin(self.inp.workload_pids)]
            total = float(per["cpu_s"].sum())
            if total <= 0:
                return 0.0
            return float(per.loc[per["pid"].isin(self._socket_pids), "cpu_s"].sum()) / total
        if kind == "below_page_cache":
            if subcategory != "storage.fs":
                return 1.0  # block layer and driver work sits wholly below the page cache
            return self._stack_share(subcategory, workload, lambda e: e["fs_impl"].astype(bool),
                                     "file-system code from page-cache hits")
        raise ValueError(f"unknown share {kind!r}")

    # ---- measured codec rates and directions (codec_calls, schema v2)
    @cached_property
    def codec_calls(self) -> pd.DataFrame:
        """codec_calls with the targets that stopped early scaled up (codecs.extrapolate)."""
        return codecs.extrapolate(self.inp.table("codec_calls"), self.inp.detached)

    def codec_measure(self, subcategory: str, share_kind: str) -> codecs.Measured | None:
        """Measured bytes and calls per CPU-second for the calls a mechanism with ``share_kind`` takes."""
        sel = {"deflate_lz4_decompress": (("decompress",), ("deflate", "lz4")),
               "deflate": (None, ("deflate",))}.get(share_kind, (None, None))
        return codecs.measure(self.codec_calls, self.inp.table("cpu_category"), subcategory, *sel,
                              detached=self.inp.detached)

    def _decompress_share(self, subcategory: str, workload: bool) -> float:
        """DEFLATE/LZ4 decompression share: codec from the stacks, direction measured where possible.

        With codec_calls, the direction split is the measured share of DEFLATE/LZ4 call time spent
        decompressing (times the stacks' DEFLATE/LZ4 share, or 1 without stacks). Without it, only
        samples whose frames name inflate/decompress count, and a warning says how many were unknown.
        """
        pids = self.inp.workload_pids if workload else None
        frac = codecs.time_fraction(self.codec_calls, subcategory, directions=("decompress",),
                                    within_codecs=("deflate", "lz4"), pids=pids)
        ev = self._evidence(subcategory)
        if workload:
            ev = ev[ev["pid"].isin(self.inp.workload_pids)]
        total = float(ev["samples"].sum()) if not ev.empty else 0.0
        if frac is not None:
            codec_share = float(ev.loc[ev["codec"].isin(["deflate", "lz4"]), "samples"].sum()) / total \
                if total > 0 else 1.0
            return codec_share * frac
        share = self._stack_share(subcategory, workload,
                                  lambda e: e["codec"].isin(["deflate", "lz4"]) & (e["direction"] == "decompress"),
                                  "codec and direction (compress vs decompress)")
        fam = ev[ev["codec"].isin(["deflate", "lz4"])]
        fam_n = float(fam["samples"].sum()) if not fam.empty else 0.0
        unknown = float(fam.loc[fam["direction"] == "unknown", "samples"].sum()) / fam_n if fam_n > 0 else 0.0
        if unknown > 0.5:
            self._warn(f"{subcategory}: direction (compress vs decompress) unknown for {100 * unknown:.1f} % of the "
                       "DEFLATE/LZ4 samples (stripped library frames); only samples naming inflate/decompress "
                       f"count, so a decompression engine gets {100 * share:.1f} % of it; record with "
                       "dpuprof record --codec-uprobes to measure the direction")
        return share
