// hot_events: the one program on each hot scheduler and softirq event, serving every probe.
//
// Purpose:  every context switch, wake-up and softirq on the host runs the programs attached to it,
//           whether or not the task is the workload's; two programs on sched_switch (sched_wait's
//           per-thread waits, uprobes' per-call on-CPU clock) would cost two dispatches, two
//           timestamps and two per-CPU reads per switch. (No program counts each process's exact
//           CPU here: the scheduler keeps it, read from /proc and proc_tree's exit hook,
//           dpuprof/record/drain/accounting.py.) Here each event has
//           one program that takes the timestamp once and calls the hook of each loaded probe:
//             sched_switch   sched_wait_on_switch, uprobes_on_switch
//             sched_waking   sched_wait_on_waking
//             softirq_entry  softirq_on_entry, sched_wait_irq_enter
//             softirq_exit   softirq_on_exit, sched_wait_irq_exit
//           This file is appended after the probes' own files (dpuprof/record/load/probes.py), with
//           HOOK_<probe> defined for each probe compiled in; a program is compiled only when one of
//           its hooks is.
// Hooks:    raw tracepoints where dpuprof/record/load/probes.py defines HOT_RAW_TP (Linux >= 5.18,
//           where sched_switch passes prev_state, and BTF for TASK_PID_OFF, task_struct.pid): raw
//           programs are not skipped while another BPF program runs on the CPU, and the kernel
//           fills no trace record for them. Else the classic tracepoints.
//           sched_switch(bool preempt, task_struct *prev, task_struct *next, unsigned int prev_state)
//           runs in prev's context, so prev's ids are the current task's; next's pid is read at
//           TASK_PID_OFF. sched_waking(task_struct *p). softirq_entry/exit(unsigned int vec).
// Maps:     none of its own.
// Overhead: host-wide per switch: one timestamp, sched_wait's thread lookups (one hash miss each
//           for a task outside the workload), uprobes' one array read while no probed call is in
//           flight; none of these programs loads with --light (no sched_wait, no uprobes).
//           Measured (benchmarks/hot_loads.py, benchmarks/HOT_LOADS.md: 2026-12-04, 2-vCPU VM,
//           BPF statistics on, default probes):
//             sched_switch  187 ns x 36,512/s on an iperf3 flood, 194 ns x 83,274/s on 4 x 128
//                           waking threads, 114 ns x 269,650/s under fio at ~295k IOPS (3.08 %
//                           of a core: the largest single cost left, issue 32's step 2)
//             sched_waking  255 ns x 18,327/s (iperf3), 379 ns x 78,577/s (4 x 128 threads)
//             softirq       47 / 39 ns x 80,441/s entry / exit (iperf3: sched_wait's interrupt
//                           depth), 36 / 37 ns x 116,162/s under fio

// The switch-out state as the classic tracepoint reports it (a bit per state letter: S 0x1,
// D 0x2, T 0x4, t 0x8, X 0x10, Z 0x20, P 0x40, I 0x80; 0 for runnable), from the raw arguments:
// preempted is runnable whatever the state; TASK_DEAD (0x80) is an exit; TASK_IDLE
// (TASK_UNINTERRUPTIBLE | TASK_NOLOAD 0x400) is I; TASK_RTLOCK_WAIT (0x1000) counts as D.
static inline long hot_switch_state(u64 preempt, u64 state) {
    if (preempt)
        return 0;
    if (state & 0x80)
        return 0x20;
    if ((state & 0x402) == 0x402)
        return 0x80;
    if (state & 0x1000)
        return 0x2;
    return state & 0x7f;
}

static inline void hot_on_switch(u64 prev_id, u32 next_tid, long state) {
    u64 now = bpf_ktime_get_ns();
#ifdef HOOK_sched_wait
    sched_wait_on_switch(now, (u32)prev_id, prev_id >> 32, next_tid, state);
#endif
#ifdef HOOK_uprobes
    uprobes_on_switch(now, (u32)prev_id);
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

#if defined(HOOK_sched_wait) || defined(HOOK_uprobes)
#define HOT_SWITCH 1
#endif

#ifdef HOT_RAW_TP
static inline u32 hot_task_pid(u64 task) {
    u32 pid = 0;
    bpf_probe_read_kernel(&pid, sizeof(pid), (void *)(task + TASK_PID_OFF));
    return pid;
}

#ifdef HOT_SWITCH
RAW_TRACEPOINT_PROBE(sched_switch) {
#ifdef HOOK_sched_wait
    u32 next = hot_task_pid(ctx->args[2]);
#else
    u32 next = 0;  // only sched_wait follows the task switching in
#endif
    hot_on_switch(bpf_get_current_pid_tgid(), next, hot_switch_state(ctx->args[0], ctx->args[3]));
    return 0;
}
#endif

#ifdef HOOK_sched_wait
RAW_TRACEPOINT_PROBE(sched_waking) {
    sched_wait_on_waking(hot_task_pid(ctx->args[0]));
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
    hot_on_switch(bpf_get_current_pid_tgid(), args->next_pid, args->prev_state & 0xff);
    return 0;
}
#endif

#ifdef HOOK_sched_wait
TRACEPOINT_PROBE(sched, sched_waking) {
    sched_wait_on_waking(args->pid);
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
