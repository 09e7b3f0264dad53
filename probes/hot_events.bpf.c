// hot_events: the one program on each hot scheduler and softirq event, serving every probe.
//
// Purpose:  every softirq on the host runs the programs attached to its entry and exit, whether or
//           not the task is the workload's; two programs on one event would cost two dispatches
//           and two timestamps. Here each event has one program that calls the hook of each loaded
//           probe:
//             softirq_entry  softirq_on_entry
//             softirq_exit   softirq_on_exit
//           (sched_wait hooked both until 2026-12-05; it now tells interrupt context without them.)
//           No program runs on a context switch: sched_wait measures each wait at its wake-up and
//           uprobes a call's on-CPU time at its return, both from the task's own scheduler counters
//           (probes/sched_wait.bpf.c, probes/uprobes.bpf.c). This file is appended after the
//           probes' own files (dpuprof/record/load/probes.py), with HOOK_<probe> defined for each
//           probe compiled in; a program is compiled only when one of its hooks is.
// Hooks:    raw tracepoints where dpuprof/record/load/probes.py defines HOT_RAW_TP (Linux >= 4.17):
//           raw programs are not skipped while another BPF program runs on the CPU, and the kernel
//           fills no trace record for them. Else the classic tracepoints.
//           softirq_entry/exit(unsigned int vec).
// Maps:     none of its own.
// Overhead: per softirq edge, with softirq loaded (opt-in): a timestamp and one per-CPU array
//           update. Measured with sched_wait's flag alone (benchmarks/HOT_LOADS.md at 6920357, 2026-12-05):
//           softirq_entry/exit 46 + 41 ns x 80,726/s on an iperf3 flood, 38 + 37 ns x 137,566/s
//           under fio (1.0 % of a core there); softirq's hooks add a clock read and a map update.

#ifdef HOOK_softirq
#define HOT_SOFTIRQ 1
static inline void hot_softirq_entry(u32 vec) {
    softirq_on_entry(bpf_ktime_get_ns());
}

static inline void hot_softirq_exit(u32 vec) {
    softirq_on_exit(vec, bpf_ktime_get_ns());
}
#endif

#ifdef HOT_RAW_TP
#ifdef HOT_SOFTIRQ
RAW_TRACEPOINT_PROBE(softirq_entry) {
    hot_softirq_entry((u32)ctx->args[0]);
    return 0;
}

RAW_TRACEPOINT_PROBE(softirq_exit) {
    hot_softirq_exit((u32)ctx->args[0]);
    return 0;
}
#endif

#else  // classic tracepoints
#ifdef HOT_SOFTIRQ
TRACEPOINT_PROBE(irq, softirq_entry) {
    hot_softirq_entry(args->vec);
    return 0;
}

TRACEPOINT_PROBE(irq, softirq_exit) {
    hot_softirq_exit(args->vec);
    return 0;
}
#endif
#endif
