"""GPU posting, requester NIC, port and network: from sender ops to packets with arrival times.

Time is in integer nanoseconds; everything here is a pure function of the scenario (same scenario, same packets).

- GPU side: each channel posts its ops in program order; posting costs POST_NS, Spin adds its length,
  Flush waits for the local completion of the WRs posted before it on its QP: the ACK (or atomic response)
  of the last one, back only after its packet left the port queue and crossed the wire
  (`epfuzz.model.ordering.COMPLETION_CLAUSES`). Channels run concurrently; the global post order is by time,
  then channel. The GPU's accesses to the send buffer mark what the NIC read stale (`sender_side`).
- Requester NIC (`epfuzz.sim.sendq`): one send queue per QP, processed in order. A WRITE becomes
  ceil(len/MTU) packets paced at the (throttled) QP rate; IBV_SEND_FENCE delays a WR until the QP's earlier
  ATOMICs and READs have completed, their responses back (IB: fence orders after prior READ/ATOMIC only, never
  after WRITEs; `Packet.fence_read`, `epfuzz.model.rdma_read`). QPs are unordered.
- Port: packets of all QPs leave through one port in ready-time order, at the (throttled) port rate.
- Network: fixed latency plus per-QP and per-port added delay; in order per QP, except that with adaptive
  routing the schedule may move packets earlier (`epfuzz.sim.adversary`, `sim.pass_rules.packet_pass_rule`).
"""

from __future__ import annotations

import bisect
from typing import Any, Final, cast

from epfuzz.ir import ops
from epfuzz.ir.opmake import OpRec
from epfuzz.ir.scenario import Scenario
from epfuzz.model.source import SrcEvent
from epfuzz.protocols.opcheck import require_fits
from epfuzz.sim import packets as pk
from epfuzz.sim.nvlink import is_nvlink
from epfuzz.sim.packets import FlushWait, Packet, Wr, op_kind
from epfuzz.sim.port import port_and_wire
from epfuzz.sim.sender_side import gpu_op, mark_stale
from epfuzz.sim.sendq import BASE_LATENCY_NS, NEVER, Nic, SendQueues, read_op

__all__ = ["BASE_LATENCY_NS", "POST_NS", "Nic", "SendQueues", "post_and_send"]

POST_NS: Final = 20          # one ibv_post_send from a GPU thread (doorbell batched)
_UNSET: Final = -2           # `frontier` of a channel and QP before the channel's first WR there (WR ids are >= -1)
bisect_right: Final = bisect.bisect_right

#: the completion clause a Flush waits by, per the waited WR's op class (IB-ack for the others); Final, as the
#: names below: a C static of the compiled core, not a module-dict lookup per use
_FLUSH_CLAUSE: Final[dict[type, str]] = {ops.AtomicAdd: "IB-atomic-response", ops.Read: "IB-read-response"}


_GpuOp = ops.SrcStore | ops.SrcFlush | ops.SrcClear | ops.ProxyFence


def _flush_clause(r: OpRec) -> str:
    """The completion clause a Flush waits by for the WR of op `r`: `_FLUSH_CLAUSE` by the op's exact class (a
    built-in sender's record whose op is not made yet is of its kind's exact class)."""
    o = r._op
    if o is not None:
        return _FLUSH_CLAUSE.get(type(o), "IB-ack")
    return "IB-atomic-response" if r.kind == pk.K_ATOMIC else "IB-read-response" if r.kind == pk.K_READ else "IB-ack"


def _earliest(at: list[int]) -> int:
    """The channel whose next op is the earliest (ties: the lowest channel), or -1 when none is ready."""
    best, when = -1, NEVER
    for c in range(len(at)):
        if at[c] < when:
            best, when = c, at[c]
    return best


def _record(item: object, c: int, max_signals: int, num_channels: int, sizes: dict[str, int] | None) -> OpRec:
    """The record of channel `c`'s next op `item` (an op, or an `OpRec` wrapping one): its fields read in the order
    the requester always read them, a GPU op or one of no known class checked against the layout first
    (`SendQueues.start` checks the rest)."""
    op: Any = item.op() if isinstance(item, OpRec) else item
    kind = op_kind(op)
    if (kind == pk.K_GPU or kind == pk.K_OTHER) and sizes is not None:
        require_fits(op, c, max_signals, num_channels, sizes)
    return read_op(op, kind)


