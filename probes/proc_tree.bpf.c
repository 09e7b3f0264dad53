// proc_tree: follow the workload's whole process tree from inside the kernel, and say when its
// processes exec.
//
// Purpose:  every task forked by a task already in `tree` joins it, so torchrun ranks, mp.spawn
//           children, DataLoader workers and double-forked daemons are followed even when they live
//           for less than one drain interval. User space seeds `tree` with the recorder's own pid
//           before starting the command and then takes the descendants of the command's pid.
//           Each exec of a process in `tree` (of any process while exec_all[0] is set: -a) is put
//           in `execs` with its time, and a record in `exec_wake` wakes user space
//           (dpuprof/record/drain/execs.py: a thread that sleeps until then), which reads the new
//           image's /proc/PID/maps while it runs: a helper that exits before the next drain still
//           has its user frames resolved.
// Maps:     tree        HASH  pid (tid of the new task) -> tgid of its parent   (131072 entries);
//                             user space deletes a task that has exited and that no entry names
//                             as its parent (dpuprof/record/drain/tree.py)
//           execs       HASH  tgid -> bpf_ktime_get_ns() of its exec; user space deletes what it
//                             took                                              (4096 entries)
//           exec_wake   PERF_OUTPUT  the exec'ing tgid, one record per exec put in `execs`: only
//                             a wake-up (the map holds the execs; a lost record loses nothing)
//           exec_all    ARRAY [0] = 1: every exec on the host is put in `execs`, and every
//                             process's exit in `exit_cpu`
//           exit_cpu    HASH  tgid -> the process's whole on-CPU ns (all its threads) when its last
//                             thread exits; user space takes what changed since its last /proc
//                             reading and deletes the entry (drain/accounting.py)  (8192 entries)
//           tree_gen    ARRAY [0] = a generation of `tree`, changed whenever a task joins it (by a
//                             fork here, by user space's seeding) and at each exec (a thread that
//                             execs becomes its process's main thread): sched_wait keeps, per CPU,
//                             the last task whose waits it does not measure, valid within one
//                             generation
//           tree_lost   ARRAY [0] = forks not recorded because `tree` was full,
//                             [1] = execs not recorded because `execs` was full,
//                             [2] = process exits not recorded because `exit_cpu` was full
// Hooks:    sched_process_fork and sched_process_exec as raw tracepoints, sched:sched_process_exit
//           as a tracepoint, where dpuprof/record/load/probes.py defines PROC_TREE_RAW_TP with the
//           offsets below from BTF; else all three as tracepoints, without the exit's CPU. (Why raw:
//           a tracepoint's attachment takes ~45 ms to close, one after another under the kernel's
//           event mutex: ~0.2 s at the end of every recording for proc_tree's and uprobes' five,
//           where raw tracepoints close at once. The exit stays a tracepoint: sched_wait has the
//           raw one, and bcc names a raw program after its event.) TASK_PID_OFF task_struct.pid,
//           TASK_SIGNAL_OFF task_struct.signal, TASK_RUNTIME_OFF
//           task_struct.se.sum_exec_runtime, SIG_LIVE_OFF signal_struct.live, SIG_RUNTIME_OFF
//           signal_struct.sum_sched_runtime. do_exit counts signal->live down before the
//           tracepoint, so the thread that sees 0 is its process's last: the process's CPU is then
//           what its released threads left in signal->sum_sched_runtime plus this thread's own.
// Overhead: one hash lookup per fork/clone, exec and thread exit on the host; negligible (all are
//           rare next to context switches): benchmarks/HOT_LOADS.md (2026-12-04) has the exit hook
//           at 238-1,362 ns x 0.1-20/s, fork 933-1,822 ns x 0.4-34/s.
#include <uapi/linux/ptrace.h>

BPF_HASH(tree, u32, u32, 131072);
BPF_HASH(execs, u32, u64, 4096);
BPF_PERF_OUTPUT(exec_wake);
BPF_ARRAY(exec_all, u32, 1);
BPF_ARRAY(tree_lost, u64, 3);
BPF_ARRAY(tree_gen, u32, 1);
BPF_HASH(exit_cpu, u32, u64, 8192);

// A new generation of `tree` (see tree_gen).
static inline void tree_new_generation(void) {
    int zero = 0;
    u32 *gen = tree_gen.lookup(&zero);
    if (gen)
        __sync_fetch_and_add(gen, 1);
}

static inline void tree_count_lost(int idx) {
    u64 *lost = tree_lost.lookup(&idx);
    if (lost)
        __sync_fetch_and_add(lost, 1);
}

// A fork (in the parent's context) of `child`, a new task's pid.
static inline int tree_on_fork(u32 child) {
    u32 ptgid = bpf_get_current_pid_tgid() >> 32;
    if (!tree.lookup(&ptgid))
        return 0;
    if (tree.update(&child, &ptgid) != 0) {
        tree_count_lost(0);
        return 0;
    }
    tree_new_generation();
    return 0;
}

// An exec, in the context of the thread that exec'd.
static inline int tree_on_exec(void *ctx) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;  // after exec the exec'ing thread leads its group
    int zero = 0;
    u32 *all = exec_all.lookup(&zero);
    if (!tree.lookup(&tgid) && !(all && *all))
        return 0;
    u64 now = bpf_ktime_get_ns();
    if (execs.update(&tgid, &now) != 0)
        tree_count_lost(1);
    else
        exec_wake.perf_submit(ctx, &tgid, sizeof(tgid));
    tree_new_generation();  // a thread that execs becomes its process's main thread (sched_wait)
    return 0;
}

#ifdef PROC_TREE_RAW_TP
// sched_process_fork(struct task_struct *parent, struct task_struct *child)
RAW_TRACEPOINT_PROBE(sched_process_fork) {
    u32 child = 0;
    if (bpf_probe_read_kernel(&child, sizeof(child), (void *)(ctx->args[1] + TASK_PID_OFF)) != 0)
        return 0;
    return tree_on_fork(child);
}

RAW_TRACEPOINT_PROBE(sched_process_exec) {
    return tree_on_exec(ctx);
}
#else
TRACEPOINT_PROBE(sched, sched_process_fork) {
    return tree_on_fork(args->child_pid);
}

TRACEPOINT_PROBE(sched, sched_process_exec) {
    return tree_on_exec(args);
}
#endif

#ifdef PROC_TREE_RAW_TP
static inline u64 tree_read_u64(u64 addr) {
    u64 v = 0;
    bpf_probe_read_kernel(&v, sizeof(v), (void *)addr);
    return v;
}

TRACEPOINT_PROBE(sched, sched_process_exit) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    int zero = 0;
    u32 *all = exec_all.lookup(&zero);
    if (!tree.lookup(&tgid) && !(all && *all))
        return 0;
    u64 task = bpf_get_current_task();
    u64 sig = tree_read_u64(task + TASK_SIGNAL_OFF);
    int live = 1;
    if (!sig || bpf_probe_read_kernel(&live, sizeof(live), (void *)(sig + SIG_LIVE_OFF)) != 0 || live != 0)
        return 0;  // not the process's last thread
    u64 ns = tree_read_u64(sig + SIG_RUNTIME_OFF) + tree_read_u64(task + TASK_RUNTIME_OFF);
    if (exit_cpu.update(&tgid, &ns) != 0)
        tree_count_lost(2);
    return 0;
}
#endif
