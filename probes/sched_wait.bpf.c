// sched_wait: why and on whom each workload thread waits, and its scheduling state.
//
// Purpose:  for every thread of the workload (a task in proc_tree's `tree`: this probe needs
//           proc_tree), time blocked from switch-out to wake-up, keyed by (thread, state, waker):
//           the critical-path model follows these edges from a rank's main thread to the thread
//           (or interrupt) that unblocked it. Also per-thread on-CPU and run-queue time, birth and
//           exit, so that the last partial interval of a thread that exits (which /proc no longer
//           shows) and threads living less than one interval are accounted.
// Maps:     sw_threads  HASH tid -> struct sw_thread (state and cumulative times)   (16384 entries)
//                       user space deletes an entry once the thread has exited and been accounted
//           sw_waits    HASH (tid, tgid, state, waker tgid, waker tid) -> {ns, count}, cumulative;
//                       the waker's tid for a main thread's waits, its tgid for other threads'
//                                                                                   (16384 entries)
//           sw_cpu      PERCPU_ARRAY [0] = time of the last sched_switch on this CPU
//           sw_irq      PERCPU_ARRAY [0] = interrupt-handler nesting depth on this CPU
//           sw_lost     ARRAY [0] = thread events lost (sw_threads full),
//                             [1] = waits lost (sw_waits full),
//                             [2] = wake-ups not seen (the kernel skipped sched_waking while
//                                   another BPF program ran on that CPU, or the waker raced the
//                                   sleeper's schedule()): that wait is recorded up to the
//                                   switch-in, with waker -1 (unknown)
// States:   1 "sleep" (TASK_INTERRUPTIBLE, S), 2 "io" (TASK_UNINTERRUPTIBLE, D), 3 "other"
//           (stopped, traced, parked). A switch-out with prev_state R (preempted, or a yield) is
//           run-queue time, not a wait: /proc's schedstat counts it as run delay.
// Waker:    sched_waking runs in the waker's context (unlike sched_wakeup, which may run on the
//           wakee's CPU from an IPI), so the current task is the waker. A wake-up from interrupt
//           context (a device interrupt, an hrtimer expiring -- sleeps and timeouts --, a softirq:
//           network receive, block completion, timer wheel) has waker 0, not the task that the
//           interrupt happened to hit: sw_irq counts, per CPU, how deep the CPU is in those
//           handlers (entry/exit tracepoints); sched_switch resets it, since no switch happens in
//           interrupt context, so an exit the kernel skipped (recursion) cannot leave it set.
//           Wake-ups from other interrupt work (IPIs, irq_work) keep the interrupted task.
// Hooks:    sched:sched_switch, sched:sched_waking and irq:softirq_entry/exit through the hooks
//           below (sched_wait_on_switch, sched_wait_on_waking, sched_wait_irq_enter/exit), called
//           by the one program on each of those events (probes/hot_events.bpf.c: raw tracepoints
//           where the kernel has them); irq:irq_handler_entry/exit and
//           timer:hrtimer_expire_entry/exit (functions sw_irq_enter/sw_irq_exit, attached by name;
//           raw tracepoints where the kernel has them -- dpuprof/record/load/probes.py defines
//           SCHED_WAIT_RAW_IRQ then; they read no argument, so the one function serves both kinds --,
//           since classic tracepoint programs are skipped while another BPF program runs on the
//           CPU); sched:sched_wakeup_new (once per thread).
// Overhead: per context switch on the host: one per-CPU update and one or two hash lookups
//           (prev in sw_threads, else in tree); workload threads add one hash update per wait.
//           Per wake-up on the host: one hash lookup; a workload thread's adds one hash update.
//           The switch and wake-up hooks are in hot_events' measured cost; the interrupt edges
//           (benchmarks/hot_loads.py, benchmarks/HOT_LOADS.md: 2026-12-04, 2-vCPU VM, BPF
//           statistics on): sw_irq_enter / sw_irq_exit 45 / 40 ns x 37,359/s on 4 x 128 waking
//           threads (hrtimer expiries), 39 / 37 ns x 20,207/s on an iperf3 flood. This probe's
//           hooks are most of the default recorder's cost on these loads (record --help OVERHEAD).
#include <uapi/linux/ptrace.h>
#ifndef TASK_COMM_LEN  // not <linux/sched.h>: it pulls in most of the kernel's headers (probes/cpu_sample.bpf.c)
#define TASK_COMM_LEN 16
#endif

