// uprobes: collectives, step markers and cipher/codec calls of the workload (user-space probes).
//
// Purpose:  what the critical-path model needs beyond CPU samples: every all-reduce (count, payload
//           bytes, duration per thread), training-step markers, and bytes per cipher/codec call with
//           its direction (stripped libz samples cannot tell inflate from deflate).
// Maps:     wl          HASH  tgid -> 1: the workload. User space seeds it with the recorder's
//                             pid -> 2 (followed, not counted); a process forked by one in wl
//                             joins with 1 (the same tree as proc_tree.bpf.c, kept here so that
//                             this file also compiles alone)
//           inflight    HASH  (tid, fn) -> entry state (start ns, bytes, z_stream pointer/total_in)
//           coll_stats  HASH  (tgid, tid, op) -> {count, bytes, ns}, cumulative
//           codec_stats HASH  (tgid, lib, fn) -> {calls, bytes, ns}, cumulative
//           marks       PERF_OUTPUT {tgid, tid, kind, ns}: one event per marker hit
//           hits        PERCPU_ARRAY [lib * 8 + fn] -> entry hits of every process, workload or not
//                             (user space detaches a target hit too often: each hit is a trap)
//           up_lost     ARRAY [0] stats map full, [1] inflight map full,
//                             [2] all-reduce whose payload size failed the layout cross-check
// Hooks:    uprobe/uretprobe pairs attached by dpuprof/record/drain/uprobes.py once a workload process
//           maps the library; tracepoint syscalls:sys_enter_getpgid (dpuprof.mark_step's marker);
//           task_newtask (workload membership; proc_tree owns sched_process_fork), a raw tracepoint
//           where UP_TASK_CLOCK's offsets are found, else a tracepoint;
//           no program on sched_switch: a call's on-CPU time is the calling thread's own CPU clock
//           at return less at entry, read from its task (below).
// CPU clock: the scheduler's se.sum_exec_runtime is brought up to date only at a tick or a
//           switch, so a thread's CPU time now is sum_exec_runtime + (the CPU's task clock now -
//           se.exec_start). The task clock is per CPU and lags bpf_ktime_get_ns by the steal time
//           that CPU accumulated (a VM; 1.4 and 1.8 s on the two vCPUs of the development VM), an
//           offset that cancels between entry and return on the same CPU. A call that returns on
//           another CPU than it entered on gets the difference of the two sum_exec_runtime
//           readings (each up to a tick stale). Either way at most the call's wall time. Offsets
//           from the running kernel's BTF (UP_TASK_CLOCK, dpuprof/record/load/probes.py); without
//           BTF cpu_ns is 0 (unknown).
// Overhead: a uprobe hit is a trap into the kernel (~1-3 us each, twice with its uretprobe), so
//           only calls made at most thousands of times a second are probed (docs/uprobes.md).
//           The programs' own run time beside examples/train_ddp.py (2 ranks, kernel.bpf_stats_enabled,
//           14 s, 2026-12-07): on_allreduce 5.3-5.9 us and its return 3.2-3.8 us x ~85/s each,
//           on_ddp_step 4.9-5.5 us x ~28/s, ~0.09 % of a core together. The marks buffer is opened
//           without wake-ups (read at each drain): with one per mark, on_ddp_step took 21.9 us
//           (the wake-up's irq_work is a self-IPI).
#include <uapi/linux/ptrace.h>

#define MARK_MAGIC (-1685091696)   // dpuprof.mark_step(): os.getpgid(MARK_MAGIC) fails with ESRCH

// Function ids (fn): keep in step with FUNCS in dpuprof/record/drain/uprobes.py.
#define FN_ALLREDUCE 0
#define FN_INFLATE 1
#define FN_DEFLATE 2
#define FN_ENCRYPT 3
#define FN_DECRYPT 4
#define FN_DDP_STEP 5
#define LIB_TORCH 3
#define KIND_STEP 0
#define KIND_DDP_STEP 1

