"""The validation matrix (issue 10, section 3): one cell per regime of the speedup model.

A cell runs examples/train_ddp.py twice per pair: A, the baseline, and B, the same command with one
offload emulated on this machine (``--emulate``: the same bytes without the cipher, the same storage
bytes from memory, the all-reduce replaced by a local reduction). The measured speedup is B/A in
steady steps/s. The baseline is then recorded once and projected with a one-category ideal profile,
and the projection is judged against the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Sizes shared by every cell: fewer shards than the example's default (16) keep the generated data
# (1280x1280 float32 samples, 105 MB per shard) at 0.8 GB per format; every rank still cycles through
# its own share of shards, which stay in the page cache.
COMMON = ("--shards", "8", "--seed", "0")


@dataclass(frozen=True)
class Cell:
    """One cell: ``base`` is A's train_ddp.py arguments, ``emulated`` what B adds to them.

    ``category`` is the one infrastructure category the projection may offload (None: the A/A
    placebo, whose model is 1.0 by construction). ``regime`` is the regime the cell is built to
    exercise; the model's own regime is read from the projection. ``profile`` optionally overrides
    mechanism fields of the one-category ideal profile (engine-latency cells)."""

    id: str
    title: str
    regime: str
    base: tuple[str, ...]
    emulated: tuple[str, ...]
    category: str | None
    profile: dict = field(default_factory=dict)
    note: str = ""

    def args(self, side: str) -> list[str]:
        """train_ddp.py arguments of side "a" or "b" (without the run-length and output options)."""
        extra = list(self.emulated) if side == "b" else []
        return [*self.base, *COMMON, *extra]


ENC = ("--variant", "encrypted")
REMOVE_CRYPTO = ("--emulate", "crypto=remove")
# Emulated engine latency per 1 MiB record. The host's own AES-GCM costs ~110 us per MiB at the
# 9 GB per CPU-second of a quiet fixture VM (issue 10), so a sync engine at 50 us still gains.
ENGINE_US = 50

CELLS = [
    Cell("a_keeps_up", "1 rank + 1 worker that keeps up, crypto removed", "worker with slack",
         (*ENC, "--world-size", "1", "--workers", "1", "--width", "2048", "--layers", "4"), REMOVE_CRYPTO,
         "crypto", note="a 19.7 M-parameter model (~250 ms per step here) against ~45 ms of loading per "
         "batch: the worker waits on the rank, so removing its decryption should not help. With the "
         "default model (~60 ms per step) the worker's slack is too thin: a little other load made "
         "it loader-bound"),
    Cell("b_loader_bound", "loader-bound small model (1 rank + 1 worker), crypto removed", "loader-bound",
         (*ENC, "--world-size", "1", "--workers", "1", "--hidden", "32", "--layers", "0"), REMOVE_CRYPTO,
         "crypto", note="a 0.5 M-parameter model: the rank waits on its worker"),
    Cell("c_inline_w1", "inline decryption (--workers 0), world size 1, crypto removed", "inline work",
         (*ENC, "--world-size", "1", "--workers", "0"), REMOVE_CRYPTO, "crypto",
         note="the rank's own thread decrypts: the work is on the critical path"),
    Cell("d_inline_w2", "inline decryption (--workers 0), world size 2, crypto removed", "inline work",
         (*ENC, "--world-size", "2", "--workers", "0"), REMOVE_CRYPTO, "crypto"),
    Cell("e_saturated", "CPU-saturated DDP (2 ranks + 1 worker each), crypto removed", "CPU-contended",
         (*ENC,), REMOVE_CRYPTO, "crypto", note="the fixtures' regime: 4 busy processes on 2 cores"),
    Cell("f_storage_4k", "storage, 4 KiB O_DIRECT reads, storage removed", "CPU-contended",
         ("--variant", "storage", "--io-size", "4096"), ("--emulate", "storage=remove"), "storage",
         note="B copies the same bytes from memory in the same pieces and order"),
    Cell("f_storage_64k", "storage, 64 KiB O_DIRECT reads, storage removed", "CPU-contended",
         ("--variant", "storage", "--io-size", "65536"), ("--emulate", "storage=remove"), "storage"),
    Cell("g_network", "DDP all-reduce replaced by a local reduction", "CPU-contended",
         ("--variant", "plain",), ("--emulate", "allreduce=local"), "network",
         note="the per-step stop flag (one 4-byte all-reduce) stays in B"),
    Cell("h_compute", "compute-bound control, all-reduce replaced by a local reduction",
         "compute-bound", ("--variant", "compute",), ("--emulate", "allreduce=local"), "network",
         note="little infrastructure work: both the measurement and the model should be near 1.0"),
    Cell("i_placebo", "A/A placebo (the saturated command on both sides)", "none (noise)",
         (*ENC,), (), None, note="measures the noise of a pair; the model is 1.0 by construction"),
]

ENGINE_CELLS = [
    Cell("j_engine_sync", f"inline, decrypt replaced by a sync engine wait of {ENGINE_US} us per MiB",
         "inline work, sync engine", (*ENC, "--world-size", "1", "--workers", "0"),
         ("--emulate", f"crypto=latency:{ENGINE_US}"), "crypto",
         profile={"mode": "sync", "L_ns": ENGINE_US * 1000},
         note="the rank thread waits for each record, then reads the plaintext in place"),
    Cell("j_engine_async", f"inline, decrypt replaced by an async engine of {ENGINE_US} us per MiB",
         "inline work, async engine", (*ENC, "--world-size", "1", "--workers", "0"),
         ("--emulate", f"crypto=async:{ENGINE_US}"), "crypto",
         profile={"mode": "async", "L_ns": ENGINE_US * 1000},
         note="the wait overlaps the next step; the result is consumed one call later"),
]

QUICK_IDS = ("c_inline_w1", "a_keeps_up")


def select(quick: bool, engine: bool, only: list[str] | None = None) -> list[Cell]:
    """The cells of a run: --quick's two, else the matrix (plus the engine cells with engine=True),
    optionally restricted to the ids in only (unknown ids raise ValueError)."""
    pool = CELLS + ENGINE_CELLS
    if only:
        by_id = {c.id: c for c in pool}
        unknown = [i for i in only if i not in by_id]
        if unknown:
            raise ValueError(f"unknown cell(s): {', '.join(unknown)}; known: {', '.join(by_id)}")
        return [by_id[i] for i in only]
    if quick:
        return [c for c in pool if c.id in QUICK_IDS]
    return CELLS + (ENGINE_CELLS if engine else [])