#define SW_SLEEP 1
#define SW_IO 2
#define SW_OTHER 3
#define SW_UNKNOWN 0xffffffff  // waker not seen (user space writes -1)
// prev_state as sched_switch reports it: a bit per state letter (1 << task_state_index), 0 for R;
// preemption sets bit 0x100 (R+), masked off below.
#define SW_STATE_S 0x01
#define SW_STATE_D 0x02
#define SW_EXIT_STATES 0x30  // X (EXIT_DEAD) and Z (EXIT_ZOMBIE)

struct sw_thread {
    u64 born_ts;   // sched_wakeup_new (0: not seen)
    u64 exit_ts;   // its final switch-out (0 while alive)
    u64 on_ns;     // cumulative on-CPU ns
    u64 runq_ns;   // cumulative runnable-but-waiting ns
    u64 runq_ts;   // runnable since (0: not on a run queue)
    u64 wait_ts;   // blocked since (0: not blocked)
    u32 wait_state;
    u32 tgid;      // its process, from its last switch-out
    char comm[TASK_COMM_LEN];  // at its exit
};

struct sw_wait_key { u32 tid; u32 tgid; u32 state; u32 waker_tgid; u32 waker_tid; u32 pad; };
struct sw_wait_val { u64 ns; u64 count; };
struct sw_cpu_state { u64 last_ts; };

BPF_HASH(sw_threads, u32, struct sw_thread, 16384);
BPF_HASH(sw_waits, struct sw_wait_key, struct sw_wait_val, 16384);
BPF_PERCPU_ARRAY(sw_cpu, struct sw_cpu_state, 1);
BPF_PERCPU_ARRAY(sw_irq, u32, 1);
BPF_ARRAY(sw_lost, u64, 3);

static inline void sw_count_lost(int idx) {
    u64 *v = sw_lost.lookup(&idx);
    if (v)
        __sync_fetch_and_add(v, 1);
}

// The thread's entry, created on first sight if it is a workload task (in `tree`); NULL otherwise.
static inline struct sw_thread *sw_get(u32 tid) {
    struct sw_thread *t = sw_threads.lookup(&tid);
    if (t || !tree.lookup(&tid))
        return t;
    struct sw_thread zero = {};
    sw_threads.insert(&tid, &zero);
    t = sw_threads.lookup(&tid);  // NULL only when the map is full
    if (!t)
        sw_count_lost(0);
    return t;
}

// Ends the wait of thread `tid` (entry `t`) at `now`, charging it to the waker. Only a process's
// main thread (a rank, a DataLoader worker: the threads the critical-path model follows) keeps the
// waker's thread; another thread's wait is charged to the waker's process (waker_tid = its tgid):
// with the waker's thread in the key, T threads handing a lock or the GIL to each other made up to
// T x T keys (4 x 128 Python threads filled the 16384 entries in seconds).
static inline void sw_add_wait(u32 tid, struct sw_thread *t, u32 waker_tgid, u32 waker_tid, u64 now) {
    struct sw_wait_key key = {.tid = tid, .tgid = t->tgid, .state = t->wait_state, .waker_tgid = waker_tgid,
                              .waker_tid = tid == t->tgid ? waker_tid : waker_tgid};
    // Another CPU may have stamped wait_ts after this one read its clock (a switch-out racing the
    // wake-up that ends it): such a wait is 0, never a negative one wrapped to 2^64 - x.
    u64 ns = now > t->wait_ts ? now - t->wait_ts : 0;
    t->wait_ts = 0;
    struct sw_wait_val init = {};
    struct sw_wait_val *v = sw_waits.lookup_or_try_init(&key, &init);
    if (v) {
        __sync_fetch_and_add(&v->ns, ns);
        __sync_fetch_and_add(&v->count, 1);
    } else {
        sw_count_lost(1);
    }
}

