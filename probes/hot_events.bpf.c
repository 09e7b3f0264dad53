// hot_events: the one program on each hot scheduler and softirq event, serving every probe.
//
// Purpose:  every context switch and softirq on the host runs the programs attached to it, whether
//           or not the task is the workload's; two programs on one event would cost two dispatches
//           and two timestamps. Here each event has one program that calls the hook of each loaded
//           probe:
//             sched_switch   uprobes_on_switch (per-call on-CPU time of probed calls)
//             softirq_entry  softirq_on_entry, sched_wait_irq_enter
//             softirq_exit   softirq_on_exit, sched_wait_irq_exit
//           (sched_wait has no switch hook: it measures each wait at the wake-up, from the task's
//           own counters, probes/sched_wait.bpf.c.) This file is appended after the probes' own
//           files (dpuprof/record/load/probes.py), with HOOK_<probe> defined for each probe
//           compiled in; a program is compiled only when one of its hooks is.
// Hooks:    raw tracepoints where dpuprof/record/load/probes.py defines HOT_RAW_TP (Linux >= 5.18
//           and BTF): raw programs are not skipped while another BPF program runs on the CPU, and
//           the kernel fills no trace record for them. Else the classic tracepoints.
//           sched_switch(bool preempt, task_struct *prev, ...) runs in prev's context, so prev's
//           ids are the current task's. softirq_entry/exit(unsigned int vec).
// Maps:     none of its own.
// Overhead: host-wide per switch, with uprobes loaded (the default probes; not --light): one
//           timestamp and one array read while no probed call is in flight. Per softirq edge, with
//           sched_wait or softirq loaded: one per-CPU array update (softirq: a timestamp too).
//           Measured: benchmarks/HOT_LOADS.md (sched_switch, softirq_entry, softirq_exit rows).

static inline void hot_on_switch(u64 prev_id) {
#ifdef HOOK_uprobes
    uprobes_on_switch(bpf_ktime_get_ns(), (u32)prev_id);
#endif
}

#if defined(HOOK_softirq) || defined(HOOK_sched_wait)
#define HOT_SOFTIRQ 1
static inline void hot_softirq_entry(u32 vec) {
#ifdef HOOK_softirq
    softirq_on_entry(bpf_ktime_get_ns());
#endif
#ifdef HOOK_sched_wait
    sched_wait_irq_enter();
#endif
}

static inline void hot_softirq_exit(u32 vec) {
#ifdef HOOK_softirq
    softirq_on_exit(vec, bpf_ktime_get_ns());
#endif
#ifdef HOOK_sched_wait
    sched_wait_irq_exit();
#endif
}
#endif

#ifdef HOOK_uprobes
#define HOT_SWITCH 1
#endif

#ifdef HOT_RAW_TP
#ifdef HOT_SWITCH
RAW_TRACEPOINT_PROBE(sched_switch) {
    hot_on_switch(bpf_get_current_pid_tgid());
    return 0;
}
#endif

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
#ifdef HOT_SWITCH
TRACEPOINT_PROBE(sched, sched_switch) {
    hot_on_switch(bpf_get_current_pid_tgid());
    return 0;
}
#endif

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
