// block_io: block-layer IO bytes, counts and latency.
//
// Purpose:  bytes and IOs per device and op as the storage offload model's n, and a log2 latency
//           histogram (issue -> complete) for the report.
// Maps:     blk_start   HASH request -> issue timestamp ns                       (10240 entries)
//                       (raw version: the struct request pointer; classic: (dev, sector))
//           blk_stats   HASH (dev, op) -> {bytes, ios}, cumulative               (1024 entries)
//           blk_lat     HASH (op, log2 slot of latency in us) -> count, cumulative
//           blk_lost    ARRAY [0] = IOs whose start was not recorded (map full)
//           op: 0 read, 1 write, 2 other (flush, discard, write-zeroes, zone and driver ops).
// Hooks:    raw tracepoints block_rq_issue (args: struct request *rq) and block_rq_complete (rq,
//           blk_status_t error, unsigned int nr_bytes) when dpuprof/record/load/probes.py defines
//           BLOCK_IO_RAW_TP together with the running kernel's offsets and constants, read from
//           BTF (dpuprof/record/load/btf.py; never from installed headers): BLK_RQ_Q_OFF (request.q),
//           BLK_RQ_FLAGS_OFF (request.cmd_flags), BLK_Q_DISK_OFF (request_queue.disk),
//           BLK_DISK_MAJOR_OFF (gendisk.major), BLK_DISK_MINOR_OFF (gendisk.first_minor), and
//           the enumerators BLK_OP_BITS (__REQ_FAILFAST_DEV, the first flag bit after the op:
//           REQ_OP_MASK = (1 << it) - 1), BLK_OP_READ, BLK_OP_WRITE (REQ_OP_READ, REQ_OP_WRITE).
//           The values are the classic events' own (include/trace/events/block.h): dev =
//           disk_devt(rq->q->disk) or 0, bytes = the completion's nr_sector << 9; the start is
//           keyed by the request, so no sector is read (and a passthrough request, whose issue and
//           completion sectors differ, matches). Raw tracepoint programs are not skipped while
//           another BPF program runs on the CPU (classic ones are: bpf_prog_active, see
//           probes/softirq.bpf.c);
//           without BTF or raw tracepoints, the classic tracepoints block:block_rq_issue and
//           block:block_rq_complete are used.
// Overhead: per IO, one hash update at issue, one lookup-and-add and one delete at completion,
//           and (raw) four kernel reads per completion (rq->q, q->disk, disk's major and
//           first_minor, rq->cmd_flags). Measured (benchmarks/HOT_LOADS.md, 2026-12-04, fio 4 KiB
//           random reads at ~317k IOPS): block_rq_complete 316 ns, block_rq_issue 194 ns x
//           317,062/s, 16 % of a core. So it is opt-in (--probes ...,block_io): /proc/diskstats
//           counts the same I/Os per device at no cost per request (record/drain/diskstats.py);
//           this probe adds the latency histogram.
#include <uapi/linux/ptrace.h>

struct blk_stat_key { u32 dev; u32 op; };
struct blk_stat_val { u64 bytes; u64 ios; };
struct blk_lat_key { u32 op; u32 slot; };

#ifdef BLOCK_IO_RAW_TP
typedef u64 blk_rq_key_t;  // the request's address: unique while it is in flight
#else
struct blk_rq_key { u64 sector; u32 dev; u32 pad; };  // explicit pad: hashed keys must be fully set
typedef struct blk_rq_key blk_rq_key_t;
#endif

BPF_HASH(blk_start, blk_rq_key_t, u64, 10240);
BPF_HASH(blk_stats, struct blk_stat_key, struct blk_stat_val, 1024);
BPF_HASH(blk_lat, struct blk_lat_key, u64, 256);
BPF_ARRAY(blk_lost, u64, 1);

static inline void blk_issued(blk_rq_key_t *key) {
    u64 ts = bpf_ktime_get_ns();
    if (blk_start.update(key, &ts) != 0) {
        int zero = 0;
        u64 *lost = blk_lost.lookup(&zero);
        if (lost) __sync_fetch_and_add(lost, 1);
    }
}