// sched_switch's hook: `prev` (of process `prev_tgid`: the current task) leaves the CPU in `state`
// (the classic tracepoint's prev_state bits, probes/hot_events.bpf.c), `next` takes it, at `now`.
static inline void sched_wait_on_switch(u64 now, u32 prev, u32 prev_tgid, u32 next, long state) {
    int zero = 0;
    u64 slice_start = 0;
    struct sw_cpu_state *cpu = sw_cpu.lookup(&zero);
    if (cpu) {
        slice_start = cpu->last_ts;  // the previous switch on this CPU: prev's switch-in
        cpu->last_ts = now;
    }
    u32 *depth = sw_irq.lookup(&zero);
    if (depth)
        *depth = 0;
    struct sw_thread *t = prev ? sw_get(prev) : 0;
    if (t) {
        if (slice_start) {
            t->on_ns += now - slice_start;
            if (t->runq_ts && t->runq_ts < slice_start) {  // runnable until it got this CPU
                t->runq_ns += slice_start - t->runq_ts;
            }
        }
        t->runq_ts = 0;
        t->tgid = prev_tgid;
        if (state & SW_EXIT_STATES) {
            t->exit_ts = now;
            bpf_get_current_comm(&t->comm, sizeof(t->comm));  // prev is the current task
        } else if (state == 0) {
            t->runq_ts = now;  // preempted or yielded: still runnable
        } else {
            t->wait_ts = now;
            t->wait_state = (state & SW_STATE_D) ? SW_IO : (state & SW_STATE_S) ? SW_SLEEP : SW_OTHER;
        }
    }
    struct sw_thread *n = next ? sw_threads.lookup(&next) : 0;
    if (n && n->wait_ts) {
        // Switched in with no sched_waking seen since its switch-out: the kernel skipped that
        // program (recursion), or the waker raced the sleeper's schedule(). The wait is kept,
        // up to this switch-in, with waker "unknown".
        sw_add_wait(next, n, SW_UNKNOWN, SW_UNKNOWN, now);
        sw_count_lost(2);
    }
}

// sched_waking's hook: thread `tid` is being woken, in the waker's context. The clock is read
// after its wait is found: a thread outside the workload costs one lookup and no clock read.
static inline void sched_wait_on_waking(u32 tid) {
    struct sw_thread *t = sw_threads.lookup(&tid);
    if (!t || !t->wait_ts)
        return;
    u64 now = bpf_ktime_get_ns();
    int zero = 0;
    u32 *depth = sw_irq.lookup(&zero);
    u64 waker = (depth && *depth) ? 0 : bpf_get_current_pid_tgid();
    sw_add_wait(tid, t, waker >> 32, (u32)waker, now);
    t->runq_ts = now;
}

TRACEPOINT_PROBE(sched, sched_wakeup_new) {
    u32 tid = args->pid;
    struct sw_thread *t = sw_get(tid);  // proc_tree added it at sched_process_fork, just before
    if (t) {
        t->born_ts = bpf_ktime_get_ns();
        t->runq_ts = t->born_ts;
    }
    return 0;
}

static inline void sched_wait_irq_enter(void) {
    int zero = 0;
    u32 *depth = sw_irq.lookup(&zero);
    if (depth)
        *depth += 1;
}

static inline void sched_wait_irq_exit(void) {
    int zero = 0;
    u32 *depth = sw_irq.lookup(&zero);
    if (depth && *depth)
        *depth -= 1;
}

int sw_irq_enter(void *ctx) {
    sched_wait_irq_enter();
    return 0;
}

int sw_irq_exit(void *ctx) {
    sched_wait_irq_exit();
    return 0;
}
