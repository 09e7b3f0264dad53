// cpu_sample: where CPU time goes, by sampling kernel and user stacks on every CPU.
//
// Purpose:  a perf_event software cpu-clock sampler (attached by user space at -F Hz on all CPUs,
//           including idle ones, so idle time is measured too). Each sample counts one
//           (tgid, tid, comm, kernel stack, user stack) key in kernel; user space drains the counts
//           every interval, so no per-sample data crosses to user space.
// Maps:     counts            HASH  struct sample_key -> u64 samples; key.buf says which stack
//                             map its stack ids refer to
//           stacks0/stacks1   STACK_TRACE, double-buffered
//           spill0/spill1     STACK_TRACE, small: a stack whose hash bucket in stacks0/1 already
//                             holds another stack (-EEXIST) is stored here instead, its id marked
//                             with SPILL_BIT, so a bucket collision loses a stack only when it
//                             collides in both maps (~0.5 % of samples collide in the first at
//                             99 Hz on 2 CPUs; both: ~0.5 % of those)
//           active            ARRAY [0] = which buffer the program writes (0 or 1); user space
//                             flips it, then drains the keys of the other buffer and deletes
//                             every stack id of that buffer's stack maps, so draining never races with new
//                             samples and each interval starts with an empty map (without the
//                             deletes the map fills up and bpf_get_stackid fails with -EEXIST on
//                             every hash-bucket collision: no BPF_F_REUSE_STACKID, which would
//                             silently overwrite stacks that counted keys still refer to).
//           sample_lost       ARRAY, why a sample or one of its stacks was not recorded
//                             (dpuprof/record/drain/maps.py LostDrainer names them):
//                                   [0] samples dropped (counts map full)
//                                   [1] kernel stack: bucket collision in the stack map (-EEXIST)
//                                   [2] user stack: bucket collision in the stack map (-EEXIST)
//                                   [3] unused (run_ns updates lost, when this probe had run_ns)
//                                   [4] kernel stack: stack map full (-ENOMEM)
//                                   [5] user stack: stack map full (-ENOMEM)
//                                   [6] user stack unwalkable: -EFAULT although the sample was
//                                       taken in user mode (not a map loss)
//                                   [7] kernel stack: any other error
//                                   [8] user stack: any other error
// Exact time: sampling gives each process's mix of stacks; its total comes from the scheduler's own
//           accounting, read by user space (/proc/PID/stat for a live workload process, proc_tree's
//           exit hook for one that ended, /proc/stat for the host: drain/accounting.py), so no
//           program runs on sched_switch for it. (Weighting samples by the time since the last
//           event instead would bias the mix toward code that runs long after a switch; the hrtimer
//           also cannot fire with interrupts off or while a vCPU is out in the hypervisor, which
//           equal weights do not correct either: a known sampling limit.)
// Python:   CPython >= 3.12 with its perf trampoline on runs each Python call through a small
//           trampoline of its own (named in /tmp/perf-PID.map), but its interpreter is built
//           without frame pointers, so the user stack walk never reaches those trampolines. For a
//           process whose trampoline address range user space has put in py_ranges, a sample also
//           scans 8 KiB of the user stack above the user sp (in kernel mode, the sp saved at kernel
//           entry: bpf_task_pt_regs) for words inside that range
//           at a trampoline's return offset (return addresses into trampolines), innermost first, and keeps up to PY_DEPTH of them
//           in key.py; user space keeps only words that fall inside a named trampoline
//           (docs/python-frames.md: a scan can also find stale words in live frames).
//           py_ranges   HASH  tgid -> {lo, hi, size, ret}: the trampoline arena (1024 entries)
//           py_scan     PERCPU_ARRAY [0] = the copied stack words
// Hooks:    perf_event PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK, one per CPU, opened 1/(F x CPUs) s
//           apart so that no two CPUs sample at the same instant (a sample would see the other
//           CPUs' handlers: dpuprof/record/load/loaded.py, LoadedProbes.attach_perf_event)
// Overhead: one stack walk (kernel + user) and one hash update per sample; nothing per switch;
//           for the idle task at a known idle leaf, no walk (idle_ips).
//           on_sample (benchmarks/hot_loads.py, benchmarks/HOT_LOADS.md at 4f2c414: 2026-12-07
//           05:15, 2-vCPU VM, 99 Hz): 18.6 us per sample x 198/s on an iperf3 flood (21.6 before
//           the idle leaves, 4d6dde8, same run), 15.4 us beside 4 x 128 Python threads, 8.8 us
//           beside 2 x 8 (19.6 before: its CPUs are mostly idle), 19.3 us under fio: 0.17-0.38 %
//           of one core. A walk costs ~1 us a frame on this VM (the kernel's, timed with
//           bpf_ktime_get_ns around get_stackid on an iperf3 flood: 3.7-5.8 us at depth 1,
//           9-13 us at 8, 9-24 us at 16), most of a busy sample's cost; an idle one's is ~5.6 us.
//           The walk, not the stack map: beside an iperf3 flood (8 s, 99 Hz, one program at a
//           time, kernel.bpf_stats_enabled, 2026-12-07), a program that only walks the kernel
//           stack into a buffer (bpf_get_stack, no map; 11.9 frames a walk) ran 11.5 and 8.5 us,
//           one that only calls get_stackid on it 11.7 and 8.4 us, the user walk 1.2-1.8 us, an
//           empty program 0.13 us. With nine such programs on each CPU, so that walks ran ~9x as
//           often, the same kernel walk took 3.4 us: a walk at 99 Hz pays for cold caches (the
//           unwinder's tables, the stack), not for work a handler could leave out. perf record -g
//           walks with the same kernel code (get_perf_callchain). A cheaper sampler walks less
//           often (a lower rate) or less deep. benchmarks/stack_walk_floor.py measures it (its run:
//           the walk into a buffer 12.9 us alone, 7.2 us right after another program's walk).
#include <uapi/linux/ptrace.h>
// Not <uapi/linux/bpf_perf_event.h> and <linux/sched.h>: through <linux/ptrace.h> they pull in
// most of the kernel's headers, 2.6 s of the compile's CPU (of ~5 s for all probes) for one
// struct and one constant. The UAPI's bpf_perf_event_data (x86-64 and arm64: the regs first).
#ifndef TASK_COMM_LEN
#define TASK_COMM_LEN 16
#endif
struct task_struct;
struct bpf_perf_event_data {
    struct pt_regs regs;
    u64 sample_period;
    u64 addr;
};

