// sched_wait: why and on whom each workload thread waits.
//
// Purpose:  for the main thread of every workload process (a task in proc_tree's `tree`: this
//           probe needs proc_tree), time blocked before each wake-up, keyed by (thread, state,
//           waker): the critical-path model follows these edges from a rank's main thread (or a
//           DataLoader worker's) to the thread (or interrupt) that unblocked it, and reads no other
//           thread's waits. Also every workload thread's birth, and its final CPU and run-queue
//           totals at exit, so that the last partial interval of a thread that exits (which /proc
//           no longer shows) and threads living less than one interval are accounted.
//           Other threads' waits were measured too until 2026-12-05, for rows nothing read: beside
//           4 x 128 Python threads sched_waking took 513 ns a wake-up then, 90 ns since (a wake-up
//           of another thread now costs one kernel read).
//           record --wait-duty W/P attaches sched_waking in the first W of every P seconds only
//           (dpuprof/record/drain/waitduty.py), seeding sw_threads' baselines of the main threads
//           from /proc at each attach; its two companions stay attached. Default 1s/4s:
//           sched_waking 0.32 % of a core averaged over an iperf3 flood (393 ns x 8,239/s) and
//           under fio (81 ns x 40,241/s), against 1.21 % and 1.31 % attached throughout
//           (benchmarks/HOT_LOADS.md at ed869c2, 2026-12-07 00:09).
// How:      no program on sched_switch (the one event that fires more often than any other: 270k/s
//           under fio). A wait is measured at its wake-up from counters the scheduler keeps in the
//           task: the time since the thread's previous wake-up, less what it spent since then on
//           the CPU (se.sum_exec_runtime) and waiting for one (sched_info.run_delay, CONFIG_SCHED_INFO),
//           is the time it was blocked. Both counters are complete when a sleeping thread is woken:
//           sum_exec_runtime is brought up to date when it leaves the CPU, run_delay when it gets
//           one. They are durations, so the scheduler's clocks (per-CPU, less steal time on a VM)
//           need no conversion to bpf_ktime_get_ns. A wake-up of a thread still on its run queue
//           (woken before it slept) is no wait and moves no baseline. A wait's count is the
//           scheduler's count of the thread's voluntary switches (nvcsw) since the last measured
//           one, which takes in a wait whose wake-up raced the sleeper's schedule().
// Maps:     sw_threads  HASH tid -> struct sw_thread (baselines at the last wake-up, exit totals)
//                       (16384 entries); user space deletes an entry once the thread has exited
//                       and been accounted
//           sw_waits    HASH (tid, tgid, state, waker tgid, waker tid) -> {ns, count}, cumulative,
//                       main threads only (tid = tgid)
//                                                                                   (16384 entries)
//           sw_outside  PERCPU_ARRAY [0] = {task, tree_gen}: the last task this CPU woke whose
//                       waits are not measured (not a main thread, or not the workload's), with
//                       the generation of `tree` it was looked up in (proc_tree.bpf.c), so that
//                       its next wake-up on this CPU costs two array reads and no kernel read
//                       or hash lookup (see Overhead)
//           sw_span     PERCPU_ARRAY [0] = a copy of the wakee's task_struct from __state to
//                       se.sum_exec_runtime (sw_read_fields)
//           sw_preempt_at PERCPU_ARRAY [0] = the address of this CPU's preempt count (sw_in_interrupt)
//           sw_lost     ARRAY [0] = thread events lost (sw_threads full),
//                             [1] = waits lost (sw_waits full),
//                             [2] = wake-ups not measured: the thread's first one seen (a thread
//                                   that existed before the probe, with no baseline yet)
// States:   the wakee's state as it is woken: 1 "sleep" (TASK_INTERRUPTIBLE, S), 2 "io"
//           (TASK_UNINTERRUPTIBLE, D, and RT-lock waits), 3 "other" (TASK_IDLE, stopped, traced).
// Waker:    sched_waking runs in the waker's context (unlike sched_wakeup, which may run on the
//           wakee's CPU from an IPI), so the current task is the waker. A wake-up from interrupt
//           context (a device interrupt, an hrtimer expiring -- sleeps and timeouts --, a softirq:
//           network receive, block completion, timer wheel) has waker 0, not the task that the
//           interrupt happened to hit: the CPU's preempt count says which (sw_in_interrupt),
//           read only for the waits it measures. Until 2026-12-05 a per-CPU flag set by six
//           programs on the interrupt, hrtimer and softirq edges said it: 38 + 37 ns x 137,566
//           softirq edges/s under fio (1.0 % of a core) and 49 + 40 ns x 36,765 hrtimer
//           expiries/s beside 4 x 128 threads, paid on every CPU for every interrupt. Checked
//           against the kernel's own context flags (trace_pipe's irq column, 3 s of an iperf3
//           flood, 300 sleeps and a busy loop): 12,138 of 12,138 interrupt wake-ups and 5 of 5
//           task-context ones agreed. (Where the tracepoint's arguments lie, the task's stack or
//           the CPU's interrupt stack, would not do: x86-64 runs an interrupt that arrives in
//           user mode on the task's own stack; 1.5 % of block completions read as task context.)
// Overhead: per wake-up on the host: two array reads (the generation, this CPU's sw_outside); unless
//           sw_outside names the wakee, one kernel read (pid and tgid); of a main thread, one hash
//           lookup (two outside the workload); of a workload main thread, one read of a span of
//           its task (four fields) and two reads more, a clock read, one read to tell interrupt
//           context and two hash updates.
//           Measured (benchmarks/hot_loads.py --duration 10 --rounds 1, 2-vCPU VM, 2026-12-06,
//           each change against the one before, in one run): sched_waking 561 -> 430 ns x 24k/s
//           on an iperf3 flood (the span read and the preempt count's address kept: ten reads a
//           measured wake-up were four); under fio 147 -> 118 ns x ~190k/s once a main thread
//           outside the workload skipped its two hash misses (81 % of fio's wake-ups are of
//           ksoftirqd, 13 % of kworkers: bpftrace), and the floor itself: an empty program here
//           runs 61 ns a wake-up under fio, one with the kernel read 98, one that first compares
//           the wakee with the CPU's last one skipped 75 (benchmarks/sched_waking_floor.py
//           --rounds 2: 61.3, 96.4, 75.0); so sw_outside holds the wakee's task, compared before
//           any read: fio 112 -> 93 ns, 4 x 128 threads 194 -> 147 ns, iperf3 432 -> 437 ns.
//           Until 2026-12-05 every thread's waits were measured: 513 ns x 74,568/s beside 4 x 128
//           threads that hash and sleep (HOT_LOADS.md at b5df0dd).
#include <uapi/linux/ptrace.h>
#ifndef TASK_COMM_LEN  // not <linux/sched.h>: it pulls in most of the kernel's headers (probes/cpu_sample.bpf.c)
#define TASK_COMM_LEN 16
#endif
#ifndef SCHED_WAIT_RAW
#error "sched_wait needs raw tracepoints and the kernel's BTF (task_struct offsets)"
#endif