struct fly_key { u32 tid; u32 fn; };
struct fly_val { u64 ts; u64 cpu0; u64 sum0; u64 bytes; u64 strm; u64 total_in; u32 cpu; u32 pad; };
struct coll_key { u32 tgid; u32 tid; u32 op; u32 pad; };
struct coll_val { u64 count; u64 bytes; u64 ns; };
struct codec_key { u32 tgid; u32 lib; u32 fn; u32 pad; };
struct codec_val { u64 calls; u64 bytes; u64 ns; u64 cpu_ns; };
struct mark_ev { u32 tgid; u32 tid; u32 kind; u32 pad; u64 ns; };

BPF_HASH(wl, u32, u32, 65536);
BPF_HASH(inflight, struct fly_key, struct fly_val, 16384);
BPF_HASH(coll_stats, struct coll_key, struct coll_val, 4096);
BPF_HASH(codec_stats, struct codec_key, struct codec_val, 4096);
BPF_PERF_OUTPUT(marks);
BPF_ARRAY(up_lost, u64, 3);
BPF_PERCPU_ARRAY(hits, u64, 32);

static inline void count_hit(u32 lib, u32 fn) {
    u32 slot = lib * 8 + fn;
    u64 *n = hits.lookup(&slot);
    if (n)
        *n += 1;   // per-CPU: no other writer
}

static inline void up_count_lost(int idx) {
    u64 *lost = up_lost.lookup(&idx);
    if (lost)
        __sync_fetch_and_add(lost, 1);
}

static inline int in_workload(u32 tgid) {
    u32 *member = wl.lookup(&tgid);
    return member && *member == 1;
}

#define UP_CLONE_THREAD 0x00010000
static inline int up_on_newtask(u64 clone_flags, u32 child) {
    if (clone_flags & UP_CLONE_THREAD)
        return 0;   // a thread: its process is already a member or not
    u32 ptgid = bpf_get_current_pid_tgid() >> 32;
    if (!wl.lookup(&ptgid))
        return 0;
    u32 one = 1;
    wl.update(&child, &one);
    return 0;
}

#ifdef UP_TASK_CLOCK
// task_newtask(struct task_struct *task, unsigned long clone_flags): raw, as proc_tree's fork and
// exec, because a tracepoint's attachment is slow to close (probes/proc_tree.bpf.c, Hooks).
RAW_TRACEPOINT_PROBE(task_newtask) {
    u32 child = 0;
    if (bpf_probe_read_kernel(&child, sizeof(child), (void *)(ctx->args[0] + UP_PID_OFF)) != 0)
        return 0;
    return up_on_newtask(ctx->args[1], child);
}
#else
TRACEPOINT_PROBE(task, task_newtask) {
    return up_on_newtask(args->clone_flags, args->pid);
}
#endif

static inline void emit_mark(void *ctx, u32 kind) {
    u64 id = bpf_get_current_pid_tgid();
    if (!in_workload(id >> 32))
        return;
    struct mark_ev ev = {.tgid = id >> 32, .tid = (u32)id, .kind = kind, .ns = bpf_ktime_get_ns()};
    marks.perf_submit(ctx, &ev, sizeof(ev));
}

TRACEPOINT_PROBE(syscalls, sys_enter_getpgid) {
    if ((int)args->pid == MARK_MAGIC)   // the field is the raw 64-bit register: compare its low 32 bits
        emit_mark(args, KIND_STEP);
    return 0;
}

int on_ddp_step(struct pt_regs *ctx) {
    count_hit(LIB_TORCH, FN_DDP_STEP);
    emit_mark(ctx, KIND_DDP_STEP);
    return 0;
}

// The calling thread's CPU clock (see "CPU clock" above): {sum_exec_runtime, that + the time
// since exec_start in bpf_ktime_get_ns terms}; both 0 without BTF.
struct cpu_clock { u64 sum; u64 now; };

