// cpu_sample: where CPU time goes, by sampling kernel and user stacks on every CPU.
//
// Purpose:  a perf_event software cpu-clock sampler (attached by user space at -F Hz on all CPUs,
//           including idle ones, so idle time is measured too). Each sample counts one
//           (tgid, tid, comm, kernel stack, user stack) key in kernel; user space drains the counts
//           every interval, so no per-sample data crosses to user space.
// Maps:     counts            HASH  struct sample_key -> u64 samples; key.buf says which stack
//                             map its stack ids refer to
//           stacks0/stacks1   STACK_TRACE, double-buffered
//           active            ARRAY [0] = which buffer the program writes (0 or 1); user space
//                             flips it, then drains the keys of the other buffer and clears that
//                             stack map, so draining never races with new samples.
//           sample_lost       ARRAY [0] = samples dropped (counts map full),
//                                   [1] = kernel stacks lost (stack map full/collision),
//                                   [2] = user stacks lost (stack map full/collision)
//                                   [3] = run_ns updates lost (map full)
// Exact time: sampling gives each process's mix of stacks; its total comes from the scheduler.
//           sched_switch credits the on-CPU time since the previous switch on that CPU to the task
//           leaving it (run_ns: exact per-process CPU time, idle included as tgid 0); every sample
//           also credits the running slice so far, so long slices show up in the interval they ran
//           in. User space scales each process's sample counts to its run_ns. (Weighting samples by
//           the time since the last event instead would bias the mix toward code that runs long
//           after a switch; the hrtimer also cannot fire with interrupts off or while a vCPU is out
//           in the hypervisor, which equal weights do not correct either: a known sampling limit.)
//           run_ns      HASH  tgid -> on-CPU ns, cumulative                   (65536 entries)
//           cpu_state   PERCPU_ARRAY [0] = time of the last switch or sample on this CPU
// Hooks:    perf_event PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK; tracepoint sched:sched_switch
// Overhead: one stack walk (kernel + user) per sample: at 99 Hz x N CPUs, well under 0.1 % CPU;
//           one per-CPU read and one hash update per context switch.
#include <uapi/linux/ptrace.h>
#include <uapi/linux/bpf_perf_event.h>
#include <linux/sched.h>

struct sample_key {
    u32 buf;      // which stack map the stack ids refer to
    u32 tgid;
    u32 tid;      // the sampled thread (thread_category)
    s32 kstack;
    s32 ustack;
    u32 pad;      // explicit, so the hashed key has no uninitialised padding before ip
    u64 ip;       // the sampled instruction pointer, only when a stack walk failed (else 0)
    char comm[TASK_COMM_LEN];
};

struct cpu_state {
    u64 last_ts;
};

BPF_HASH(counts, struct sample_key, u64, 65536);
BPF_PERCPU_ARRAY(cpu_state, struct cpu_state, 1);
BPF_HASH(run_ns, u32, u64, 65536);
BPF_STACK_TRACE(stacks0, 16384);
BPF_STACK_TRACE(stacks1, 16384);
BPF_ARRAY(active, u32, 1);
BPF_ARRAY(sample_lost, u64, 4);

static inline void count_lost(int idx) {
    u64 *v = sample_lost.lookup(&idx);
    if (v)
        __sync_fetch_and_add(v, 1);
}

// -EFAULT means "no stack of that kind" (a user-mode sample has no kernel stack, a kernel thread
// no user stack): expected, not a loss.
static inline s32 check_stack(s32 id, int lost_idx) {
    if (id < 0 && id != -EFAULT)
        count_lost(lost_idx);
    return id;
}

// Credit the time since the last switch/sample on this CPU to `tgid`; returns it (0 on the first
// event after attaching, when there is no previous timestamp).
static inline u64 account(u32 tgid) {
    int zero = 0;
    struct cpu_state *st = cpu_state.lookup(&zero);
    if (!st)
        return 0;
    u64 now = bpf_ktime_get_ns();
    u64 delta = st->last_ts ? now - st->last_ts : 0;
    st->last_ts = now;
    if (!delta)
        return 0;
    u64 *v = run_ns.lookup(&tgid);
    if (!v && run_ns.insert(&tgid, &delta) == 0)
        return delta;
    if (!v)
        v = run_ns.lookup(&tgid);  // another CPU inserted it first
    if (v)
        __sync_fetch_and_add(v, delta);
    else
        count_lost(3);
    return delta;
}

TRACEPOINT_PROBE(sched, sched_switch) {
    account(bpf_get_current_pid_tgid() >> 32);  // runs in the context of the task leaving the CPU
    return 0;
}

int on_sample(struct bpf_perf_event_data *ctx) {
    int zero = 0;
    u32 *which = active.lookup(&zero);
    struct sample_key key = {};
    key.buf = which ? *which : 0;
    key.tgid = bpf_get_current_pid_tgid() >> 32;
    key.tid = (u32)bpf_get_current_pid_tgid();
    bpf_get_current_comm(&key.comm, sizeof(key.comm));
    if (key.buf) {
        key.kstack = check_stack(stacks1.get_stackid(&ctx->regs, 0), 1);
        key.ustack = check_stack(stacks1.get_stackid(&ctx->regs, BPF_F_USER_STACK), 2);
    } else {
        key.kstack = check_stack(stacks0.get_stackid(&ctx->regs, 0), 1);
        key.ustack = check_stack(stacks0.get_stackid(&ctx->regs, BPF_F_USER_STACK), 2);
    }
    if ((key.kstack < 0 && key.kstack != -EFAULT) || (key.ustack < 0 && key.ustack != -EFAULT))
        key.ip = PT_REGS_IP(&ctx->regs);  // still classifiable by its leaf frame
    account(key.tgid);
    u64 one = 1, *val = counts.lookup(&key);
    if (val) {
        __sync_fetch_and_add(val, 1);
    } else if (counts.insert(&key, &one) != 0) {
        val = counts.lookup(&key);  // another CPU may have inserted the same key first
        if (val)
            __sync_fetch_and_add(val, 1);
        else
            count_lost(0);
    }
    return 0;
}