def post_and_send(scn: Scenario, programs: list[list[Any]], epoch: int, wr_base: int, psn: list[int],
                  flushes: list[FlushWait] | None = None, nic: Nic | None = None) -> tuple[list[Wr], list[Packet]]:
    """GPU posting and requester NIC: WRs with times, packets in arrival order with times.

    `programs`: per channel, its ops, or `OpRec`s of them (a built-in sender's, `DispatchProtocol.sender_recs`).
    The next op is the earliest channel's (ties: the lowest channel), by each channel's next op and time (`at`,
    `nxt`: a heap of tuples cost a generic call and a tuple per op, issue 31). A Flush parks its channel until
    every WR posted on its QP before it has completed (`SendQueues`); each Flush's wait goes to `flushes`. `nic`:
    the scenario's numbers read once per build; with the layout's, `OutsideLayout` for an op outside it (`opcheck`).
    """
    sq = SendQueues(scn, epoch, wr_base, psn, nic)
    nq = len(sq.free)
    sizes, max_signals, num_channels = sq.sizes, sq.max_signals, sq.num_channels
    at = [0 if prog else NEVER for prog in programs]  # per channel: when its next op posts (NEVER: not ready)
    nxt = [0] * len(programs)  # per channel: its next op's index
    parked: list[tuple[int, int, FlushWait]] = []  # (channel, op index, the Flush's record)
    after = [-1] * len(programs)  # per channel: the READ its last Flush waited for (IB-read-response)
    acked = [pk.NO_ACKS] * len(programs)  # per channel and QP: the last WR its Flushes waited for (IB-ack)
    # channel * QPs + QP -> the QP's last WR before the channel's first on it (_UNSET: none yet; a list, not a dict)
    frontier = [_UNSET] * (len(programs) * nq)
    src: list[SrcEvent] = []                   # the GPU's accesses to the send buffer (`epfuzz.model.source`)
    while True:
        if parked or sq.stalled:  # a decision waits for the port: depart what is decided by now
            _settle(sq, at, nxt, parked, programs)
        c = _earliest(at)
        if c < 0:
            break
        t, idx = at[c], nxt[c]
        prog = programs[c]
        r = prog[idx]  # a built-in sender's record (`DispatchProtocol.sender_recs`), else a plug-in's op read now
        r = r if isinstance(r, OpRec) and r.kind >= 0 else _record(r, c, max_signals, num_channels, sizes)
        kind = r.kind
        if kind == pk.K_SPIN:
            t += r.value
        elif kind == pk.K_FLUSH:
            q = r.qp % nq
            f = FlushWait()
            # quiet-stale-frontier: a stale quiet drains to the QP's post index before the channel's own first WR
            upto = frontier[c * nq + q] if r.flag else _UNSET
            if upto == _UNSET:
                upto = sq.last_wr[q]
            f.epoch, f.channel, f.op_index, f.qp, f.at, f.done, f.wr = epoch, c, idx, q, t, t, upto
            f.clause = "quiet-stale-frontier" if r.flag else ""
            if flushes is not None:
                flushes.append(f)
            if f.wr >= 0:  # wait (IB-flush-qp: for this QP only); `_settle` resumes the channel
                f.clause = f.clause or _flush_clause(sq.wrs[f.wr - wr_base].rec)
                # the QP's latest READ it waited for (IB-sq-order); a stale quiet waits for fewer WRs than
                # were posted, so not the QP's latest READ (review: it marked later WRs behind an unwaited READ)
                i = bisect_right(sq.reads[q], f.wr) if sq.reads else 0  # (no list before the epoch's first READ)
                after[c] = sq.reads[q][i - 1] if i else after[c]
                # every packet of the QP's WRs up to f.wr has arrived once it resumes: its later packets come
                # after them (a new list: the packets posted before share the old one)
                acked[c] = pk.with_acked(acked[c], nq, q, f.wr)
                parked.append((c, idx, f))
                at[c] = NEVER
                continue
        elif kind == pk.K_GPU:  # the GPU's own accesses: the send buffer (`sender_side`), proxy fences
            gpu_op(cast(_GpuOp, r.op()), c, idx, t, src, sq.wrs)
            t += POST_NS
        else:
            q = r.qp % nq
            if frontier[c * nq + q] == _UNSET:
                frontier[c * nq + q] = sq.last_wr[q]
            sq.post(r, c, idx, q, t, after[c], acked[c])
            t += POST_NS
        if idx + 1 < len(prog):
            at[c], nxt[c] = t, idx + 1
        else:
            at[c] = NEVER
    pkts = port_and_wire(sq.queues, sq.port_rate_div, sq.lat)
    for p in pkts:
        if p.last:
            sq.wrs[p.wr - wr_base].done = p.arrive + sq.lat[p.qp]
    if src and not is_nvlink(scn):  # under `nvlink` the payload is the GPU's own stores: no DMA read
        mark_stale(sq.wrs, wr_base, pkts, src)
    return sq.wrs, pkts


