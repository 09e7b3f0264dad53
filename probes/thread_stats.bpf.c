// thread_stats: every thread's scheduler counters in one read, for the per-thread tables.
//
// Purpose:  a BPF task iterator (Linux >= 5.8): each read of an iterator made from its link
//           (record/drain/tasks.py) walks every task on the host and writes one fixed-size
//           record per thread: tid, tgid, se.sum_exec_runtime and sched_info.run_delay (the two
//           counters /proc/PID/task/TID/schedstat prints, read from the same fields, so the
//           numbers are the same), start_time (CLOCK_MONOTONIC ns: the thread's birth) and comm.
//           It replaces a pread of each live workload thread's schedstat file every interval, a
//           read of its /proc comm at first sight and every tenth interval, and of its stat for
//           its birth where sched_wait is not loaded: ~3,000 file reads a drain beside 4 x 128
//           threads became one.
// Maps:     ts_rec  PERCPU_ARRAY [0] = the record being written (bpf_seq_write copies it out)
// Hooks:    iter/task, attached by user space (bcc_iter_attach) after the load; nothing runs
//           on any event: the program runs once per task per read, in the reader's context.
// Offsets:  from the running kernel's BTF (record/load/probes.py): TS_PID_OFF task_struct.pid,
//           TS_TGID_OFF .tgid, TS_RUNTIME_OFF .se.sum_exec_runtime, TS_DELAY_OFF
//           .sched_info.run_delay, TS_START_OFF .start_time, TS_COMM_OFF .comm; without BTF the
//           probe is unavailable and the recorder reads /proc as before.
// Overhead: none per event; once an interval, the read, in the recorder's own CPU: ~0.8 us a
//           task on the host in the kernel plus ~0.6 us a record to parse (record/drain/tasks.py).
//           On the 2-vCPU VM (2026-12-07, drainprof over 16 drains): 86 tasks in 90-110 us;
//           beside 4 x 128 threads (~620 tasks) 873 us a read, 387 of it parsing, where the
//           schedstat files alone took 3.2 ms a drain (ProcessTelemetry.sample 3.17 -> 1.24 ms).
#ifndef THREAD_STATS_BTF
#error "thread_stats needs the kernel's BTF (task_struct offsets)"
#endif
#ifndef TASK_COMM_LEN
#define TASK_COMM_LEN 16
#endif

// The iterator's context as the kernel defines it (kernel/bpf/task_iter.c); only its layout
// matters: the verifier checks the accesses against the kernel's own BTF of it.
struct seq_file;
struct task_struct;
struct bpf_iter_meta {
    struct seq_file *seq;
    u64 session_id;
    u64 seq_num;
};
struct bpf_iter__task {
    struct bpf_iter_meta *meta;
    struct task_struct *task;
};

struct ts_record {
    u32 tid;
    u32 tgid;
    u64 on_ns;     // se.sum_exec_runtime
    u64 runq_ns;   // sched_info.run_delay
    u64 start_ns;  // start_time, CLOCK_MONOTONIC
    char comm[TASK_COMM_LEN];
};

BPF_PERCPU_ARRAY(ts_rec, struct ts_record, 1);

BPF_ITER(task) {
    struct task_struct *task = ctx->task;
    if (!task)
        return 0;  // the end of the walk
    int zero = 0;
    struct ts_record *r = ts_rec.lookup(&zero);
    if (!r)
        return 0;
    u8 *t = (u8 *)task;
    bpf_probe_read_kernel(&r->tid, sizeof(r->tid), t + TS_PID_OFF);
    bpf_probe_read_kernel(&r->tgid, sizeof(r->tgid), t + TS_TGID_OFF);
    bpf_probe_read_kernel(&r->on_ns, sizeof(r->on_ns), t + TS_RUNTIME_OFF);
    bpf_probe_read_kernel(&r->runq_ns, sizeof(r->runq_ns), t + TS_DELAY_OFF);
    bpf_probe_read_kernel(&r->start_ns, sizeof(r->start_ns), t + TS_START_OFF);
    bpf_probe_read_kernel(&r->comm, sizeof(r->comm), t + TS_COMM_OFF);
    bpf_seq_write(ctx->meta->seq, r, sizeof(*r));
    return 0;
}