#define PY_DEPTH 8          // Python frames kept per sample (a power of two: used as a mask)
#define SCAN_WORDS 1024     // 8 KiB of user stack scanned per sample of a Python process

struct sample_key {
    u32 buf;      // which stack map the stack ids refer to
    u32 tgid;
    u32 tid;      // the sampled thread (thread_category)
    s32 kstack;
    s32 ustack;
    u32 pad;      // explicit, so the hashed key has no uninitialised padding before ip
    u64 ip;       // the sampled instruction pointer, only when a stack walk failed (else 0)
    char comm[TASK_COMM_LEN];
    u64 py[PY_DEPTH];  // return addresses into Python trampolines, innermost first (0 = none)
};

struct py_range {
    u64 lo;    // the trampoline arena: a trampoline every `size` bytes from lo (the stride)
    u64 hi;
    u64 size;
    u64 ret;   // a return address's offset inside a trampoline (just after its call)
};

struct py_words {
    u64 w[SCAN_WORDS];
    u64 py[PY_DEPTH];  // frames found, innermost first
    u32 n;      // frames found so far
    u32 pad;
};

BPF_HASH(counts, struct sample_key, u64, 65536);
BPF_STACK_TRACE(stacks0, 16384);
BPF_STACK_TRACE(stacks1, 16384);
BPF_STACK_TRACE(spill0, 4096);
BPF_STACK_TRACE(spill1, 4096);
#define SPILL_BIT 0x40000000  // in a stack id: the stack is in spillN, not stacksN
BPF_ARRAY(active, u32, 1);
BPF_ARRAY(sample_lost, u64, 9);
BPF_HASH(py_ranges, u32, struct py_range, 1024);
BPF_PERCPU_ARRAY(py_scan, struct py_words, 1);
// Idle leaves: instruction pointers at which the idle task (pid 0) was sampled in a function
// that classifies the sample as idle by itself (the classifier decides from the leaf outwards:
// dpuprof/data/rules.toml). User space adds each such leaf once it has seen it at the end of a
// walked stack (SampleDrainer._learn_idle); a sample of pid 0 at a listed ip then walks no stack:
// key.kstack = IDLE_LEAF and key.ip = the ip, from which user space builds a one-frame stack
// (the same category; the idle chain above it is not kept). The kernel walk is most of a
// sample's cost here (~1 us a frame, ~9 frames in the idle loop), and an idle CPU is sampled as
// often as a busy one: on a GPU host that waits on its GPUs, most samples.
BPF_HASH(idle_ips, u64, u8, 64);
#define IDLE_LEAF (-ENOENT)  // in key.kstack: no walk, an idle leaf at key.ip (never a walk's error)

