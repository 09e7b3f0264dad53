// softirq: exact time spent in each softirq vector, per CPU.
//
// Purpose:  softirq work (NET_RX, NET_TX, BLOCK, ...) runs on whichever CPU raised it, often in
//           the context of an unrelated task or the idle task; exact entry/exit timing gives the
//           host-wide network/storage softirq cost that sampling only estimates.
// Maps:     sirq_start  PERCPU_ARRAY [0] = entry timestamp (ns) of the running softirq
//           sirq_ns     PERCPU_ARRAY [vec] = cumulative ns in vector vec (NR_SOFTIRQS = 10)
//           sirq_count  PERCPU_ARRAY [vec] = cumulative entries
//           User space reads the cumulative per-CPU values and stores deltas per interval.
// Hooks:    raw tracepoints irq:softirq_entry, irq:softirq_exit (args: unsigned int vec_nr), when
//           dpuprof/record/load/probes.py defines SOFTIRQ_RAW_TP; else the classic tracepoints. Why raw:
//           a softirq often runs on the exit of an interrupt that arrived while another BPF
//           program (a tracepoint or the sampler) was running on that CPU; classic tracepoint
//           programs are then skipped (bpf_prog_active, counted as recursion misses), raw
//           tracepoint programs are only skipped when they would recurse into themselves.
// Overhead: two per-CPU array updates per softirq; softirqs run at most a few 100k/s.
#include <uapi/linux/ptrace.h>

BPF_PERCPU_ARRAY(sirq_start, u64, 1);
BPF_PERCPU_ARRAY(sirq_ns, u64, 10);
BPF_PERCPU_ARRAY(sirq_count, u64, 10);

static inline void sirq_entry(void) {
    int zero = 0;
    u64 *start = sirq_start.lookup(&zero);
    if (start)
        *start = bpf_ktime_get_ns();
}

static inline void sirq_exit(int vec) {
    int zero = 0;
    u64 *start = sirq_start.lookup(&zero);
    if (!start || *start == 0)
        return;  // entered before we attached
    u64 delta = bpf_ktime_get_ns() - *start;
    *start = 0;
    u64 *ns = sirq_ns.lookup(&vec);
    if (ns)
        *ns += delta;
    u64 *cnt = sirq_count.lookup(&vec);
    if (cnt)
        *cnt += 1;
}

#ifdef SOFTIRQ_RAW_TP
RAW_TRACEPOINT_PROBE(softirq_entry) {
    sirq_entry();
    return 0;
}

RAW_TRACEPOINT_PROBE(softirq_exit) {
    sirq_exit((int)ctx->args[0]);
    return 0;
}
#else
TRACEPOINT_PROBE(irq, softirq_entry) {
    sirq_entry();
    return 0;
}

TRACEPOINT_PROBE(irq, softirq_exit) {
    sirq_exit(args->vec);
    return 0;
}
#endif