static inline struct cpu_clock thread_clock(u64 now) {
    struct cpu_clock c = {};
#ifdef UP_TASK_CLOCK
    u64 task = bpf_get_current_task(), start = 0;
    bpf_probe_read_kernel(&c.sum, sizeof(c.sum), (void *)(task + UP_RUNTIME_OFF));
    bpf_probe_read_kernel(&start, sizeof(start), (void *)(task + UP_EXEC_START_OFF));
    c.now = c.sum + now - start;  // + the CPU's task-clock offset, which cancels
#endif
    return c;
}

// Entry: remember when (and what) for this thread's call of `fn`, and start its on-CPU clock.
static inline int fly_begin(u32 fn, u64 bytes, u64 strm, u64 total_in) {
    u64 id = bpf_get_current_pid_tgid();
    if (!in_workload(id >> 32))
        return 0;
    u32 tid = (u32)id;
    u64 now = bpf_ktime_get_ns();
    struct cpu_clock c = thread_clock(now);
    struct fly_key key = {.tid = tid, .fn = fn};
    struct fly_val val = {.ts = now, .cpu0 = c.now, .sum0 = c.sum, .bytes = bytes, .strm = strm,
                          .total_in = total_in, .cpu = bpf_get_smp_processor_id()};
    if (inflight.update(&key, &val) != 0)
        up_count_lost(1);
    return 0;
}

// Return: take this thread's entry state; 0 when there is none (the entry came before attaching).
static inline int fly_end(u32 fn, struct fly_val *out) {
    u64 id = bpf_get_current_pid_tgid();
    struct fly_key key = {.tid = (u32)id, .fn = fn};
    struct fly_val *val = inflight.lookup(&key);
    if (!val)
        return 0;
    *out = *val;
    inflight.delete(&key);
    u64 now = bpf_ktime_get_ns();
    struct cpu_clock c = thread_clock(now);
    if (out->cpu == bpf_get_smp_processor_id())  // out->cpu0 becomes the call's on-CPU ns
        out->cpu0 = c.now > out->cpu0 ? c.now - out->cpu0 : 0;
    else
        out->cpu0 = c.sum > out->sum0 ? c.sum - out->sum0 : 0;
    if (out->cpu0 > now - out->ts)  // a thread runs at most the call's wall time (stale readings)
        out->cpu0 = now - out->ts;
    return 1;
}

// gloo::allreduce(const gloo::AllreduceOptions&): the options object starts with its
// detail::AllreduceOptionsImpl: shared_ptr context @0, timeout @16, algorithm @24, vector in @32,
// vector out @56, size_t elements @80, size_t elementSize @88 (gloo/allreduce.h). The payload is
// elements * elementSize; it is cross-checked against the first buffer's own size (UnboundBuffer:
// vptr @0, ptr @8, size @16), and a mismatch records 0 bytes and counts in up_lost[2].
struct ar_opts { u64 in_b, in_e, in_cap, out_b, out_e, out_cap, elements, esize; };  // @32..@96

int on_allreduce(struct pt_regs *ctx) {
    count_hit(LIB_TORCH, FN_ALLREDUCE);
    struct ar_opts o = {};
    u64 buf = 0, bsize = 0;
    bpf_probe_read_user(&o, sizeof(o), (void *)(PT_REGS_PARM1(ctx) + 32));
    u64 first = o.out_b != o.out_e ? o.out_b : o.in_b;   // no outputs: the inputs are reduced
    if (first)
        bpf_probe_read_user(&buf, 8, (void *)first);
    if (buf)
        bpf_probe_read_user(&bsize, 8, (void *)(buf + 16));
    u64 bytes = o.elements * o.esize;
    if (bytes == 0 || bytes != bsize) {
        up_count_lost(2);
        bytes = 0;
    }
    return fly_begin(FN_ALLREDUCE, bytes, 0, 0);
}

int on_allreduce_ret(struct pt_regs *ctx) {
    struct fly_val v = {};
    if (!fly_end(FN_ALLREDUCE, &v))
        return 0;
    u64 id = bpf_get_current_pid_tgid();
    struct coll_key key = {.tgid = id >> 32, .tid = (u32)id, .op = FN_ALLREDUCE};
    struct coll_val zero = {};
    struct coll_val *s = coll_stats.lookup_or_try_init(&key, &zero);
    if (!s) {
        up_count_lost(0);
        return 0;
    }
    __sync_fetch_and_add(&s->count, 1);
    __sync_fetch_and_add(&s->bytes, v.bytes);
    __sync_fetch_and_add(&s->ns, bpf_ktime_get_ns() - v.ts);
    return 0;
}

