"""The GPU interpreter's data, checked without a GPU: op records, payload tables, final images, judging.

`cuda_ref.RefMachine` runs the records the kernels get, in one sequentially consistent order; every
protocol of the zoo and the plug-in example goes through it and the protocol's own Receiver.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from epfuzz.backends.cuda_judge import EntryView, judge
from epfuzz.backends.cuda_prog import (
    OP_ADD,
    OP_FENCE,
    OP_PFENCE,
    OP_SPIN,
    OP_TMA,
    OP_WRITE,
    PARAM_FIELDS,
    crc_at,
    crc_deltas,
    encode_programs,
    encode_prologue,
    final_images,
    kernel_source,
    payload_tables,
    tma_refusal,
    uses_tma,
    watch_shape,
)
from epfuzz.backends.cuda_ref import RefMachine, payload_chunk
from epfuzz.encoding import codec
from epfuzz.infra.errors import Unsupported
from epfuzz.ir import ops
from epfuzz.ir.payload import token_image
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol

#: built-ins the interpreter refuses, with the reason it must give (a stamp read inside a slot body; a
#: notify word in recv written by a plain WRITE, which the consumer's log does not copy; issue 30's
#: baseline and init-zeroing receivers, which store into the signal pad before the first epoch while the
#: interpreter starts from zeroed memory)
REFUSED = {"deep2_head_stamp": "inside the slot body", "deep2_head_stamp_fixed": "inside the slot body",
           "deep2_mid_stamp": "inside the slot body", "deep2_mid_stamp_fixed": "inside the slot body",
           "deep2_head_trailer": "inside the slot body", "deep2_head_trailer_fixed": "inside the slot body",
           **{f"deep2_{n}{f}": "inside the slot body" for n in ("seq_stride", "meta_qp", "cqe_packets")
              for f in ("", "_fixed")},
           "deep2_notify": "copies the cq and recv regions only", "deep2_notify_fixed": "copies the cq and recv",
           "signal_baseline": "stores before epoch 0", "signal_baseline_fixed": "stores before epoch 0",
           "init_zeroing": "stores before epoch 0", "init_zeroing_fixed": "stores before epoch 0",
           # issue 30's layers: no GPU form for an RDMA READ, nor for a copy-engine batch
           **{n: "RDMA READ has no GPU form" for n in ("read_flush_unfenced", "read_flush_unfenced_fixed",
                                                         "read_flush_other_qp", "read_flush_other_qp_fixed")},
           **{n: "copy-engine batches are not driven" for n in ("ce_batch_signal", "ce_batch_signal_fixed",
                                                                  "ce_signal_override", "ce_signal_override_fixed")},
           # issue 30's sender-side layer (epfuzz.model.source) and the stale-frontier quiet: sim only
           "stale_quiet": "stale frontier", "stale_quiet_fixed": "SrcClear is a GPU access to a send buffer",
           "source_no_flush": "SrcStore is a GPU access", "source_no_flush_fixed": "SrcStore is a GPU access",
           # issue 30's receiver cache layer (epfuzz.model.rxcache): an L2 that a NIC's writes bypass, sim only
           "stale_cache": "receive heap is mapped cached", "stale_cache_fixed": "receive heap is mapped uncached"}
NAMES = sorted(set(REGISTRY.items) - set(REFUSED)) + ["examples.seqflag:SeqFlag", "examples.seqflag:SeqFlagAtomic"]


def scn_for(name: str, channels: int = 2, tokens: int = 6, epochs: int = 1, **extra) -> Scenario:
    doc = {"protocol": name, "payload": {"num_tokens": tokens, "hidden_bytes": 96, "epochs": epochs},
           "topology": {"num_channels": channels}, "signal": {"interval": 2}, **extra}
    proto = get_protocol(name)
    for path in proto.fixed:
        section, field = path.split(".")
        doc.get(section, {}).pop(field, None)
    return codec.load_dict(doc)


def machine(name: str, **kw):
    scn = scn_for(name, **kw)
    proto = get_protocol(name)
    lay = proto.layout(scn)
    progs = encode_programs(proto, scn, lay)
    pro = encode_prologue(proto, scn, lay)
    npro = len(proto.epoch_prologue(scn, lay, 1))
    shape = watch_shape(lay, progs)
    crc0, deltas, _ = payload_tables(lay)
    rx = proto.receiver(scn, lay)
    m = RefMachine(lay, shape, progs, pro, npro, crc0, tuple(int(d) for d in deltas), poison=proto.poison,
                   reset=proto.reset_signals, data_watched=ops.DATA in rx.watch)
    return scn, proto, lay, progs, pro, npro, shape, m


def run_ref(name: str, epochs: int = 4, **kw):
    scn, proto, lay, progs, pro, npro, shape, m = machine(name, **kw)
    base, step = final_images(proto, lay, progs, pro, npro, shape)
    verdicts = []
    for e in range(epochs):
        entries = m.run_epoch(e)
        words = np.frombuffer(m.watched(), dtype=np.uint64)
        assert np.array_equal(words, base + step * np.uint64(e)), f"final image of epoch {e}"
        log = np.zeros((1, max(1, len(entries)), shape.entry_bytes), dtype=np.uint8)
        for k, ent in enumerate(entries):
            log[0, k, :ent.size] = ent
        verdicts.append(judge(proto, scn, lay, shape, log, [len(entries)], e))
    return verdicts


def test_param_fields_are_defined_for_the_kernel():
    src = kernel_source()
    for i, name in enumerate(PARAM_FIELDS):
        assert f"#define P_{name} {i}\n" in src
    used = {w for w in src.replace("(", " ").replace(")", " ").replace("]", " ").split() if w.startswith("P[P_")}
    assert {u[4:] for u in used} <= set(PARAM_FIELDS)


@pytest.mark.parametrize("epoch", [0, 1, 7, 65535, 123456789])
def test_trailer_crc_by_linearity_matches_the_payload(epoch):
    for tb in (32, 112, 14336 + 16):
        img = token_image(epoch, 0, 1, 5, tb)
        crc0 = np.frombuffer(token_image(0, 0, 1, 5, tb)[-16:], dtype="<u4")[3]
        assert crc_at(int(crc0), crc_deltas(tb - 16), epoch) == zlib.crc32(img[:-16])


def test_kernel_payload_formula_is_the_token_image():
    scn, proto, lay, *_ = machine("deepep_v2_dispatch_fixed", channels=3, tokens=7)
    crc0, deltas, _ = payload_tables(lay)
    for e in (0, 3, 1000):
        for c in range(3):
            for i in range(lay.tokens_in_channel[c]):
                off = lay.slot_offset(c, i)
                got = b"".join(payload_chunk(lay, crc0, tuple(int(d) for d in deltas), e, off + k).tobytes()
                               for k in range(0, lay.token_bytes, 16))
                assert got == token_image(e, 0, c, lay.token_of(c, i), lay.token_bytes)


def test_records_of_a_dispatch_sender():
    scn, proto, lay, progs, *_ = machine("flush_other_qp", channels=1, tokens=4)
    codes = [int(x) for x in progs[0, :, 0]]
    assert codes == [OP_WRITE, OP_WRITE, OP_FENCE, OP_ADD, OP_WRITE, OP_WRITE, OP_FENCE, OP_ADD, 0]


def test_tma_writes_and_the_proxy_fence_are_records_of_their_own():
    """tma_flag's data are TMA Writes (cp.async.bulk on sm_90), its fix adds the ProxyFence before the signal;
    a plain Flush stays OP_FENCE (a generic-proxy fence: the kernel orders no bulk store with it)."""
    codes = {}
    for name in ("tma_flag", "tma_flag_fixed"):
        scn, proto, lay, progs, *_ = machine(name, channels=2, tokens=4)
        codes[name] = [int(x) for x in progs[0, :, 0]]
        assert uses_tma(progs)
        first = progs[0, 0]
        assert (int(first[0]), int(first[2]), int(first[3])) == (OP_TMA, 0, lay.token_bytes)
    assert codes["tma_flag"] == [OP_TMA, OP_TMA, OP_ADD, 0]
    assert codes["tma_flag_fixed"] == [OP_TMA, OP_TMA, OP_PFENCE, OP_ADD, 0]
    assert OP_FENCE not in codes["tma_flag_fixed"]
    _, _, _, plain, *_ = machine("deepep_v2_dispatch_fixed")
    assert not uses_tma(plain)


def _function(src: str, signature: str) -> str:
    start = src.index(signature)
    depth = 0
    for k in range(src.index("{", start), len(src)):
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        if depth == 0:
            return src[start:k + 1]
    raise AssertionError(f"unbalanced braces after {signature}")


def test_a_flush_and_the_fence_before_a_signal_order_no_bulk_store():
    """tma_flag's bug must stay expressible: the interpreter's Flush (OP_FENCE) and the fence before each signal
    are generic-proxy fences, with no bulk-group wait or proxy fence in them; only ProxyFence has those."""
    src = kernel_source()
    for sig in ("void before_signal(", "void fence_kind("):
        body = _function(src, sig)
        assert "proxy" not in body and "wait_group" not in body and "tma" not in body, sig
    fence = _function(src, "void proxy_fence()")
    assert fence.index("cp.async.bulk.wait_group 0;") < fence.index("fence.proxy.async;")
    loop = _function(src, "__global__ void ip_producer(")
    assert "else if ((int)threadIdx.x == sig_tid) proxy_fence();" in loop  # OP_PFENCE, on the signal thread


def test_tma_ops_are_refused_below_sm_90_with_the_reason():
    assert tma_refusal(90) == tma_refusal(100) == ""
    why = tma_refusal(80, 1)
    assert "sm_90" in why and "GPU 1 is sm_80" in why and "\n" not in why


def test_epoch_dependent_values_become_base_and_step():
    scn, proto, lay, progs, *_ = machine("examples.seqflag:SeqFlag", channels=2, tokens=2)
    flag = progs[0, 1]
    assert (flag[4], flag[5]) == (1, 1)  # epoch + 1


def test_spins_are_ops_too():
    scn = scn_for("deepep_v2_dispatch", faults={"spins": [{"channel": 0, "before_op": 1, "ns": 500}]})
    proto = get_protocol("deepep_v2_dispatch")
    progs = encode_programs(proto, scn, proto.layout(scn))
    assert int(progs[0, 1, 0]) == OP_SPIN and int(progs[0, 1, 4]) == 500


def test_a_sender_that_is_not_affine_in_the_epoch_is_refused():
    from examples.seqflag import SeqFlag

    class Squares(SeqFlag):
        def flag(self, qp, c, epoch):
            return ops.WriteValue(qp, ops.SIGNAL, c * 8, epoch * epoch)

    p = Squares()
    scn = scn_for("examples.seqflag:SeqFlag")
    with pytest.raises(Unsupported, match="not affine"):
        encode_programs(p, scn, p.layout(scn))


@pytest.mark.parametrize("name", NAMES)
def test_every_protocol_encodes_and_its_final_image_is_reached(name):
    run_ref(name, epochs=3)  # asserts the final images inside


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_protocol_the_interpreter_cannot_judge_is_refused_with_its_reason(name):
    with pytest.raises(Unsupported, match=REFUSED[name]):
        machine(name)


#: the bad forms wrong in program order (no reordering needed); frozen_flag's stale colour is there from the
#: second epoch on (issue 30; tests/zoo/test_breadth_zoo.py's IN_ARRIVAL_ORDER says the same of the sim)
LOGIC_BUGS = {"stale_epoch_counter": {}, "geometry_index": {"channels": 3, "tokens": 9}, "shared_counter": {},
              "frozen_flag": {}}


@pytest.mark.parametrize("name", NAMES)
def test_in_program_order_only_logic_bugs_show(name):
    kw = LOGIC_BUGS.get(name, {})
    bad = sum(v.stale + v.hangs for v in run_ref(name, epochs=3, **kw))
    assert bool(bad) == (name in LOGIC_BUGS), name


def test_stale_epoch_counter_is_judged_from_the_second_epoch_with_poisoned_slots():
    v = run_ref("stale_epoch_counter", epochs=3)
    assert [x.stale for x in v] == [0, 1, 1]
    assert v[1].examples[0]["bad_chunks"][0][1] == "poisoned"


def test_entry_view_rebuilds_data_the_tag_receiver_reads():
    scn, proto, lay, progs, pro, npro, shape, m = machine("inband_tag_fixed", channels=1, tokens=2)
    entries = m.run_epoch(0)
    view = EntryView(lay, shape, 0, entries[-1])
    assert view.read(ops.DATA, 0, lay.token_bytes) == token_image(0, 0, 0, 0, lay.token_bytes)
    half = entries[0].copy()
    half[shape.words_bytes] = 0x01  # body poisoned, trailer landed: the tag shows, the checksum fails
    rx = proto.receiver(scn, lay)
    rx.start_epoch(0)
    bad_rx = get_protocol("inband_tag").receiver(scn, lay)
    bad_rx.start_epoch(0)
    accepted = bad_rx.poll(EntryView(lay, shape, 0, half), 0)
    assert accepted and accepted[0].offset == 0
    assert rx.poll(EntryView(lay, shape, 0, half), 0) == []
