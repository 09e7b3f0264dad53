// sock_io: socket payload bytes per process, protocol and direction.
//
// Purpose:  which processes move the bytes (e.g. the DDP ranks' all-reduce traffic per step).
// Maps:     sock_stats PERCPU_HASH (tgid, family, protocol, dir) -> {bytes, calls}, cumulative per
//                      CPU (user space sums the CPUs): no atomic add per call, and no cache line
//                      passed between the CPUs of a sender and a receiver; dir 0 = send, 1 = recv.
//           sock_lost  ARRAY [0] = calls not counted (sock_stats full)
// Hooks:    sock:sock_send_length, sock:sock_recv_length (Linux >= 6.3); inet sockets only (these
//           tracepoints fire for AF_INET/AF_INET6). Raw tracepoints (args: struct sock *sk, int
//           ret, int flags) when dpuprof/record/load/probes.py defines SOCK_IO_RAW_TP with the
//           running kernel's offsets from BTF: SOCK_COMMON_OFF (sock.__sk_common),
//           SOCK_FAMILY_OFF (sock_common.skc_family), SOCK_PROTOCOL_OFF (sock.sk_protocol); the
//           classic tracepoints fill a trace record for every call first, and are skipped while
//           another BPF program runs on the CPU. Else the classic tracepoints' fields.
// Overhead: per send/recv call: two kernel reads and one per-CPU hash update.
#include <uapi/linux/ptrace.h>

struct sock_key { u32 tgid; u16 family; u16 protocol; u32 dir; };
struct sock_val { u64 bytes; u64 calls; };

BPF_PERCPU_HASH(sock_stats, struct sock_key, struct sock_val, 8192);
BPF_ARRAY(sock_lost, u64, 1);     // [0] = calls not counted because sock_stats was full

static inline void sock_count(u16 family, u16 protocol, int ret, u32 dir) {
    if (ret <= 0)
        return;
    struct sock_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .family = family,
                           .protocol = protocol, .dir = dir};
    struct sock_val zero = {};
    struct sock_val *val = sock_stats.lookup_or_try_init(&key, &zero);
    if (val) {
        val->bytes += ret;  // this CPU's copy: no other writer
        val->calls += 1;
    } else {
        int zero = 0;
        u64 *lost = sock_lost.lookup(&zero);
        if (lost)
            __sync_fetch_and_add(lost, 1);
    }
}

#ifdef SOCK_IO_RAW_TP
static inline void sock_raw(u64 sk, int ret, u32 dir) {
    if (ret <= 0)
        return;  // before the reads: most failed calls are EAGAIN on a non-blocking socket
    u16 family = 0, protocol = 0;
    bpf_probe_read_kernel(&family, sizeof(family), (void *)(sk + SOCK_COMMON_OFF + SOCK_FAMILY_OFF));
    bpf_probe_read_kernel(&protocol, sizeof(protocol), (void *)(sk + SOCK_PROTOCOL_OFF));
    sock_count(family, protocol, ret, dir);
}

RAW_TRACEPOINT_PROBE(sock_send_length) {
    sock_raw(ctx->args[0], (int)ctx->args[1], 0);
    return 0;
}

RAW_TRACEPOINT_PROBE(sock_recv_length) {
    if ((int)ctx->args[2] & 2)   // MSG_PEEK: the bytes are read again later
        return 0;
    sock_raw(ctx->args[0], (int)ctx->args[1], 1);
    return 0;
}
#else
TRACEPOINT_PROBE(sock, sock_send_length) {
    sock_count(args->family, args->protocol, args->ret, 0);
    return 0;
}

TRACEPOINT_PROBE(sock, sock_recv_length) {
    if (args->flags & 2)   // MSG_PEEK: the bytes are read again later
        return 0;
    sock_count(args->family, args->protocol, args->ret, 1);
    return 0;
}
#endif
