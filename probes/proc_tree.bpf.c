// proc_tree: follow the workload's whole process tree from inside the kernel.
//
// Purpose:  every task forked by a task already in `tree` joins it, so torchrun ranks, mp.spawn
//           children, DataLoader workers and double-forked daemons are followed even when they live
//           for less than one drain interval. User space seeds `tree` with the recorder's own pid
//           before starting the command and then takes the descendants of the command's pid.
// Maps:     tree        HASH  pid (tid of the new task) -> tgid of its parent   (131072 entries)
//           tree_lost   ARRAY [0] = forks not recorded because `tree` was full
// Hooks:    tracepoint sched:sched_process_fork
// Overhead: one hash lookup per fork/clone on the host; negligible.
#include <uapi/linux/ptrace.h>

BPF_HASH(tree, u32, u32, 131072);
BPF_ARRAY(tree_lost, u64, 1);

TRACEPOINT_PROBE(sched, sched_process_fork) {
    u32 ptgid = bpf_get_current_pid_tgid() >> 32;
    if (!tree.lookup(&ptgid))
        return 0;
    u32 child = args->child_pid;
    if (tree.update(&child, &ptgid) != 0) {
        int zero = 0;
        u64 *lost = tree_lost.lookup(&zero);
        if (lost)
            __sync_fetch_and_add(lost, 1);
    }
    return 0;
}
