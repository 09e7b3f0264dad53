"""Issue 10, model part: where A enters, per-mechanism overrides, capacity at the post-offload rate,
measured codec rates and the all-reduce algorithms. Hand-derivable cases on synthetic inputs."""

import math

import pandas as pd
import pytest

from dpuprof.errors import UserError
from dpuprof.project import build_projection as project
from dpuprof.project.allreduce import (bus_bandwidth_Bps, hierarchical_time_s, ring_time_s, tree_time_s,
                                       vendor_row)
from dpuprof.project.inputs import USED_TABLES
from dpuprof.project.sweep import apply_sets, enters, resolve, sweep

from test_project_model import PROFILES, WL, make_input  # noqa: E402  (same directory)

BF2, BF3, IDEAL = PROFILES["bluefield-2"], PROFILES["bluefield-3"], PROFILES["ideal"]


def codec_frame(rows):
    """rows: [(pid, lib, func, direction, calls, bytes, duration_ns)]."""
    return pd.DataFrame([(1, *r) for r in rows],
                        columns=["interval", "pid", "lib", "func", "direction", "calls", "bytes", "duration_ns"])


# ------------------------------------------------------------------------- 1. where A enters

def test_a_enters_only_sync_equations_and_arm_capacity():
    mech = {m.name: m for m in BF3.mechanisms}
    assert enters(mech["rdma"], "A") == []                        # async NIC transport
    assert enters(mech["decompress_engine"], "A") == []           # async engine: capacity is its own key
    assert any("Arm-core capacity" in e for e in enters(mech["arm_offload"], "A"))
    sync = BF3.with_overrides(mechanisms=["aes_gcm_engine"], mode="sync").mechanism("aes_gcm_engine")
    assert enters(sync, "A") == ["the sync equation (alpha / A)"]
    assert enters(mech["virtio_fs"], "o1") and not enters(mech["rdma"], "o1")


def test_flat_sweep_says_why():
    inp = make_input({"network.tcpip": 2.0, "compute.torch": 1.0})
    sw = sweep(inp, BF3, "rdma.A", 0.25, 2.0, 3)
    assert sw["flat"] and "does not enter the async equation of rdma" in sw["flat_reason"]
    # arm_offload: A enters only through Arm-core capacity, which 2 host CPUs cannot exhaust
    sw = sweep(make_input({"compression.user": 1.0, "compute.torch": 1.0}), BF3, "arm_offload.A", 0.25, 2.0, 3)
    assert sw["flat"] and "only through Arm-core capacity" in sw["flat_reason"]
    # a mechanism with nothing to cover
    sw = sweep(inp, BF3, "virtio_fs.o1", 0, 5000, 3)
    assert sw["flat"] and "covers no CPU in this recording" in sw["flat_reason"]


def test_a_below_one_matters_for_sync_arm_work():
    """Sync work on the Arm cores: after = C (1 - a) + C a / A + n (o0 + L + Q); A = 0.5 doubles it."""
    inp = make_input({"compression.user": 1.0, "compute.torch": 1.0})
    prof = apply_sets(BF3, ["arm_offload.mode=sync", "arm_offload.A=0.5"])
    p = project(inp, prof)
    (row,) = [r for r in p.rejected if r.mechanism == "arm_offload"]
    n = 1.0 * 17.4e6 / 65536
    assert row.after_if_enabled_s == pytest.approx(1.0 / 0.5 + n * 2e-6, rel=1e-6)
    assert row.speedup < 1
    sw = sweep(inp, apply_sets(BF3, ["arm_offload.mode=sync"]), "arm_offload.A", 0.5, 4.0, 3)
    assert not sw["flat"] and sw["points"][-1]["freed_s"] > sw["points"][0]["freed_s"]


def test_a_below_one_matters_for_async_arm_work_through_capacity():
    # 64 host cores: 30 s of the job's compression per second on the Arm cores needs 30 / A cores at the
    # recorded rate; at A = 0.25 that is 120 cores against 16, at A = 2 it is 15 (fits at the recorded rate)
    inp = make_input({"compression.user": 300.0, "compute.torch": 10.0}, cpu_count=64, idle=330.0)
    sw = sweep(inp, BF3, "arm_offload.A", 0.25, 2.0, 3)
    assert not sw["flat"]
    freed = [pt["freed_s"] for pt in sw["points"]]
    assert freed == sorted(freed) and freed[-1] > 2 * freed[0]