#define SW_SLEEP 1
#define SW_IO 2
#define SW_OTHER 3

struct sw_thread {
    u64 born_ts;   // sched_wakeup_new (0: not seen)
    u64 exit_ts;   // sched_process_exit (0 while alive)
    u64 on_ns;     // se.sum_exec_runtime: at the last wake-up, at exit its total
    u64 runq_ns;   // sched_info.run_delay: likewise
    u64 wake_ts;   // the last wake-up (0: none seen yet)
    u64 nvcsw;     // the scheduler's count of its voluntary switches (times it blocked) at the last wake-up
    u32 pad;
    u32 tgid;      // its process
    char comm[TASK_COMM_LEN];  // at its exit
};

struct sw_wait_key { u32 tid; u32 tgid; u32 state; u32 waker_tgid; u32 waker_tid; u32 pad; };
struct sw_wait_val { u64 ns; u64 count; };

BPF_HASH(sw_threads, u32, struct sw_thread, 16384);
BPF_HASH(sw_waits, struct sw_wait_key, struct sw_wait_val, 16384);
BPF_ARRAY(sw_lost, u64, 3);
struct sw_outside_val { u64 task; u32 gen; u32 pad; };
BPF_PERCPU_ARRAY(sw_outside, struct sw_outside_val, 1);
BPF_PERCPU_ARRAY(sw_preempt_at, u64, 1);  // [0]: this CPU's preempt count's address (0: not yet found)

