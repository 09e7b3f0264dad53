// net_dev: packets and bytes per network device and direction, and TCP retransmits.
//
// Purpose:  the network offload model's n (packets) and bytes moved, and a health signal.
// Maps:     net_slots   PERCPU_ARRAY [slot * 2 + dir] -> {ifname, bytes, packets}, cumulative;
//                       dir 0 = tx, 1 = rx. The slot is a hash of the device name (NET_SLOTS of
//                       them), probed linearly NET_PROBES times on a collision with another
//                       name; user space sums the CPUs and names each slot by its stored name.
//                       Per-CPU: no atomic add and no hash-map update per packet (a shared hash
//                       keyed by the name was 215 ns a packet, and every CPU's adds to one
//                       device's counters fought over its cache line).
//           tcp_retrans ARRAY [0] = cumulative TCP retransmits
//           net_lost    ARRAY [0] = packets not counted (every probed slot held another name)
// Hooks:    net:net_dev_xmit (rc == 0 only), net:netif_receive_skb, tcp:tcp_retransmit_skb.
//           The two per-packet hooks are raw tracepoints when dpuprof/record/load/probes.py defines
//           NET_DEV_RAW_TP together with the running kernel's struct offsets, read from BTF
//           (dpuprof/record/load/btf.py; never from installed headers, whose layouts may be another
//           kernel's): NET_SKB_LEN_OFF (sk_buff.len), NET_SKB_DEV_OFF (sk_buff.dev),
//           NET_DEV_NAME_OFF (net_device.name). Raw args: net_dev_xmit (skb, rc, dev, skb_len),
//           netif_receive_skb (skb). Raw tracepoint programs are not skipped while another BPF
//           program runs on the CPU (classic ones are: bpf_prog_active, see probes/softirq.bpf.c).
//           Without BTF or raw tracepoints, the classic tracepoints' args are used.
// Overhead: per packet (per GRO/GSO segment, not per wire frame): two or three kernel reads, one
//           per-CPU array update. Measured (benchmarks/hot_loads.py, benchmarks/HOT_LOADS.md: 2026-12-02, 2-vCPU VM, BPF statistics on), iperf3 flood,
//           81,215 packets/s each way: net_dev_xmit 200 ns, netif_receive_skb 211 ns (the shared
//           hash before: 280 and 319 ns); 2026-12-04: 60 / 64 ns x 67,762/s each way. Opt-in
//           (--probes ...,net_dev): /proc/PID/net/dev counts the same per device at no cost per
//           packet (record/drain/netdev.py).
#include <uapi/linux/ptrace.h>

#define NET_SLOTS 128   // a power of two: device names hashed into as many slots per direction
#define NET_PROBES 4    // slots tried after a collision with another name

struct net_slot { u64 name[2]; u64 bytes; u64 packets; };  // name: IFNAMSIZ bytes, NUL-padded

BPF_PERCPU_ARRAY(net_slots, struct net_slot, NET_SLOTS * 2);
BPF_ARRAY(tcp_retrans, u64, 1);
BPF_ARRAY(net_lost, u64, 1);      // [0] = packets not counted: no free slot for their device

static inline void net_count(const u64 *name, u32 dir, u32 len) {
    u64 h = (name[0] ^ (name[1] * 0x9E3779B97F4A7C15ULL)) * 0x9E3779B97F4A7C15ULL;
    u32 slot = h >> 57;  // the top 7 bits: NET_SLOTS = 128
#pragma unroll
    for (int i = 0; i < NET_PROBES; i++) {
        u32 idx = (((slot + i) & (NET_SLOTS - 1)) << 1) | dir;
        struct net_slot *s = net_slots.lookup(&idx);
        if (!s)
            return;
        if (s->name[0] == 0 && s->name[1] == 0) {  // first packet of this device on this CPU
            s->name[0] = name[0];
            s->name[1] = name[1];
        } else if (s->name[0] != name[0] || s->name[1] != name[1]) {
            continue;
        }
        s->bytes += len;
        s->packets += 1;
        return;
    }
    int zero = 0;
    u64 *lost = net_lost.lookup(&zero);
    if (lost)
        __sync_fetch_and_add(lost, 1);
}

#ifdef NET_DEV_RAW_TP
// The device name, read with the BTF offset (a fixed-size read: name is char[IFNAMSIZ], and the
// kernel keeps it NUL-padded).
static inline void net_dev_name(u64 *name, const void *dev) {
    bpf_probe_read_kernel(name, 16, (const char *)dev + NET_DEV_NAME_OFF);
}

RAW_TRACEPOINT_PROBE(net_dev_xmit) {
    if ((int)ctx->args[1] != 0)
        return 0;
    u64 name[2] = {};
    net_dev_name(name, (const void *)ctx->args[2]);
    net_count(name, 0, (u32)ctx->args[3]);
    return 0;
}

RAW_TRACEPOINT_PROBE(netif_receive_skb) {
    const char *skb = (const char *)ctx->args[0];
    const void *dev = 0;
    u32 len = 0;
    bpf_probe_read_kernel(&dev, sizeof(dev), skb + NET_SKB_DEV_OFF);
    bpf_probe_read_kernel(&len, sizeof(len), skb + NET_SKB_LEN_OFF);
    u64 name[2] = {};
    if (dev)
        net_dev_name(name, dev);
    net_count(name, 1, len);
    return 0;
}
#else
TRACEPOINT_PROBE(net, net_dev_xmit) {
    if (args->rc != 0)
        return 0;
    u64 name[2] = {};
    TP_DATA_LOC_READ_STR(name, name, 16);  // stops at NUL: the rest stays zero
    net_count(name, 0, args->len);
    return 0;
}

TRACEPOINT_PROBE(net, netif_receive_skb) {
    u64 name[2] = {};
    TP_DATA_LOC_READ_STR(name, name, 16);
    net_count(name, 1, args->len);
    return 0;
}
#endif

TRACEPOINT_PROBE(tcp, tcp_retransmit_skb) {
    int zero = 0;
    u64 *v = tcp_retrans.lookup(&zero);
    if (v)
        __sync_fetch_and_add(v, 1);
    return 0;
}