# ------------------------------------------------------------------ 2. overrides hit one mechanism

def test_bare_parameter_only_where_unambiguous():
    assert resolve(BF3, "o1") == ("virtio_fs", "o1")            # the only sync_os mechanism
    assert resolve(IDEAL, "alpha") == ("ideal", "alpha")        # a single mechanism
    with pytest.raises(UserError, match="ambiguous on bluefield-3: A enters arm_offload, virtio_fs"):
        resolve(BF3, "A")
    with pytest.raises(UserError, match="mechanisms: rdma, asap2, inline_crypto_kernel"):
        resolve(BF3, "alpha")
    with pytest.raises(UserError, match="has no mechanism 'snapp'"):
        resolve(BF2, "snapp.alpha")


def test_alpha_sweep_leaves_snap_off_and_o0_leaves_inline_crypto_free():
    inp = make_input({"storage.fs": 1.0, "compression.user": 1.0, "crypto.kernel": 0.5, "compute.torch": 1.0},
                     stacks=[(WL, "crypto.kernel", "tls_sw_sendmsg_[k];aesni_gcm_enc_[k]", 10),
                             (WL, "compression.user", "m (p);zlib_compress (zlib.so);[unknown] (libz.so.1)", 10)])
    prof = BF2.with_overrides(mechanisms=["deflate_engine"], alpha=0.5)
    assert prof.mechanism("snap").alpha.value == 0.0 and prof.mechanism("deflate_engine").alpha.value == 0.5
    p = project(inp, prof)
    assert p.by_category["storage"].freed_s == 0              # SNAP stays at alpha 0
    prof = apply_sets(BF2, ["rdma.o0=1e6"])
    assert prof.mechanism("inline_crypto_kernel").o0_ns.value == 0 and prof.mechanism("rdma").o0_ns.value == 1e6
    (row,) = [r for r in project(inp, prof).rows if r.mechanism == "inline_crypto_kernel"]
    assert row.after_s == 0                                     # inline kTLS still costs nothing per packet


# ------------------------------------------------------------------------------- 3. capacity

def test_inline_crypto_demand_counts_crypto_bytes_not_all_traffic():
    """ddp-compressed: 0.011 s of crypto beside 2.3 GB/s of loopback traffic must not be 18 Gb/s of crypto."""
    inp = make_input({"crypto.user": 0.011, "network.tcpip": 1.0, "compute.torch": 5.0},
                     net_bytes=2.3e9 * 10, sock_bytes=2 * 2.3e9 * 10, duration=10.0)
    p = project(inp, BF3)
    crypto = next(c for c in p.capacity if c.resource == "crypto_gbps")
    # 0.011 s x 8.3 GB per CPU-second x 8 bit / 10 s, at the post-offload rate
    assert crypto.demand == pytest.approx(0.011 * 8.3e9 * 8 / 10 / 1e9 * crypto.rate_factor, rel=1e-4)
    assert crypto.rate_factor == pytest.approx(p.speedup.expected, rel=1e-3)


def test_inline_crypto_bounded_by_traffic_that_leaves_the_host():
    inp = make_input({"crypto.user": 5.0, "compute.torch": 5.0}, net_bytes=1e12, duration=10.0, cpu_count=8)
    inp.frames["net_io"] = pd.concat([inp.frames["net_io"], pd.DataFrame(
        [(1, "eth0", "tx", 1e9, 1e6), (1, "eth0", "rx", 0.5e9, 1e6)],
        columns=["interval", "dev", "direction", "bytes", "packets"])])
    crypto = next(c for c in project(inp, BF3).capacity if c.resource == "crypto_gbps")
    # 5 s x 8.3 GB/s = 41.5 GB of crypto, but only 1 GB left the host (eth0 tx); loopback is local
    assert crypto.demand == pytest.approx(1e9 * 8 / 10 / 1e9 * crypto.rate_factor, rel=1e-4)
    assert "non-loopback devices" in crypto.note