static inline void sw_count_lost(int idx) {
    u64 *v = sw_lost.lookup(&idx);
    if (v)
        __sync_fetch_and_add(v, 1);
}

static inline u64 sw_read_u64(u64 task, u64 off) {
    u64 v = 0;
    bpf_probe_read_kernel(&v, sizeof(v), (void *)(task + off));
    return v;
}

static inline u32 sw_read_u32(u64 task, u64 off) {
    u32 v = 0;
    bpf_probe_read_kernel(&v, sizeof(v), (void *)(task + off));
    return v;
}

// Thread `tid`'s entry, created on first sight if it is a workload task (in `tree`); NULL otherwise.
static inline struct sw_thread *sw_get(u32 tid, u64 task) {
    struct sw_thread *t = sw_threads.lookup(&tid);
    if (t || !tree.lookup(&tid))
        return t;
    struct sw_thread zero = {.tgid = sw_read_u32(task, SW_TGID_OFF)};
    sw_threads.insert(&tid, &zero);
    t = sw_threads.lookup(&tid);  // NULL only when the map is full
    if (!t)
        sw_count_lost(0);
    return t;
}

// The wakee's state as a wait reason (the task's __state bits: S 0x1, D 0x2, TASK_NOLOAD 0x400,
// TASK_RTLOCK_WAIT 0x1000).
static inline u32 sw_reason(u32 state) {
    if ((state & 0x402) == 0x402)
        return SW_OTHER;  // TASK_IDLE: an idle kernel thread, not blocked on anything
    if (state & 0x1002)
        return SW_IO;
    return (state & 0x1) ? SW_SLEEP : SW_OTHER;
}

// Whether this program runs in interrupt context: a hard interrupt (an hrtimer expiry included),
// an NMI, or serving a softirq, by this CPU's preempt count (include/linux/preempt.h: NMI_MASK
// 0xf00000, HARDIRQ_MASK 0xf0000, SOFTIRQ_OFFSET 0x100), the per-CPU variable the kernel's own
// in_interrupt() reads (x86-64). bcc cannot name a per-CPU variable; the current task's run queue
// is this CPU's, and a per-CPU variable lies at a fixed distance from it (SW_PREEMPT_FROM_RQ,
// from the per-CPU section in BTF). The run queue is read through the task's cfs_rq, which the
// scheduler sets for a task of any class (the idle task's included), once per CPU: the address is
// kept in sw_preempt_at (one read a wait instead of three).
static inline int sw_in_interrupt(void) {
    int zero = 0;
    u64 *count_at = sw_preempt_at.lookup(&zero);  // this CPU's preempt count, found once
    if (!count_at)
        return 0;
    if (!*count_at) {
        u64 cfs_rq = sw_read_u64(bpf_get_current_task(), SW_CFS_RQ_OFF);
        u64 rq = sw_read_u64(cfs_rq, SW_RQ_OFF);
        if (!rq)
            return 0;
        *count_at = rq + SW_PREEMPT_FROM_RQ;  // BPF programs run with migration off: this CPU's
    }
    return (sw_read_u32(*count_at, 0) & 0x00ff0100) != 0;
}

// Charges `ns` blocked in `state` to the waker, by thread. The keys are bounded by main threads x
// wakers. (When every thread's waits were measured, other threads' were charged to the waker's
// process: T threads handing the GIL to each other made up to T x T keys, and 4 x 128 Python
// threads filled the 16384 entries in seconds.)
static inline void sw_add_wait(u32 tid, u32 tgid, u32 state, u64 ns, u64 count) {
    u64 waker = sw_in_interrupt() ? 0 : bpf_get_current_pid_tgid();
    u32 waker_tgid = waker >> 32;
    struct sw_wait_key key = {.tid = tid, .tgid = tgid, .state = state, .waker_tgid = waker_tgid,
                              .waker_tid = (u32)waker};
    struct sw_wait_val init = {};
    struct sw_wait_val *v = sw_waits.lookup_or_try_init(&key, &init);
    if (v) {
        __sync_fetch_and_add(&v->ns, ns);
        __sync_fetch_and_add(&v->count, count);
    } else {
        sw_count_lost(1);
    }
}

