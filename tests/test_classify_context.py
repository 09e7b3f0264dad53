"""Context rules, thread rules, causes and --rules files (docs/taxonomy.md).

Real stacks come from tests/data/context_stacks.tsv (captured from iperf3, fio and an AES-GCM
decrypt loop); the rest are unit tests of one rule each on frames seen on this kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import dpuprof
from dpuprof.errors import UserError
from dpuprof.record.stacks.classify import Classifier

DATA = Path(__file__).parent / "data" / "context_stacks.tsv"
SEND = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_write", "vfs_write", "sock_write_iter",
        "tcp_sendmsg", "tcp_sendmsg_locked"]


def _captured():
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            sub, cause, source, folded = line.split("\t")
            yield pytest.param(sub, cause, folded, id=f"{source}:{sub}:{cause}:{folded[-40:]}")


@pytest.fixture(scope="module")
def clf():
    return Classifier()


@pytest.mark.parametrize("sub,cause,folded", list(_captured()))
def test_captured_context_stack(clf, sub, cause, folded):
    got = clf.explain_folded(folded)
    assert (got.subcategory, got.cause) == (sub, cause)


def test_captured_data_covers_the_context_rules():
    subs = {line.split("\t")[0] for line in DATA.read_text().splitlines() if line and not line.startswith("#")}
    assert {"network.mm", "network.sched", "storage.syscall", "storage.mm", "kernel_other.mm"} <= subs


def test_mm_and_wakeups_under_a_network_frame_are_network(clf):
    alloc = [*SEND, "sk_page_frag_refill", "skb_page_frag_refill", "alloc_pages_noprof", "get_page_from_freelist"]
    assert clf.classify(alloc, []) == "network.mm"
    wake = [*SEND, "tcp_write_xmit", "sk_stream_write_space", "__wake_up", "try_to_wake_up"]
    assert clf.classify(wake, []) == "network.sched"
    # epoll wake-up on packet arrival: an IPC frame under tcp_v4_rcv
    epoll = ["net_rx_action", "tcp_v4_rcv", "sock_def_readable", "ep_poll_callback", "__wake_up_common"]
    assert clf.classify(epoll, []) == "network.sched"
    # a unix socket is IPC, not network, although the generic socket layer sits above it
    unix = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_socket", "__sys_socket",
            "__sock_create", "unix_create", "unix_create1", "kmem_cache_alloc_noprof"]
    assert clf.classify(unix, []) == "kernel_other.mm"
    assert clf.classify(unix[:-1], []) == "kernel_other.ipc"
    # the same allocation outside any network or storage frame stays kernel_other
    assert clf.classify(["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault", "alloc_pages_mpol"], []) \
        == "kernel_other.mm"


def test_mm_under_storage_is_storage(clf):
    bio = ["do_syscall_64", "__x64_sys_pread64", "vfs_read", "ext4_file_read_iter", "iomap_dio_rw",
           "__iomap_dio_rw", "iomap_dio_bio_iter", "bio_alloc_bioset", "mempool_alloc_noprof",
           "kmem_cache_alloc_noprof"]
    assert clf.classify(bio, []) == "storage.mm"


def test_interrupt_and_softirq_entry_end_the_context(clf):
    # An RCU callback in a softirq run from tcp_sendmsg's bh-enable is not network work...
    rcu = [*SEND, "__local_bh_enable_ip", "do_softirq.part.0", "handle_softirqs", "rcu_core", "kfree"]
    assert clf.classify(rcu, []) == "kernel_other.mm"
    # ...but the softirq's own network frames still give its allocations network context.
    rx = [*SEND, "__local_bh_enable_ip", "do_softirq.part.0", "handle_softirqs", "net_rx_action",
          "tcp_v4_rcv", "kmem_cache_alloc_node_noprof"]
    assert clf.classify(rx, []) == "network.mm"
    timer = [*SEND, "asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "hrtimer_interrupt"]
    assert clf.classify(timer, []) == "kernel_other.sched"


def test_the_leaf_most_infrastructure_rule_still_wins(clf):
    ktls = [*SEND, "tls_sw_sendmsg", "crypto_aead_encrypt", "aesni_gcm_enc_update"]
    assert clf.classify(ktls, []) == "crypto.kernel"


def test_syscall_entry_exit_takes_the_wrapper_category(clf):
    entry = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64"]
    assert clf.classify(entry, ["main (fio)", "pread64 (libc.so.6)"]) == "storage.syscall"
    assert clf.classify(entry, ["__send (libc.so.6)"]) == "network.syscall"
    exit_ = [*entry, "exit_to_user_mode_loop", "schedule", "__schedule", "finish_task_switch.isra.0"]
    assert clf.classify(exit_, ["pread64 (libc.so.6)"]) == "storage.sched"
    # write(2) serves files, pipes and sockets alike: the wrapper names no category
    assert clf.classify(entry, ["__GI_write (libc.so.6)"]) == "kernel_other.syscall"
    # a page fault is not a system call, whatever the user frame
    assert clf.classify(["asm_exc_page_fault", "exc_page_fault"], ["pread64 (libc.so.6)"]) == "kernel_other.mm"
    # a named syscall's own body
    body = [*entry, "__x64_sys_pread64", "vfs_read", "rw_verify_area"]
    assert clf.classify(body, []) == "storage.syscall"
    assert clf.classify([*entry, "__x64_sys_recvfrom", "__sys_recvfrom", "sockfd_lookup_light"], []) \
        == "network.syscall"
    assert clf.classify([*entry, "__x64_sys_pselect6", "do_pselect.constprop.0"], []) == "kernel_other.syscall"


def test_collective_threads_are_network(clf):
    # gloo inside libtorch_cpu.so is labelled by module only: the thread decides
    user = ["[unknown]", "[unresolved] (torch/lib/libtorch_cpu.so)"]
    assert clf.classify([], user) == "compute.torch"
    assert clf.classify([], user, comm="gloo_tcp_loop") == "network.collective"
    assert clf.classify([], user, comm="pt_gloo_runloop") == "network.collective"
    assert clf.classify([], user, comm="NCCL Progress 0") == "network.collective"
    assert clf.classify([], user, comm="python3") == "compute.torch"
    epoll = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_epoll_wait", "do_epoll_wait",
             "ep_poll", "schedule_hrtimeout_range"]
    # gloo's event loop waiting in epoll_wait (IPC elsewhere) is the transport's work
    assert clf.classify(epoll, ["epoll_wait (libc.so.6)"], comm="gloo_tcp_loop") == "network.collective"
    assert clf.classify(epoll, ["epoll_wait (libc.so.6)"], comm="python3") == "kernel_other.ipc"
    fault = ["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"]
    assert clf.classify(fault, user, comm="gloo_tcp_loop") == "network.mm"
    assert clf.classify(["some_unknown_kernel_fn"], user, comm="gloo_tcp_loop") == "network.collective"
    # infrastructure work in such a thread keeps its own category
    assert clf.classify([*SEND, "tcp_write_xmit"], user, comm="gloo_tcp_loop") == "network.tcpip"
    assert clf.classify([], ["[unknown] (libz.so.1)"], comm="pt_gloo_runloop") == "compression.user"
    assert clf.thread_rule("gloo_tcp_loop") == "network.collective" and clf.thread_rule("python3") is None


def test_collective_frames_transport_vs_reduction(clf):
    lib = "libgloo.so"
    assert clf.classify([], [f"gloo::transport::tcp::Pair::handleReadWrite(int) ({lib})",
                             "memcpy (libc.so.6)"]) == "network.collective"
    red = "void gloo::sum<float>(void*, void const*, void const*, unsigned long)"
    assert clf.classify([], [f"gloo::AllreduceRing<float>::run() ({lib})", f"{red} ({lib})"]) == "compute.reduction"
    # the reduction arithmetic stays compute even in a collective thread
    assert clf.classify([], [f"{red} ({lib})"], comm="pt_gloo_runloop") == "compute.reduction"
    assert clf.classify([], [f"gloo::AllreduceRing<float>::run() ({lib})"]) == "compute.torch"


def test_cause_of_kernel_work(clf):
    fault = ["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault", "do_anonymous_page", "clear_page_erms"]
    got = clf.explain(fault, ["[unknown] (libpython3.11.so.1.0)", "ossl_aes_gcm_decrypt (libcrypto.so.3)",
                              "__memmove_avx_unaligned_erms (libc.so.6)"])
    assert (got.subcategory, got.cause) == ("kernel_other.mm", "crypto")
    assert clf.explain(fault, ["inflate (libz.so.1)"]).cause == "compression"
    assert clf.explain(fault, ["x (libpython3.11.so.1.0)", "_PyObject_Malloc (libpython3.11.so.1.0)"]).cause \
        == "python-alloc"
    assert clf.explain(fault, ["x (libpython3.11.so.1.0)"]).cause == "python"
    assert clf.explain(fault, ["main (myapp)"]).cause == ""
    # user-mode samples carry no cause: their category already says what they are
    assert clf.explain([], ["[unknown] (libcrypto.so.3)"]).cause == ""
    # an interrupt is not work done for the code it interrupted
    irq = ["asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "__irq_exit_rcu", "handle_softirqs"]
    assert clf.explain(irq, ["[unknown] (libcrypto.so.3)"]).cause == ""


def _write(tmp_path, text) -> Path:
    path = tmp_path / "my.toml"
    path.write_text(text)
    return path


def test_user_rules_extend_and_override(tmp_path):
    path = _write(tmp_path, '[[rule]]\nsubcategory = "crypto.user"\ncause = "mycrypto"\nuser = ["my_cipher*"]\n'
                            '[[rule]]\nsubcategory = "network.tcpip"\nkernel = ["alloc_pages_mpol"]\n'
                            '[[thread]]\nsubcategory = "network.collective"\ncomm = ["my_io_thr"]\n'
                            'overrides = ["compute.*"]\n')
    base, clf = Classifier(), Classifier(extra=path)
    assert base.classify([], ["my_cipher_block (app)"]) == "compute.other"
    assert clf.classify([], ["my_cipher_block (app)"]) == "crypto.user"
    assert clf.explain(["exc_page_fault"], ["my_cipher_block (app)"]).cause == "mycrypto"
    assert base.classify(["alloc_pages_mpol"], []) == "kernel_other.mm"
    assert clf.classify(["alloc_pages_mpol"], []) == "network.tcpip"  # user rules come first
    assert clf.classify([], ["main (app)"], comm="my_io_thr") == "network.collective"
    assert clf.classify(["tcp_sendmsg"], []) == "network.tcpip"  # the built-in rules still apply
    assert clf.digest != base.digest


@pytest.mark.parametrize("text,needle", [
    ("[[rule]\n", "not valid TOML"),
    ('[[rule]]\nsubcategory = "gpu.kernels"\nkernel = ["x"]\n', "gpu.kernels"),
    ('[[rule]]\nsubcategory = "network.tcpip"\n', "no kernel, module or user"),
    ('[[rule]]\nsubcategory = "network.tcpip"\nkernal = ["x"]\n', "unknown key 'kernal'"),
    ('[[rule]]\nsubcategory = "network.tcpip"\nkernel = "tcp_*"\n', "list of non-empty strings"),
    ('[[rules]]\nsubcategory = "network.tcpip"\nkernel = ["x"]\n', "unknown table 'rules'"),
    ('[[context]]\nleaf = ["kernel_other.mm"]\nunder = ["gpu"]\nsuffix = "mm"\n', "'gpu'"),
    ("rule = 3\n", "array of tables"),
])
def test_bad_rule_file_is_one_clear_error(tmp_path, text, needle):
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as err:
        Classifier(extra=path)
    assert needle in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_record_rules_bad_file_exits_2_with_one_line(tmp_path):
    bad = _write(tmp_path, '[[rule]]\nsubcategory = "nope.x"\nkernel = ["x"]\n')
    for path, why in ((bad, "'nope.x' is not a known category"), (tmp_path / "missing.toml", "cannot read it")):
        proc = dpuprof("record", "--rules", str(path), "-o", str(tmp_path / "x.rec"), "--", "true")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr
        assert lines[0].startswith(f"dpuprof: error: --rules {path}: ") and why in lines[0], lines
        assert not (tmp_path / "x.rec").exists()