def test_other_processes_demand_stays_at_the_recorded_rate():
    # the job (0.5 s of compute + 0.5 s of crypto) doubles its speed; another tenant's 6 s of compression on
    # BF3's Arm cores does not: demand 6 / 0.8 / 1 s = 7.5 cores, not 15
    inp = make_input({"crypto.user": 0.5, "compute.torch": 0.5}, {"compression.user": 6.0}, cpu_count=8,
                     duration=1.0, idle=0.5)
    p = project(inp, BF3)
    arm = next(c for c in p.capacity if c.resource == "arm_cores")
    assert arm.rate_factor > 1.5 and arm.demand == pytest.approx(6.0 / 0.8, rel=1e-6)


# -------------------------------------------------------------------------- 4. measured inputs

def test_measured_codec_rate_and_calls_replace_the_constant():
    inp = make_input({"crypto.user": 2.0, "compute.torch": 1.0}, sock_bytes=0, sock_calls=0)
    inp.frames["sock_io"] = inp.frames["sock_io"].iloc[0:0]  # no sockets: the lookaside engine takes it all
    inp.frames["codec_calls"] = codec_frame([(WL, "libcrypto", "EVP_DecryptUpdate", "decrypt", 1000, 18e9, 1.9e9)])
    p = project(inp, BF3)
    (row,) = [r for r in p.rows if r.mechanism == "aes_gcm_engine"]
    assert row.host_bytes_per_cpu_s == pytest.approx(9e9)        # 18 GB / 2.0 CPU-seconds
    # n = max(calls, bytes / chunk) per CPU-second x offloaded seconds = max(500, 9e9 / 65536) x 2
    assert row.n == pytest.approx(2 * 9e9 / 65536, rel=1e-6)
    assert row.rate_note.startswith("aes_gcm_engine on crypto.user: host_bytes_per_cpu_s measured")
    assert row.rate_note in p.assumptions


def test_measured_direction_split_gives_the_decompression_engine_its_share():
    stripped = "m (p);[unknown] (libz.so.1)"  # stripped libz: the stack cannot tell the direction
    inp = make_input({"compression.user": 1.0, "compute.torch": 1.0}, stacks=[(WL, "compression.user", stripped, 50)])
    without = project(inp, BF3)
    assert not [r for r in without.rows if r.mechanism == "decompress_engine"]
    assert any("direction (compress vs decompress) unknown for 100.0 %" in w for w in without.warnings)
    inp.frames["codec_calls"] = codec_frame([(WL, "libz.so.1", "inflate", "decompress", 100, 3e8, 3e9),
                                             (WL, "libz.so.1", "deflate", "compress", 10, 1e7, 1e9)])
    p = project(inp, BF3)
    (row,) = [r for r in p.rows if r.mechanism == "decompress_engine"]
    assert row.share == pytest.approx(0.75)                      # 3 s of 4 s of call time inflating
    # measured inflate rate: 3e8 B over 0.75 x 1.0 s of compression CPU
    assert row.host_bytes_per_cpu_s == pytest.approx(4e8)


def test_used_tables_include_v2_measurements():
    assert {"codec_calls", "collectives"} <= set(USED_TABLES)


# ---------------------------------------------------------------------------------- 5. all-reduce

def test_bus_bandwidth_matches_nccl_tests_definition():
    """nccl-tests PERFORMANCE.md: busbw = algbw x 2(n-1)/n; a latency-free ring runs at the link rate."""
    B, S = 50e9, 64e6
    for p in (2, 8, 256):
        t = ring_time_s(p, S, 0.0, B)
        assert bus_bandwidth_Bps(p, S, t) == pytest.approx(B)
        assert bus_bandwidth_Bps(p, S, t) == pytest.approx(S / t * 2 * (p - 1) / p)
    assert bus_bandwidth_Bps(1, S, 0.0) is None