// The wakee's fields read at a wake-up that lie near the top of task_struct (__state, on_rq,
// se.sched_delayed, se.sum_exec_runtime: within 216 bytes on 6.18) are copied in one read of
// their span into a per-CPU buffer, where four reads took four helper calls; on a kernel where
// they lie more than SW_SPAN_MAX bytes apart, one read each.
#define SW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SW_MAX(a, b) ((a) > (b) ? (a) : (b))
#ifdef SW_DELAYED_OFF
#define SW_LOW SW_MIN(SW_MIN(SW_STATE_OFF, SW_ON_RQ_OFF), SW_MIN(SW_RUNTIME_OFF, SW_DELAYED_OFF))
#define SW_HIGH SW_MAX(SW_MAX(SW_STATE_OFF + 4, SW_ON_RQ_OFF + 4), SW_MAX(SW_RUNTIME_OFF + 8, SW_DELAYED_OFF + 1))
#else
#define SW_LOW SW_MIN(SW_MIN(SW_STATE_OFF, SW_ON_RQ_OFF), SW_RUNTIME_OFF)
#define SW_HIGH SW_MAX(SW_MAX(SW_STATE_OFF + 4, SW_ON_RQ_OFF + 4), SW_RUNTIME_OFF + 8)
#endif
#define SW_SPAN_LO (SW_LOW & ~7)  // 8-aligned, as task_struct is: each field stays naturally aligned
#define SW_SPAN_MAX 512

struct sw_fields { u64 runtime; u32 state; u32 on_rq; u8 delayed; };

#if SW_HIGH - SW_SPAN_LO <= SW_SPAN_MAX
struct sw_span { u64 w[SW_SPAN_MAX / 8]; };
BPF_PERCPU_ARRAY(sw_span, struct sw_span, 1);
#define SW_AT(type, off) (*(type *)((u8 *)s->w + (off) - SW_SPAN_LO))

static inline int sw_read_fields(u64 task, struct sw_fields *f) {
    int zero = 0;
    struct sw_span *s = sw_span.lookup(&zero);
    if (!s || bpf_probe_read_kernel(s->w, SW_HIGH - SW_SPAN_LO, (void *)(task + SW_SPAN_LO)) != 0)
        return 0;
    f->state = SW_AT(u32, SW_STATE_OFF);
    f->on_rq = SW_AT(u32, SW_ON_RQ_OFF);
    f->runtime = SW_AT(u64, SW_RUNTIME_OFF);
#ifdef SW_DELAYED_OFF
    f->delayed = SW_AT(u8, SW_DELAYED_OFF);
#else
    f->delayed = 0;
#endif
    return 1;
}
#else
static inline int sw_read_fields(u64 task, struct sw_fields *f) {
    f->state = sw_read_u32(task, SW_STATE_OFF);
    f->on_rq = sw_read_u32(task, SW_ON_RQ_OFF);
    f->runtime = sw_read_u64(task, SW_RUNTIME_OFF);
    f->delayed = 0;
#ifdef SW_DELAYED_OFF
    bpf_probe_read_kernel(&f->delayed, 1, (void *)(task + SW_DELAYED_OFF));
#endif
    return 1;
}
#endif