// One pass over the first `words` copied words (a constant at each call, so the verifier's path
// has four jumps a word: loop, n, range, offset; it allows 8192 on a path). Only words at a
// trampoline's return offset count: function pointers to trampolines (offset 0) and stale words
// at other offsets are common in the interpreter's frames. The scan's state lives in the
// per-CPU map value, read back volatile, so the verifier sees n as a range, not one exact value
// per path, and its states converge at every word (with n exact it gives up: too many states;
// bcc 0.26 cannot pass bpf_loop a callback).
static inline void scan_words(struct py_words *s, struct py_range *r, const int words) {
    u64 lo = r->lo, span = r->hi - r->lo, size = r->size, ret = r->ret;
#pragma clang loop unroll(disable)
    for (int i = 0; i < words; i++) {
        u32 n = *(volatile u32 *)&s->n;
        if (n >= PY_DEPTH)
            break;
        u64 w = s->w[i & (SCAN_WORDS - 1)];
        u64 d = w - lo;  // lo <= w < lo + span: one unsigned compare
        if (d < span && d % size == ret) {
            u32 j = n;
            asm volatile("" : "+r"(j));  // keep the mask: clang drops it after the n check above
            s->py[j & (PY_DEPTH - 1)] = w;
            s->n = n + 1;
        }
    }
}

// bpf_task_pt_regs (kernel 5.15), which bcc 0.26's helpers.h documents but does not declare.
static long (*task_pt_regs_)(struct task_struct *task) = (void *)175;

// The user stack pointer: from the sample's registers in user mode; in kernel mode (a system
// call, a fault) from the registers saved at kernel entry. 0 when unknown.
static inline u64 user_sp(struct bpf_perf_event_data *ctx, int umode) {
    if (umode)
        return PT_REGS_SP(&ctx->regs);
    struct pt_regs *regs = (struct pt_regs *)task_pt_regs_(bpf_get_current_task_btf());
    u64 sp = 0;
    if (!regs || bpf_probe_read_kernel(&sp, sizeof(sp), &regs->sp) != 0)
        return 0;
    return sp;
}

// Fill key->py from a scan of the user stack (see "Python" above).
static inline void scan_python(struct sample_key *key, struct bpf_perf_event_data *ctx, int umode) {
    struct py_range *r = py_ranges.lookup(&key->tgid);
    int zero = 0;
    struct py_words *s = py_scan.lookup(&zero);
    if (!r || !s || r->hi <= r->lo || !r->size)
        return;
    void *sp = (void *)user_sp(ctx, umode);
    if (!sp)
        return;
    s->n = 0;
    __builtin_memset(s->py, 0, sizeof(s->py));
    // A read that would run past the top of the stack fails whole: halve it until it fits (the
    // main thread of a shallow program is often less than 8 KiB below its stack's top).
    if (bpf_probe_read_user(s->w, SCAN_WORDS * 8, sp) == 0)
        scan_words(s, r, SCAN_WORDS);
    else if (bpf_probe_read_user(s->w, SCAN_WORDS * 4, sp) == 0)
        scan_words(s, r, SCAN_WORDS / 2);
    else if (bpf_probe_read_user(s->w, SCAN_WORDS * 2, sp) == 0)
        scan_words(s, r, SCAN_WORDS / 4);
    else if (bpf_probe_read_user(s->w, SCAN_WORDS, sp) == 0)
        scan_words(s, r, SCAN_WORDS / 8);
    else
        return;
    if (s->n)
        __builtin_memcpy(key->py, s->py, sizeof(key->py));
}