def _settle(sq: SendQueues, at: list[int], nxt: list[int], parked: list[tuple[int, int, FlushWait]],
            programs: list[list[Any]]) -> None:
    """Decide what the port has decided before the next post: start fenced WRs, resume parked Flushes.

    Every packet made later is ready after the next event's time, and after the bound of each
    pending fence or Flush (`SendQueues.bound`), so the port departs up to the least of them;
    a resumed Flush or a started WR may move that point, hence the loop.
    """
    nq = len(sq.waiting)  # 0 until a WR first waited
    while True:
        horizon = at[e] if (e := _earliest(at)) >= 0 else NEVER  # the next post's time
        for q in range(nq):
            if sq.waiting[q]:
                horizon = min(horizon, sq.bound(q))
        for _, _, f in parked:
            horizon = min(horizon, sq.bound(f.qp, f.wr))
        sq.the_port().advance(horizon)
        changed = False
        for q in range(nq):
            if sq.waiting[q] and sq.pump(q):
                changed = True
        still: list[tuple[int, int, FlushWait]] = []
        for c, idx, f in parked:
            if not sq.flush_ready(f.wr):
                still.append((c, idx, f))
                continue
            f.done = max(f.at, sq.completion(f.wr))
            if idx + 1 < len(programs[c]):
                at[c], nxt[c] = f.done, idx + 1
            changed = True
        parked[:] = still
        if not changed:
            return


def _shifted(acked: list[int], nw: int) -> list[int]:
    """`acked` (a WR's or packet's) of the epoch after, its WR ids `nw` later (-1 and `NO_ACKS` stay)."""
    if not acked:
        return acked
    return [a + nw if a >= 0 else a for a in acked]


def repost(wrs: list[Wr], pkts: list[Packet], flushes: list[FlushWait], epoch: int,
           psn: list[int]) -> tuple[list[Wr], list[Packet], list[FlushWait]]:
    """What `post_and_send` gives for `epoch` where its programs are the very records of the epoch before, which
    gave `wrs`, `pkts` (arrival order) and `flushes`: the same, shifted. Each epoch posts from idle send queues at
    time 0 and reads nothing of an earlier one but the PSNs, so every time, order and choice repeats; a WR id (a
    WR's, its READs' and acked WRs', a packet's, a Flush's) is `len(wrs)` later, a PSN later by its QP's packets
    of the epoch before, and `psn` moves on as posting moves it (tests/sim/test_oprec_build.py holds it to
    `post_and_send`). A third of a fresh dispatch scenario's epochs are such repeats (issue 31)."""
    nw = len(wrs)
    d = [0] * len(psn)
    for p in pkts:
        d[p.qp] = d[p.qp] + 1
    out_w: list[Wr] = []
    for w in wrs:
        x = Wr()
        x.id, x.epoch, x.channel, x.op_index, x.rec, x.qp = w.id + nw, epoch, w.channel, w.op_index, w.rec, w.qp
        x.post, x.start, x.done, x.proxy_fence = w.post, w.start, w.done, w.proxy_fence
        x.after = w.after + nw if w.after >= 0 else w.after
        x.fence_read = w.fence_read + nw if w.fence_read >= 0 else w.fence_read
        x.acked = _shifted(w.acked, nw)
        out_w.append(x)
    out_p: list[Packet] = []
    old: list[int] = pk.NO_ACKS
    new: list[int] = pk.NO_ACKS
    for p in pkts:
        y = Packet()
        y.seq, y.epoch, y.channel, y.wr, y.qp, y.kind = -1, epoch, p.channel, p.wr + nw, p.qp, p.kind
        y.psn = p.psn + d[p.qp]
        y.region, y.off, y.length, y.value, y.last, y.cq_slot = p.region, p.off, p.length, p.value, p.last, p.cq_slot
        y.ready, y.depart, y.arrive, y.op_index, y.batch = p.ready, p.depart, p.arrive, p.op_index, p.batch
        y.after = p.after + nw if p.after >= 0 else p.after
        y.fence_read = p.fence_read + nw if p.fence_read >= 0 else p.fence_read
        if p.acked is not old:  # packets share their WR's list: one new list per old one met in a row
            old, new = p.acked, _shifted(p.acked, nw)
        y.acked, y.stale, y.strong = new, p.stale, p.strong
        out_p.append(y)
    out_f: list[FlushWait] = []
    for f in flushes:
        g = FlushWait()
        g.epoch, g.channel, g.op_index, g.qp, g.at, g.done = epoch, f.channel, f.op_index, f.qp, f.at, f.done
        g.clause = f.clause
        g.wr = f.wr + nw if f.wr >= 0 else f.wr
        out_f.append(g)
    for q in range(len(psn)):
        psn[q] = psn[q] + d[q]
    return out_w, out_p, out_f