// sched_waking(struct task_struct *p), in the waker's context. A thread that is not its process's
// main thread costs one kernel read; a main thread outside the workload, two hash misses more.
RAW_TRACEPOINT_PROBE(sched_waking) {
    u64 task = ctx->args[0];
    int zero = 0;
    u32 *gen = tree_gen.lookup(&zero);
    struct sw_outside_val *outside = sw_outside.lookup(&zero);
    if (!gen || !outside)
        return 0;
    u32 g = *gen;  // read before the lookups: a task that joins meanwhile changes it
    if (outside->task == task && outside->gen == g)
        return 0;  // this CPU's last wakee not measured, and nothing joined the tree since
#if SW_TGID_OFF == SW_PID_OFF + 4  // pid and tgid side by side, as in every kernel since 2.6: one read
    u64 ids = sw_read_u64(task, SW_PID_OFF);
    u32 tid = (u32)ids;
    int main_thread = tid == (u32)(ids >> 32);
#else
    u32 tid = sw_read_u32(task, SW_PID_OFF);
    int main_thread = tid == sw_read_u32(task, SW_TGID_OFF);
#endif
    struct sw_thread *t = main_thread ? sw_threads.lookup(&tid) : NULL;
    if (!t) {
        if (!main_thread || !tree.lookup(&tid)) {
            // Not a main thread (its waits are not measured), or one outside the workload.
            outside->task = task;
            outside->gen = g;
            return 0;
        }
        t = sw_get(tid, task);  // first sight of a workload main thread
        if (!t)
            return 0;  // sw_threads is full (counted)
    }
    struct sw_fields f = {};
    if (!sw_read_fields(task, &f))
        return 0;
    // Still on its run queue, not asleep (a delayed dequeue, Linux >= 6.12, leaves a sleeping
    // task queued with se.sched_delayed set): woken before it slept, no wait.
    if (f.on_rq && !f.delayed)
        return 0;
    u64 now = bpf_ktime_get_ns();
    u64 on = f.runtime, runq = sw_read_u64(task, SW_RUN_DELAY_OFF);
    u64 nvcsw = sw_read_u64(task, SW_NVCSW_OFF);
    if (t->wake_ts) {
        u64 busy = (on - t->on_ns) + (runq - t->runq_ns);
        u64 wall = now - t->wake_ts;
        // The waits since the last one measured, by the scheduler's count: a wake-up that read the
        // sleeper as still queued while it was on its way into schedule() (the waker raced it;
        // ~2 % of GIL hand-offs on 2 CPUs) ended a real wait, whose time is then in this one.
        // At least 1: this wait's own count may not be in nvcsw yet (it is raised after the
        // dequeue, on the sleeper's CPU), and the next wake-up then finds it.
        u64 count = nvcsw > t->nvcsw ? nvcsw - t->nvcsw : 1;
        sw_add_wait(tid, t->tgid, sw_reason(f.state), wall > busy ? wall - busy : 0, count);
        nvcsw = t->nvcsw + count;
    } else {
        sw_count_lost(2);
    }
    t->nvcsw = nvcsw;
    t->wake_ts = now;
    t->on_ns = on;
    t->runq_ns = runq;
    return 0;
}

// sched_wakeup_new(struct task_struct *p): a new thread, runnable from now with nothing run yet.
RAW_TRACEPOINT_PROBE(sched_wakeup_new) {
    u64 task = ctx->args[0];
    struct sw_thread *t = sw_get(sw_read_u32(task, SW_PID_OFF), task);  // proc_tree added it at fork
    if (t) {
        t->born_ts = bpf_ktime_get_ns();
        t->wake_ts = t->born_ts;
        t->on_ns = sw_read_u64(task, SW_RUNTIME_OFF);
        t->runq_ns = sw_read_u64(task, SW_RUN_DELAY_OFF);
        t->nvcsw = sw_read_u64(task, SW_NVCSW_OFF);
    }
    return 0;
}

// sched_process_exit(struct task_struct *p, ...): runs for every exiting thread, as that thread.
// Its totals are final but for the last moments (sum_exec_runtime is brought up to date at the
// scheduler's tick and at each switch).
RAW_TRACEPOINT_PROBE(sched_process_exit) {
    u64 task = ctx->args[0];
    struct sw_thread *t = sw_get(sw_read_u32(task, SW_PID_OFF), task);  // first sight for most threads
    if (!t)
        return 0;
    t->exit_ts = bpf_ktime_get_ns();
    t->on_ns = sw_read_u64(task, SW_RUNTIME_OFF);
    t->runq_ns = sw_read_u64(task, SW_RUN_DELAY_OFF);
    bpf_get_current_comm(&t->comm, sizeof(t->comm));
    return 0;
}