static inline void count_lost(int idx) {
    u64 *v = sample_lost.lookup(&idx);
    if (v)
        __sync_fetch_and_add(v, 1);
}

// Counts a failed stack walk by its error code, so map loss (-EEXIST, -ENOMEM) and unwalkable
// stacks never mask each other. -EFAULT means "no stack of that kind": expected, not a loss, for
// the kernel stack of a user-mode sample and for the user stack of a kernel-mode sample (a kernel
// thread has none); only a user-mode sample whose user stack still fails is counted (unwalkable).
static inline s32 check_stack(s32 id, int user, int user_mode) {
    if (id >= 0)
        return id;
    if (id == -EEXIST)
        count_lost(user ? 2 : 1);
    else if (id == -ENOMEM)
        count_lost(user ? 5 : 4);
    else if (id == -EFAULT) {
        if (user && user_mode)
            count_lost(6);
    } else
        count_lost(user ? 8 : 7);
    return id;
}

static inline void count_sample(struct sample_key *key) {
    u64 one = 1, *val = counts.lookup(key);
    if (val) {
        __sync_fetch_and_add(val, 1);
    } else if (counts.insert(key, &one) != 0) {
        val = counts.lookup(key);  // another CPU may have inserted the same key first
        if (val)
            __sync_fetch_and_add(val, 1);
        else
            count_lost(0);
    }
}

int on_sample(struct bpf_perf_event_data *ctx) {
    int zero = 0;
    u32 *which = active.lookup(&zero);
    struct sample_key key = {};
    key.buf = which ? *which : 0;
    key.tgid = bpf_get_current_pid_tgid() >> 32;
    key.tid = (u32)bpf_get_current_pid_tgid();
    bpf_get_current_comm(&key.comm, sizeof(key.comm));
    int umode = (ctx->regs.cs & 3) == 3;  // x86-64: CPL 3 = interrupted in user mode
    u64 ip = PT_REGS_IP(&ctx->regs);
    if (!key.tgid && !umode && idle_ips.lookup(&ip)) {
        key.kstack = IDLE_LEAF;
        key.ustack = -EFAULT;  // the idle task has no user stack
        key.ip = ip;
        count_sample(&key);
        return 0;
    }
    s32 k, u;
    if (key.buf) {
        k = stacks1.get_stackid(&ctx->regs, 0);
        if (k == -EEXIST && (k = spill1.get_stackid(&ctx->regs, 0)) >= 0)
            k |= SPILL_BIT;
        u = stacks1.get_stackid(&ctx->regs, BPF_F_USER_STACK);
        if (u == -EEXIST && (u = spill1.get_stackid(&ctx->regs, BPF_F_USER_STACK)) >= 0)
            u |= SPILL_BIT;
    } else {
        k = stacks0.get_stackid(&ctx->regs, 0);
        if (k == -EEXIST && (k = spill0.get_stackid(&ctx->regs, 0)) >= 0)
            k |= SPILL_BIT;
        u = stacks0.get_stackid(&ctx->regs, BPF_F_USER_STACK);
        if (u == -EEXIST && (u = spill0.get_stackid(&ctx->regs, BPF_F_USER_STACK)) >= 0)
            u |= SPILL_BIT;
    }
    key.kstack = check_stack(k, 0, umode);
    key.ustack = check_stack(u, 1, umode);
    if ((key.kstack < 0 && key.kstack != -EFAULT) || (key.ustack < 0 && key.ustack != -EFAULT))
        key.ip = ip;  // still classifiable by its leaf frame
    scan_python(&key, ctx, umode);
    count_sample(&key);
    return 0;
}
