"""Classification of real captured stacks (tests/data/captured_stacks.tsv) and of the rules' edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpuprof.categories import CATEGORIES, IDLE, top_level
from dpuprof.record.stacks.classify import Classifier, fold, split_folded, split_user_frame

DATA = Path(__file__).parent / "data" / "captured_stacks.tsv"


def _captured():
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            expected, source, folded = line.split("\t")
            yield pytest.param(expected, folded, id=f"{source}:{expected}:{folded[-40:]}")


@pytest.fixture(scope="module")
def clf():
    return Classifier()


@pytest.mark.parametrize("expected,folded", list(_captured()))
def test_captured_stack(clf, expected, folded):
    assert clf.classify_folded(folded) == expected


def test_captured_data_covers_every_infrastructure_category():
    subs = {line.split("\t")[0] for line in DATA.read_text().splitlines() if line and not line.startswith("#")}
    tops = {top_level(s) for s in subs}
    assert {"network", "storage", "crypto", "compression", "compute", "kernel_other", IDLE} <= tops


def test_leaf_most_rule_decides(clf):
    # _copy_to_iter has no rule of its own: the socket frame above it decides...
    tcp = ["do_syscall_64", "tcp_recvmsg", "skb_copy_datagram_iter", "_copy_to_iter"]
    assert clf.classify(tcp, []) == "network.tcpip"
    # ...and under a filesystem read it is storage.
    fs = ["do_syscall_64", "vfs_read", "ext4_file_read_iter", "filemap_read", "_copy_to_iter"]
    assert clf.classify(fs, []) == "storage.fs"
    # AES under kTLS is crypto: the crypto frame is leaf-most.
    ktls = ["do_syscall_64", "tcp_sendmsg", "tls_sw_sendmsg", "crypto_aead_encrypt", "aesni_gcm_enc_update"]
    assert clf.classify(ktls, []) == "crypto.kernel"


def test_kernel_time_is_never_compute(clf):
    assert clf.classify(["some_unknown_kernel_fn"], ["main (python3.11)"]) == "kernel_other.other"
    assert clf.classify(["do_syscall_64", "some_unknown_kernel_fn"], ["main (python3.11)"]) == "kernel_other.syscall"


def test_user_modules(clf):
    assert clf.classify([], ["[unknown] (libcrypto.so.3)"]) == "crypto.user"
    assert clf.classify([], ["_aesni_ctr32_ghash_6x (cryptography/hazmat/bindings/_rust.abi3.so)"]) == "crypto.user"
    assert clf.classify([], ["[unknown] (libzstd.so.1)"]) == "compression.user"
    assert clf.classify([], ["main (myapp)"]) == "compute.other"
    assert clf.classify([], []) == "compute.other"


def test_every_rule_names_a_known_category(clf):
    for rule in clf.rules:
        assert rule.subcategory == IDLE or top_level(rule.subcategory) in CATEGORIES


def test_fold_round_trip():
    k, u = ["entry_SYSCALL_64", "tcp_sendmsg"], ["main (app)", "send (libc.so.6)"]
    assert split_folded(fold(k, u)) == (k, u)
    # Either side empty, one frame, or a frame that is the empty string: the frames joined in order.
    for k, u in (([], []), (["a"], []), ([], ["x"]), ([""], ["x"]), (["a"], [""]), ([""], []), ([], [""])):
        assert fold(k, u) == ";".join([*u, *(f + "_[k]" for f in k)]), (k, u)
    assert split_user_frame("x (libz.so.1)") == ("x", "libz.so.1")
    assert split_user_frame("[unknown]") == ("[unknown]", None)