static inline void codec_add(u32 lib, u32 fn, u64 bytes, u64 ts, u64 cpu_ns) {
    struct codec_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .lib = lib, .fn = fn};
    struct codec_val zero = {};
    struct codec_val *s = codec_stats.lookup_or_try_init(&key, &zero);
    if (!s) {
        up_count_lost(0);
        return;
    }
    __sync_fetch_and_add(&s->calls, 1);
    __sync_fetch_and_add(&s->bytes, bytes);
    __sync_fetch_and_add(&s->ns, bpf_ktime_get_ns() - ts);
    __sync_fetch_and_add(&s->cpu_ns, cpu_ns);
}

// zlib inflate/deflate(z_streamp strm, int flush): z_stream is ABI-stable (zlib.h): next_in @0,
// avail_in @8, total_in @16. Bytes = input consumed by this call (total_in after - before).
static inline int z_begin(struct pt_regs *ctx, u32 lib, u32 fn) {
    count_hit(lib, fn);
    u64 strm = PT_REGS_PARM1(ctx), total_in = 0;
    bpf_probe_read_user(&total_in, 8, (void *)(strm + 16));
    return fly_begin(fn, 0, strm, total_in);
}

static inline int z_end(u32 lib, u32 fn) {
    struct fly_val v = {};
    if (!fly_end(fn, &v))
        return 0;
    u64 total_in = 0;
    bpf_probe_read_user(&total_in, 8, (void *)(v.strm + 16));
    codec_add(lib, fn, total_in >= v.total_in ? total_in - v.total_in : 0, v.ts, v.cpu0);
    return 0;
}

// EVP_EncryptUpdate/EVP_DecryptUpdate(ctx, out, outl, in, int inl). EVP_CipherUpdate tail-calls
// one of them, so it is counted through them. Calls with out == NULL feed GCM/CCM additional
// authenticated data: they cipher nothing and are not counted.
static inline int evp_begin(struct pt_regs *ctx, u32 lib, u32 fn) {
    count_hit(lib, fn);
    if (PT_REGS_PARM2(ctx) == 0)
        return 0;
    int inl = (int)PT_REGS_PARM5(ctx);
    return fly_begin(fn, inl > 0 ? inl : 0, 0, 0);
}

static inline int evp_end(u32 lib, u32 fn) {
    struct fly_val v = {};
    if (!fly_end(fn, &v))
        return 0;
    codec_add(lib, fn, v.bytes, v.ts, v.cpu0);
    return 0;
}

// One entry/return pair per (library, function): bcc 0.26 has no bpf cookie to tell them apart.
#define Z_PAIR(LIB, FN, NAME) \
    int NAME##_##LIB(struct pt_regs *ctx) { return z_begin(ctx, LIB, FN); } \
    int NAME##_ret_##LIB(struct pt_regs *ctx) { return z_end(LIB, FN); }
#define EVP_PAIR(LIB, FN, NAME) \
    int NAME##_##LIB(struct pt_regs *ctx) { return evp_begin(ctx, LIB, FN); } \
    int NAME##_ret_##LIB(struct pt_regs *ctx) { return evp_end(LIB, FN); }

// Library ids: keep in step with LIBS in dpuprof/record/drain/uprobes.py.
Z_PAIR(0, FN_INFLATE, on_inflate)
Z_PAIR(0, FN_DEFLATE, on_deflate)
EVP_PAIR(1, FN_ENCRYPT, on_encrypt)
EVP_PAIR(1, FN_DECRYPT, on_decrypt)
EVP_PAIR(2, FN_ENCRYPT, on_encrypt)
EVP_PAIR(2, FN_DECRYPT, on_decrypt)
