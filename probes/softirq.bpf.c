// softirq: exact time spent in each softirq vector, per CPU.
//
// Purpose:  softirq work (NET_RX, NET_TX, BLOCK, ...) runs on whichever CPU raised it, often in
//           the context of an unrelated task or the idle task; exact entry/exit timing gives the
//           host-wide network/storage softirq cost that sampling only estimates.
// Maps:     sirq_start  PERCPU_ARRAY [0] = entry timestamp (ns) of the running softirq
//           sirq_ns     PERCPU_ARRAY [vec] = cumulative ns in vector vec (NR_SOFTIRQS = 10)
//           sirq_count  PERCPU_ARRAY [vec] = cumulative entries
//           User space reads the cumulative per-CPU values and stores deltas per interval.
// Hooks:    irq:softirq_entry, irq:softirq_exit through softirq_on_entry/softirq_on_exit, called by
//           the one program on each (probes/hot_events.bpf.c; raw tracepoints where the kernel has
//           them). Why raw: a softirq often runs on the exit of an interrupt that arrived while
//           another BPF program (a tracepoint or the sampler) was running on that CPU; classic
//           tracepoint programs are then skipped (bpf_prog_active, counted as recursion misses), raw
//           tracepoint programs are only skipped when they would recurse into themselves.
// Overhead: one per-CPU write at entry, three per-CPU updates at exit; softirqs run at most a few
//           100k/s. Its hooks' cost is in the hot_events programs' (probes/hot_events.bpf.c). Opt-in
//           (--probes ...,softirq): the sampled stacks already split softirq work by category.
#include <uapi/linux/ptrace.h>

BPF_PERCPU_ARRAY(sirq_start, u64, 1);
BPF_PERCPU_ARRAY(sirq_ns, u64, 10);
BPF_PERCPU_ARRAY(sirq_count, u64, 10);

static inline void softirq_on_entry(u64 now) {
    int zero = 0;
    u64 *start = sirq_start.lookup(&zero);
    if (start)
        *start = now;
}

static inline void softirq_on_exit(int vec, u64 now) {
    int zero = 0;
    u64 *start = sirq_start.lookup(&zero);
    if (!start || *start == 0)
        return;  // entered before we attached
    u64 delta = now - *start;
    *start = 0;
    u64 *ns = sirq_ns.lookup(&vec);
    if (ns)
        *ns += delta;
    u64 *cnt = sirq_count.lookup(&vec);
    if (cnt)
        *cnt += 1;
}
