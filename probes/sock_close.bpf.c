// sock_close: each TCP socket's final payload bytes when it closes, and which process closed it.
//
// Purpose:  the recorder reads TCP bytes per process from the sockets' own counters once per
//           interval (sock_diag: dpuprof/record/drain/sockdiag.py). A socket that closes loses what
//           it moved since the last read, and a connection that lived between two reads is never
//           read at all (a loader's HTTP fetch, a short-lived helper's). This probe keeps each
//           socket's counters at its close, and who closed it, for the next drain. It runs per
//           state change of a TCP connection (about six in a connection's life), never per packet
//           or per call.
// Maps:     sock_closer  LRU_HASH socket address -> tgid of the process that closed it: the
//                        transitions ESTABLISHED -> FIN_WAIT1 and CLOSE_WAIT -> LAST_ACK, made
//                        only by close(2), shutdown(2) or exit of a holder of the socket (8192)
//           sock_final   HASH {cookie, tgid} -> {bytes_acked, bytes_received} at the change to
//                        TCP_CLOSE (the socket is done: tcp_done, or the change to TIME_WAIT). The
//                        cookie is the one sock_diag reports (sk_cookie; the kernel makes it when
//                        first asked): 0 for a socket sock_diag never listed, whose bytes are
//                        summed per closer. tgid 0 where no close(2) was seen (a reset). Emptied
//                        by each drain. (8192)
//           sock_close_lost ARRAY [0] = closes not kept (sock_final full)
//           sock_opened  ARRAY [0] = connections established on the host (each change to
//                        ESTABLISHED): while it stays, sockdiag.py looks the known sockets up
//                        one by one instead of dumping the whole hash table
// Hooks:    raw tracepoint inet_sock_set_state (args: const struct sock *sk, int oldstate, int
//           newstate). Reads at offsets from the running kernel's BTF
//           (dpuprof/record/load/btf.py), defined by dpuprof/record/load/probes.py with
//           SOCK_CLOSE_RAW: SC_PROTOCOL_OFF (sock.sk_protocol, 2 bytes), SC_COOKIE_OFF
//           (sock.__sk_common.skc_cookie), SC_ACKED_OFF and SC_RECEIVED_OFF (tcp_sock.bytes_acked,
//           bytes_received). Without them the probe is unavailable.
// Overhead: one protocol read per state change; an array add at a change to ESTABLISHED; a map
//           update at the close(2) transition and two
//           map operations and three reads at TCP_CLOSE. Measured from the caller's side
//           (sudo python3 benchmarks/sock_call_cost.py --rounds 5 --connections, 2026-12-06, 2-vCPU
//           VM: connect, accept, 1 KiB each way and close, in one thread over loopback): 1,158 ns
//           a connection (388-1,783 over 5 rounds; a connection's life is 66 us there), so 1 %
//           of a core at ~9,000 connections a second. Nothing per packet or socket call. On the
//           loads of benchmarks/HOT_LOADS.md at abaff7e (2026-12-06, BPF statistics on) it ran 0.5 times a
//           second at 147 ns (iperf3: its two connections' state changes).
#include <uapi/linux/ptrace.h>
#ifndef SOCK_CLOSE_RAW
#error "sock_close needs raw tracepoints and the kernel's BTF (sock and tcp_sock offsets)"
#endif

#define SC_TCP 6             // IPPROTO_TCP
#define SC_ESTABLISHED 1     // enum tcp state (include/net/tcp_states.h): a stable uapi-visible ABI
#define SC_FIN_WAIT1 4
#define SC_CLOSE 7
#define SC_CLOSE_WAIT 8
#define SC_LAST_ACK 9

struct sc_key { u64 cookie; u32 tgid; u32 pad; };  // explicit pad: hashed keys must be fully set
struct sc_val { u64 acked; u64 received; };

BPF_TABLE("lru_hash", u64, u32, sock_closer, 8192);
BPF_HASH(sock_final, struct sc_key, struct sc_val, 8192);
BPF_ARRAY(sock_close_lost, u64, 1);
BPF_ARRAY(sock_opened, u64, 1);  // [0]: TCP connections established on the host (see Maps)

RAW_TRACEPOINT_PROBE(inet_sock_set_state) {
    const char *sk = (const char *)ctx->args[0];
    int oldstate = (int)ctx->args[1], newstate = (int)ctx->args[2];
    u16 proto = 0;
    bpf_probe_read_kernel(&proto, sizeof(proto), sk + SC_PROTOCOL_OFF);
    if (proto != SC_TCP)
        return 0;
    u64 addr = (u64)sk;
    if (newstate == SC_ESTABLISHED) {
        int zero = 0;
        u64 *opened = sock_opened.lookup(&zero);
        if (opened)
            __sync_fetch_and_add(opened, 1);
        return 0;
    }
    if ((oldstate == SC_ESTABLISHED && newstate == SC_FIN_WAIT1) ||
        (oldstate == SC_CLOSE_WAIT && newstate == SC_LAST_ACK)) {
        u32 tgid = bpf_get_current_pid_tgid() >> 32;
        sock_closer.update(&addr, &tgid);
        return 0;
    }
    if (newstate != SC_CLOSE)
        return 0;
    struct sc_val val = {};
    bpf_probe_read_kernel(&val.acked, sizeof(val.acked), sk + SC_ACKED_OFF);
    bpf_probe_read_kernel(&val.received, sizeof(val.received), sk + SC_RECEIVED_OFF);
    u32 *closer = sock_closer.lookup(&addr);
    struct sc_key key = {.tgid = closer ? *closer : 0};
    if (closer)
        sock_closer.delete(&addr);
    if (val.acked <= 1 && val.received == 0)
        return 0;  // no payload: a failed connect, a closed listener (a SYN counts as one byte acked)
    bpf_probe_read_kernel(&key.cookie, sizeof(key.cookie), sk + SC_COOKIE_OFF);
    struct sc_val *sum = sock_final.lookup(&key);
    if (sum && key.cookie == 0) {  // never listed by sock_diag: summed per closer
        __sync_fetch_and_add(&sum->acked, val.acked);
        __sync_fetch_and_add(&sum->received, val.received);
    } else if (sock_final.update(&key, &val) != 0) {
        int zero = 0;
        u64 *lost = sock_close_lost.lookup(&zero);
        if (lost)
            __sync_fetch_and_add(lost, 1);
    }
    return 0;
}
