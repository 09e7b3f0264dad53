// net_dev: packets and bytes per network device and direction, and TCP retransmits.
//
// Purpose:  the network offload model's n (packets) and bytes moved, and a health signal.
// Maps:     net_stats   HASH (ifname, dir) -> {bytes, packets}, cumulative; dir 0 = tx, 1 = rx
//           tcp_retrans ARRAY [0] = cumulative TCP retransmits
//           net_lost    ARRAY [0] = packets not counted (net_stats full)
// Hooks:    net:net_dev_xmit (rc == 0 only), net:netif_receive_skb, tcp:tcp_retransmit_skb.
//           The two per-packet hooks are raw tracepoints when dpuprof/record/load/probes.py defines
//           NET_DEV_RAW_TP together with the running kernel's struct offsets, read from BTF
//           (dpuprof/record/load/btf.py; never from installed headers, whose layouts may be another
//           kernel's): NET_SKB_LEN_OFF (sk_buff.len), NET_SKB_DEV_OFF (sk_buff.dev),
//           NET_DEV_NAME_OFF (net_device.name). Raw args: net_dev_xmit (skb, rc, dev, skb_len),
//           netif_receive_skb (skb). Raw tracepoint programs are not skipped while another BPF
//           program runs on the CPU (classic ones are: bpf_prog_active, see probes/softirq.bpf.c).
//           Without BTF or raw tracepoints, the classic tracepoints' args are used.
// Overhead: one hash update per packet (per GRO/GSO segment, not per wire frame).
#include <uapi/linux/ptrace.h>

struct net_key { char dev[16]; u32 dir; };
struct net_val { u64 bytes; u64 packets; };

BPF_HASH(net_stats, struct net_key, struct net_val, 256);
BPF_ARRAY(tcp_retrans, u64, 1);
BPF_ARRAY(net_lost, u64, 1);      // [0] = packets not counted because net_stats was full

static inline void net_count(struct net_key *key, u32 len) {
    struct net_val zero = {};
    struct net_val *val = net_stats.lookup_or_try_init(key, &zero);
    if (val) {
        __sync_fetch_and_add(&val->bytes, len);
        __sync_fetch_and_add(&val->packets, 1);
    } else {
        int zero = 0;
        u64 *lost = net_lost.lookup(&zero);
        if (lost)
            __sync_fetch_and_add(lost, 1);
    }
}

#ifdef NET_DEV_RAW_TP
// The device name, read with the BTF offset; stops at NUL, so no garbage in the key.
static inline void net_dev_name(struct net_key *key, const void *dev) {
    bpf_probe_read_kernel_str(&key->dev, sizeof(key->dev), (const char *)dev + NET_DEV_NAME_OFF);
}

RAW_TRACEPOINT_PROBE(net_dev_xmit) {
    if ((int)ctx->args[1] != 0)
        return 0;
    struct net_key key = {.dir = 0};
    net_dev_name(&key, (const void *)ctx->args[2]);
    net_count(&key, (u32)ctx->args[3]);
    return 0;
}

RAW_TRACEPOINT_PROBE(netif_receive_skb) {
    const char *skb = (const char *)ctx->args[0];
    const void *dev = 0;
    u32 len = 0;
    bpf_probe_read_kernel(&dev, sizeof(dev), skb + NET_SKB_DEV_OFF);
    bpf_probe_read_kernel(&len, sizeof(len), skb + NET_SKB_LEN_OFF);
    struct net_key key = {.dir = 1};
    if (dev)
        net_dev_name(&key, dev);
    net_count(&key, len);
    return 0;
}
#else
TRACEPOINT_PROBE(net, net_dev_xmit) {
    if (args->rc != 0)
        return 0;
    struct net_key key = {.dir = 0};
    TP_DATA_LOC_READ_STR(&key.dev, name, sizeof(key.dev));  // stops at NUL: no garbage in the key
    net_count(&key, args->len);
    return 0;
}

TRACEPOINT_PROBE(net, netif_receive_skb) {
    struct net_key key = {.dir = 1};
    TP_DATA_LOC_READ_STR(&key.dev, name, sizeof(key.dev));  // stops at NUL: no garbage in the key
    net_count(&key, args->len);
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