def test_tree_and_hierarchical_terms_by_hand():
    # tree: 2 (ceil(log2 32) x 2 us + 7 x 1 us) + 2 x 255/256 x S / B
    assert tree_time_s(32, 8, 1e6, 2e-6, 1e-6, 50e9) == pytest.approx(2 * (5 * 2e-6 + 7e-6) + 2 * 255 / 256 * 1e6 / 50e9)
    # hierarchical: intra 2 x 7 x 1 us + 2 x 7/8 x S / 450 GB/s, inter 2 x 31 x 2 us + 2 x 31/32 x S / 50 GB/s
    want = 2 * 7 * 1e-6 + 2 * 7 / 8 * 1e6 / 450e9 + 2 * 31 * 2e-6 + 2 * 31 / 32 * 1e6 / 50e9
    assert hierarchical_time_s(32, 8, 1e6, 2e-6, 50e9, 1e-6, 450e9) == pytest.approx(want)
    assert hierarchical_time_s(1, 1, 1e6, 2e-6, 50e9, 1e-6, 450e9) == 0


def _collective_input(count, size, duration_ns, ranks=2, duration=10.0):
    inp = make_input({"network.tcpip": 1.0, "compute.torch": 5.0}, duration=duration)
    inp.frames["collectives"] = pd.DataFrame(
        [(1, WL + i, WL + i, "allreduce", count, count * size, duration_ns) for i in range(ranks)],
        columns=["interval", "pid", "tid", "op", "count", "bytes", "duration_ns"])
    return inp


def test_measured_collectives_drive_the_extrapolation():
    # 4 all-reduces per step x 30 steps per rank of 9.25 MB each, 2 ranks
    inp = _collective_input(120, 9.25e6, 120 * 2_000_000)
    ar = project(inp, BF3, nodes=32, gpus_per_node=8).allreduce
    assert ar.measured and ar.method.startswith("measured: collectives table")
    assert ar.ops_recorded == pytest.approx(120) and ar.bytes_per_op == pytest.approx(9.25e6)
    assert ar.measured_us_per_op == pytest.approx(2000.0)
    assert ar.rdma_total_s == pytest.approx(ar.rdma_us * 1e-6 * 120, rel=1e-5)


def test_modelled_time_longer_than_the_recording_is_flagged():
    inp = _collective_input(100_000, 1e6, 100_000 * 1000, duration=1.0)
    p = project(inp, BF3, nodes=32, gpus_per_node=8)
    assert p.allreduce.exceeds_recording["tcp"] is True
    assert any("exceeds the whole recording" in w and "TCP" in w for w in p.warnings)


def test_vendor_like_for_like_row():
    vc = vendor_row(BF3)
    assert vc["ranks"] == 256 and vc["nodes"] * vc["gpus_per_node"] == 256
    assert [r["message_bytes"] for r in vc["sizes"]] == [8, 25 * 1024 * 1024]
    small = vc["sizes"][0]
    # 8 B is latency-bound: RDMA's fastest algorithm (tree) = 2 (5 x 2 us + 7 x 1 us) + a negligible term
    assert small["algorithm"]["rdma"] == "tree"
    assert small["rdma_us"] == pytest.approx(34.0, abs=0.01)
    assert small["tcp_us"] > small["rdma_us"] and "no message size" in vc["assumption"]
    assert math.isfinite(vc["sizes"][1]["rdma_us"])


def test_post_offload_rate_solver_by_hand():
    from dpuprof.project.capacity import at_post_offload_rate

    def at(rate):  # 300 s of 310 offloadable; capacity for 16 / (37.5 rate) of it (see test_project_model)
        c = min(1.0, 16 / (37.5 * rate))
        return None, [{"resource": "arm_cores"}], 310 / (310 - 300 * c)
    _, caps, rate, why = at_post_offload_rate(at)
    assert rate == pytest.approx(438 / 310, rel=1e-4) and caps[0]["rate_factor"] == pytest.approx(rate, abs=1e-6)
    assert "self-consistent" in why
    _, _, rate, why = at_post_offload_rate(lambda r: (None, [], None))
    assert rate == 1.0 and "unbounded" in why
    _, _, rate, why = at_post_offload_rate(lambda r: (None, [], 1.25))  # no capacity binds
    assert rate == 1.25 and "no capacity limit binds" in why
