// softirq: exact time spent in each softirq vector, per CPU.
//
// Purpose:  softirq work (NET_RX, NET_TX, BLOCK, ...) runs on whichever CPU raised it, often in
//           the context of an unrelated task or the idle task; exact entry/exit timing gives the
//           host-wide network/storage softirq cost that sampling only estimates.
// Maps:     sirq_start  PERCPU_ARRAY [0] = entry timestamp (ns) of the running softirq
//           sirq_ns     PERCPU_ARRAY [vec] = cumulative ns in vector vec (NR_SOFTIRQS = 10)
//           sirq_count  PERCPU_ARRAY [vec] = cumulative entries
//           User space reads the cumulative per-CPU values and stores deltas per interval.
// Hooks:    tracepoints irq:softirq_entry, irq:softirq_exit
// Overhead: two per-CPU array updates per softirq; softirqs run at most a few 100k/s.
#include <uapi/linux/ptrace.h>

BPF_PERCPU_ARRAY(sirq_start, u64, 1);
BPF_PERCPU_ARRAY(sirq_ns, u64, 10);
BPF_PERCPU_ARRAY(sirq_count, u64, 10);

TRACEPOINT_PROBE(irq, softirq_entry) {
    int zero = 0;
    u64 *start = sirq_start.lookup(&zero);
    if (start)
        *start = bpf_ktime_get_ns();
    return 0;
}

TRACEPOINT_PROBE(irq, softirq_exit) {
    int zero = 0;
    int vec = args->vec;
    u64 *start = sirq_start.lookup(&zero);
    if (!start || *start == 0)
        return 0;  // entered before we attached
    u64 delta = bpf_ktime_get_ns() - *start;
    *start = 0;
    u64 *ns = sirq_ns.lookup(&vec);
    if (ns)
        *ns += delta;
    u64 *cnt = sirq_count.lookup(&vec);
    if (cnt)
        *cnt += 1;
    return 0;
}
