// sock_io: socket payload bytes per process, protocol and direction.
//
// Purpose:  which processes move the bytes (e.g. the DDP ranks' all-reduce traffic per step), with
//           their send/receive calls and UDP. Opt-in (--probes default,sock_io): by default the TCP
//           sockets' own counters give the bytes (sock_diag: dpuprof/record/drain/sockdiag.py),
//           with no program per call; only calls and UDP need this probe.
// Maps:     sock_stats HASH (tgid, family, protocol, dir) -> {bytes, calls}, cumulative;
//           dir 0 = send, 1 = recv.
//           sock_lost  ARRAY [0] = calls not counted (sock_stats full)
// Hooks:    tracepoints sock:sock_send_length, sock:sock_recv_length (Linux >= 6.3); inet
//           sockets only (these tracepoints fire for AF_INET/AF_INET6).
// Overhead: one hash update per send/recv call. Measured (benchmarks/hot_loads.py,
//           benchmarks/HOT_LOADS.md at 90d4d3a: 2026-12-05 13:05, 2-vCPU VM, BPF statistics on), iperf3 flood:
//           recv 84 ns x 34,934/s, send 152 ns x 18,607/s (0.57 % of a core; with --light the
//           largest BPF cost left: per-socket counters from sock_diag would replace it). Raw tracepoints with a per-CPU
//           hash measured slower (256 and 375 ns): a per-CPU hash lookup is a helper call.
//           Those are the BPF statistics: the program's time only, not the trace record the kernel
//           builds for a classic tracepoint before it runs. From the caller's side
//           (benchmarks/sock_call_cost.py --rounds 5, 2026-12-05 23:01, UDP send + receive over
//           loopback) the two programs cost a call pair 512 ns in all (446-611 over 5 rounds; 3,196
//           ns a pair without sock_io), where bpf_stats shows 121 + 200 ns on an iperf3 flood. Raw
//           tracepoints reading family and protocol from the socket saved 52 ns of it (8 %; 5
//           interleaved pairs): not worth a second version of the probe.
#include <uapi/linux/ptrace.h>

struct sock_key { u32 tgid; u16 family; u16 protocol; u32 dir; };
struct sock_val { u64 bytes; u64 calls; };

BPF_HASH(sock_stats, struct sock_key, struct sock_val, 8192);
BPF_ARRAY(sock_lost, u64, 1);     // [0] = calls not counted because sock_stats was full

static inline void sock_count(u16 family, u16 protocol, int ret, u32 dir) {
    if (ret <= 0)
        return;
    struct sock_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .family = family,
                           .protocol = protocol, .dir = dir};
    struct sock_val zero = {};
    struct sock_val *val = sock_stats.lookup_or_try_init(&key, &zero);
    if (val) {
        __sync_fetch_and_add(&val->bytes, ret);
        __sync_fetch_and_add(&val->calls, 1);
    } else {
        int zero = 0;
        u64 *lost = sock_lost.lookup(&zero);
        if (lost)
            __sync_fetch_and_add(lost, 1);
    }
}

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