static inline void blk_completed(blk_rq_key_t *key, u32 dev, u32 op, u64 bytes) {
    struct blk_stat_key skey = {.dev = dev, .op = op};
    struct blk_stat_val zero_val = {};
    struct blk_stat_val *val = blk_stats.lookup_or_try_init(&skey, &zero_val);
    if (val) {
        __sync_fetch_and_add(&val->bytes, bytes);
        __sync_fetch_and_add(&val->ios, 1);
    }
    u64 *tsp = blk_start.lookup(key);
    if (tsp) {
        u64 us = (bpf_ktime_get_ns() - *tsp) / 1000;
        blk_start.delete(key);
        struct blk_lat_key lkey = {.op = op, .slot = bpf_log2l(us + 1)};
        blk_lat.increment(lkey);
    }
}

#ifdef BLOCK_IO_RAW_TP
// dev_t as the classic events give it: disk_devt(rq->q->disk) = MKDEV(major, first_minor), the
// kernel's MKDEV (MINORBITS 20), or 0 without a disk.
static inline u32 blk_rq_dev(const char *rq) {
    const char *q = 0, *disk = 0;
    bpf_probe_read_kernel(&q, sizeof(q), rq + BLK_RQ_Q_OFF);
    if (!q)
        return 0;
    bpf_probe_read_kernel(&disk, sizeof(disk), q + BLK_Q_DISK_OFF);
    if (!disk)
        return 0;
#if BLK_DISK_MINOR_OFF == BLK_DISK_MAJOR_OFF + 4
    int mm[2] = {};  // major and first_minor side by side (as since 2.6): one read, not two
    bpf_probe_read_kernel(mm, sizeof(mm), disk + BLK_DISK_MAJOR_OFF);
    int major = mm[0], minor = mm[1];
#else
    int major = 0, minor = 0;
    bpf_probe_read_kernel(&major, sizeof(major), disk + BLK_DISK_MAJOR_OFF);
    bpf_probe_read_kernel(&minor, sizeof(minor), disk + BLK_DISK_MINOR_OFF);
#endif
    return ((u32)major << 20) | (u32)minor;
}

// rq->cmd_flags & REQ_OP_MASK as the op: blk_fill_rwbs's R and W, everything else "other".
static inline u32 blk_rq_op(const char *rq) {
    u32 flags = 0;
    bpf_probe_read_kernel(&flags, sizeof(flags), rq + BLK_RQ_FLAGS_OFF);
    u32 op = flags & ((1u << BLK_OP_BITS) - 1);
    return op == BLK_OP_READ ? 0 : op == BLK_OP_WRITE ? 1 : 2;
}

RAW_TRACEPOINT_PROBE(block_rq_issue) {
    blk_rq_key_t key = ctx->args[0];
    blk_issued(&key);
    return 0;
}

RAW_TRACEPOINT_PROBE(block_rq_complete) {
    const char *rq = (const char *)ctx->args[0];
    blk_rq_key_t key = ctx->args[0];
    u64 bytes = ((u32)ctx->args[2] >> 9) << 9;  // the classic event's nr_sector << 9
    blk_completed(&key, blk_rq_dev(rq), blk_rq_op(rq), bytes);
    return 0;
}
#else
static inline u32 rwbs_op(char *rwbs) {
    // rwbs is blk_fill_rwbs's text: an optional 'F' (preflush), the op (R, W, WZ write-zeroes on
    // kernels that print it, F flush, D/DE discard, ZA/ZR/... zone ops, N anything else), then
    // flag letters (F, A, S, M, U). Read and write are R and W (not WZ) in the op position.
    char c = rwbs[0], next = rwbs[1];
    if (c == 'F' && (next == 'R' || next == 'W')) {
        c = next;
        next = rwbs[2];
    }
    if (c == 'R') return 0;
    if (c == 'W' && next != 'Z') return 1;
    return 2;
}

TRACEPOINT_PROBE(block, block_rq_issue) {
    blk_rq_key_t key = {.dev = args->dev, .sector = args->sector};
    blk_issued(&key);
    return 0;
}

TRACEPOINT_PROBE(block, block_rq_complete) {
    char rwbs[8] = {};
    bpf_probe_read_kernel(&rwbs, sizeof(rwbs), args->rwbs);
    // The issue event's sector is blk_rq_trace_sector: 0 where the request's is unset (-1, as
    // for passthrough requests); the completion's is the raw one. Match them, or the start leaks.
    u64 sector = args->sector == (u64)-1 ? 0 : args->sector;
    blk_rq_key_t key = {.dev = args->dev, .sector = sector};
    blk_completed(&key, args->dev, rwbs_op(rwbs), (u64)args->nr_sector << 9);
    return 0;
}
#endif
