// proc_tree: follow the workload's whole process tree from inside the kernel, and say when its
// processes exec.
//
// Purpose:  every task forked by a task already in `tree` joins it, so torchrun ranks, mp.spawn
//           children, DataLoader workers and double-forked daemons are followed even when they live
//           for less than one drain interval. User space seeds `tree` with the recorder's own pid
//           before starting the command and then takes the descendants of the command's pid.
//           Each exec of a process in `tree` (of any process while exec_all[0] is set: -a) is put
//           in `execs` with its time, so that user space (dpuprof/record/drain/execs.py, polling
//           every 20-100 ms) reads the new image's /proc/PID/maps while it runs: a helper that exits
//           before the next drain still has its user frames resolved.
// Maps:     tree        HASH  pid (tid of the new task) -> tgid of its parent   (131072 entries)
//           execs       HASH  tgid -> bpf_ktime_get_ns() of its exec; user space deletes what it
//                             took                                              (4096 entries)
//           exec_all    ARRAY [0] = 1: every exec on the host is put in `execs`
//           tree_lost   ARRAY [0] = forks not recorded because `tree` was full,
//                             [1] = execs not recorded because `execs` was full
// Hooks:    tracepoints sched:sched_process_fork, sched:sched_process_exec
// Overhead: one hash lookup per fork/clone and per exec on the host; negligible (both are rare
//           next to context switches).
#include <uapi/linux/ptrace.h>

BPF_HASH(tree, u32, u32, 131072);
BPF_HASH(execs, u32, u64, 4096);
BPF_ARRAY(exec_all, u32, 1);
BPF_ARRAY(tree_lost, u64, 2);

static inline void tree_count_lost(int idx) {
    u64 *lost = tree_lost.lookup(&idx);
    if (lost)
        __sync_fetch_and_add(lost, 1);
}

TRACEPOINT_PROBE(sched, sched_process_fork) {
    u32 ptgid = bpf_get_current_pid_tgid() >> 32;
    if (!tree.lookup(&ptgid))
        return 0;
    u32 child = args->child_pid;
    if (tree.update(&child, &ptgid) != 0)
        tree_count_lost(0);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exec) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;  // after exec the exec'ing thread leads its group
    int zero = 0;
    u32 *all = exec_all.lookup(&zero);
    if (!tree.lookup(&tgid) && !(all && *all))
        return 0;
    u64 now = bpf_ktime_get_ns();
    if (execs.update(&tgid, &now) != 0)
        tree_count_lost(1);
    return 0;
}
