// block_io: block-layer IO bytes, counts and latency.
//
// Purpose:  bytes and IOs per device and op as the storage offload model's n, and a log2 latency
//           histogram (issue -> complete) for the report.
// Maps:     blk_start   HASH (dev, sector) -> issue timestamp ns                (10240 entries)
//           blk_stats   HASH (dev, op) -> {bytes, ios}, cumulative               (1024 entries)
//           blk_lat     HASH (op, log2 slot of latency in us) -> count, cumulative
//           blk_lost    ARRAY [0] = IOs whose start was not recorded (map full)
//           op: 0 read, 1 write, 2 other (flush, discard).
// Hooks:    tracepoints block:block_rq_issue, block:block_rq_complete
// Overhead: two hash updates per IO; fine up to ~1M IOPS.
#include <uapi/linux/ptrace.h>

struct blk_rq_key { u64 sector; u32 dev; u32 pad; };  // explicit pad: hashed keys must be fully set
struct blk_stat_key { u32 dev; u32 op; };
struct blk_stat_val { u64 bytes; u64 ios; };
struct blk_lat_key { u32 op; u32 slot; };

BPF_HASH(blk_start, struct blk_rq_key, u64, 10240);
BPF_HASH(blk_stats, struct blk_stat_key, struct blk_stat_val, 1024);
BPF_HASH(blk_lat, struct blk_lat_key, u64, 256);
BPF_ARRAY(blk_lost, u64, 1);

static inline u32 rwbs_op(char *rwbs) {
    // rwbs is e.g. "R", "WS", "FWS", "D": the first R/W/D letter decides.
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (rwbs[i] == 'R') return 0;
        if (rwbs[i] == 'W') return 1;
        if (rwbs[i] == 'D' || rwbs[i] == 0) return 2;
    }
    return 2;
}

TRACEPOINT_PROBE(block, block_rq_issue) {
    struct blk_rq_key key = {.dev = args->dev, .sector = args->sector};
    u64 ts = bpf_ktime_get_ns();
    if (blk_start.update(&key, &ts) != 0) {
        int zero = 0;
        u64 *lost = blk_lost.lookup(&zero);
        if (lost) __sync_fetch_and_add(lost, 1);
    }
    return 0;
}

TRACEPOINT_PROBE(block, block_rq_complete) {
    char rwbs[8] = {};
    bpf_probe_read_kernel(&rwbs, sizeof(rwbs), args->rwbs);
    u32 op = rwbs_op(rwbs);
    struct blk_stat_key skey = {.dev = args->dev, .op = op};
    struct blk_stat_val zero_val = {};
    struct blk_stat_val *val = blk_stats.lookup_or_try_init(&skey, &zero_val);
    if (val) {
        __sync_fetch_and_add(&val->bytes, (u64)args->nr_sector << 9);
        __sync_fetch_and_add(&val->ios, 1);
    }
    struct blk_rq_key key = {.dev = args->dev, .sector = args->sector};
    u64 *tsp = blk_start.lookup(&key);
    if (tsp) {
        u64 us = (bpf_ktime_get_ns() - *tsp) / 1000;
        blk_start.delete(&key);
        struct blk_lat_key lkey = {.op = op, .slot = bpf_log2l(us + 1)};
        blk_lat.increment(lkey);
    }
    return 0;
}
