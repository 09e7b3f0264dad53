// cpu_sample: where CPU time goes, by sampling kernel and user stacks on every CPU.
//
// Purpose:  a perf_event software cpu-clock sampler (attached by user space at -F Hz on all CPUs,
//           including idle ones, so idle time is measured too). Each sample counts one
//           (tgid, comm, kernel stack, user stack) key in kernel; user space drains the counts
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
// Time weighting: the cpu-clock hrtimer cannot fire while a CPU has interrupts off or, in a VM,
//           while the vCPU is out in the hypervisor (a virtio notify exit, say); the kernel then
//           skips the missed periods silently, so a plain sample count under-states exactly the
//           code that held the timer off. Each sample therefore carries the time since the
//           previous sample on its CPU (capped at MAX_GAP_PERIODS periods). After an idle sample
//           the gap is NOHZ idle, not missed work: it is charged one nominal period, the rest is
//           added to idle_gap_ns.
//           idle_gap_ns ARRAY [0] = idle time found in gaps after idle samples (ns, cumulative)
// Hooks:    perf_event PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK
// Overhead: one stack walk (kernel + user) per sample: at 99 Hz x N CPUs, well under 0.1 % CPU.
#include <uapi/linux/ptrace.h>
#include <uapi/linux/bpf_perf_event.h>
#include <linux/sched.h>

struct sample_key {
    u32 buf;      // which stack map the stack ids refer to
    u32 tgid;
    s32 kstack;
    s32 ustack;
    char comm[TASK_COMM_LEN];
};

struct sample_val {
    u64 samples;
    u64 ns;       // CPU time this key stands for: see "Time weighting" above
};
struct cpu_state {
    u64 last_ts;
    u32 last_idle;
};

BPF_HASH(counts, struct sample_key, struct sample_val, 65536);
BPF_PERCPU_ARRAY(cpu_state, struct cpu_state, 1);
BPF_ARRAY(config, u64, 1);        // [0] = nominal sampling period in ns, set by user space
BPF_STACK_TRACE(stacks0, 16384);
BPF_STACK_TRACE(stacks1, 16384);
BPF_ARRAY(active, u32, 1);
BPF_ARRAY(sample_lost, u64, 3);

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

#define MAX_GAP_PERIODS 20
BPF_ARRAY(idle_gap_ns, u64, 1);

static inline u64 sample_weight(u32 idle_now) {
    int zero = 0;
    u64 *cfg = config.lookup(&zero);
    u64 period = cfg && *cfg ? *cfg : 10101010;
    struct cpu_state *st = cpu_state.lookup(&zero);
    if (!st)
        return period;
    u64 now = bpf_ktime_get_ns();
    u64 gap = st->last_ts ? now - st->last_ts : period;
    u32 was_idle = st->last_idle;
    st->last_ts = now;
    st->last_idle = idle_now;
    if (gap > MAX_GAP_PERIODS * period)
        gap = MAX_GAP_PERIODS * period;
    if (was_idle && gap > period) {
        u64 *idle = idle_gap_ns.lookup(&zero);
        if (idle)
            __sync_fetch_and_add(idle, gap - period);
        gap = period;
    }
    return gap;
}

int on_sample(struct bpf_perf_event_data *ctx) {
    int zero = 0;
    u32 *which = active.lookup(&zero);
    struct sample_key key = {};
    key.buf = which ? *which : 0;
    key.tgid = bpf_get_current_pid_tgid() >> 32;
    bpf_get_current_comm(&key.comm, sizeof(key.comm));
    if (key.buf) {
        key.kstack = check_stack(stacks1.get_stackid(&ctx->regs, 0), 1);
        key.ustack = check_stack(stacks1.get_stackid(&ctx->regs, BPF_F_USER_STACK), 2);
    } else {
        key.kstack = check_stack(stacks0.get_stackid(&ctx->regs, 0), 1);
        key.ustack = check_stack(stacks0.get_stackid(&ctx->regs, BPF_F_USER_STACK), 2);
    }
    u64 ns = sample_weight(key.tgid == 0);
    struct sample_val init = {.samples = 1, .ns = ns};
    struct sample_val *val = counts.lookup(&key);
    if (val) {
        __sync_fetch_and_add(&val->samples, 1);
        __sync_fetch_and_add(&val->ns, ns);
    } else if (counts.insert(&key, &init) != 0) {
        val = counts.lookup(&key);  // another CPU may have inserted the same key first
        if (val) {
            __sync_fetch_and_add(&val->samples, 1);
            __sync_fetch_and_add(&val->ns, ns);
        } else {
            count_lost(0);
        }
    }
    return 0;
}
