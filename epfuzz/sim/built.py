"""A scenario's configuration built once, its schedule excluded (`Built`), and the packet arrival orders of
the net schedules met (`Arrived`): what `epfuzz.sim.engine` applies a schedule to and replays.

Split from the engine, which keeps the schedule's application, the form cache and the replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from epfuzz.core.native import mypyc_attr
from epfuzz.ir.opmake import insert_spins
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, Protocol
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.protocols.opcheck import check_programs
from epfuzz.sim.adversary import PassRule, QpStreams
from epfuzz.sim.memory import Starts
from epfuzz.sim.netmoves import apply_packet_overtakes
from epfuzz.sim.nvlink import is_nvlink, issue_order, pass_rule
from epfuzz.sim.packets import FlushWait, Packet, Tlp, Wr
from epfuzz.sim.pass_rules import packet_pass_rule
from epfuzz.sim.requester import Nic, post_and_send, repost
from epfuzz.sim.responder import respond

NET_WINDOW = 64  # packets adaptive routing may let one packet overtake

__all__ = ["ARRIVALS_PER_FORM", "NET_WINDOW", "Arrived", "Built", "build_form"]


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class Arrived:
    """One packet arrival order of a built form and what follows from it alone: the TLPs in root-complex
    arrival order, the adversary's pass rule over them, and (made on first use) the reorder window's
    QP streams. The net overtakes decide it, so a built form keeps one per net schedule it met."""

    __slots__ = ("packets", "pinv", "tlps", "rule", "_streams")

    def __init__(self, packets: list[Packet], pinv: list[tuple[Packet, Packet, str]], tlps: list[Tlp],
                 rule: PassRule) -> None:
        self.packets, self.pinv, self.tlps, self.rule = packets, pinv, tlps, rule
        self._streams: QpStreams | None = None

    def streams(self, window: int) -> QpStreams:
        s = self._streams
        if s is None or s.window != window:
            s = self._streams = QpStreams(self.tlps, window)
        return s


#: net schedules a built form keeps the arrivals of (the guided search mostly resamples PCIe moves)
ARRIVALS_PER_FORM = 8


class Built:
    """A scenario's configuration built once, its schedule excluded: layout, work requests, packets in
    send order, the Flush waits and the receiver's epoch prologues, plus the `Arrived` forms of the net
    schedules met so far. `build_over` applies a schedule to it; nothing in it changes afterwards (the
    adversary splits copies, replay only reads), so every `SimRun` built over it may share its lists.
    """

    __slots__ = ("proto", "layout", "wrs", "packets", "flushes", "prologue", "_arrived", "starts")

    def __init__(self, proto: Protocol, layout: Layout, wrs: list[Wr], packets: list[Packet],
                 flushes: list[FlushWait], prologue: dict[int, list[tuple[str, int, int, bool]]],
                 sizes: dict[str, int] | None = None) -> None:
        self.proto, self.layout, self.wrs, self.packets = proto, layout, wrs, packets
        self.flushes, self.prologue = flushes, prologue
        self._arrived: dict[tuple[tuple[int, int], ...], Arrived] = {}
        #: what receiver memory is set to at each epoch's start (`Memory.start_epoch`), made by the first run;
        #: `sizes` is the layout's region sizes where the build read them already
        self.starts = Starts(sizes)

    def arrived(self, scn: Scenario, net: tuple[tuple[int, int], ...]) -> Arrived:
        """The arrival order the (effective) net overtakes `net` make, built on first use."""
        a = self._arrived.get(net)
        if a is None:
            if len(self._arrived) >= ARRIVALS_PER_FORM:
                self._arrived.clear()
            a = self._arrived[net] = self.arrive(scn, list(net))
        return a

    def lean(self) -> Built:
        """A new form sharing this one's lists, with only its arrival order without net overtakes and no
        epoch-start images: what a search keeps beside a configuration's base run (which holds those
        lists already) costs no more memory than that run, and a copy of it handed back to the cache
        (`FormCache.put`) spares the next run of that configuration its build."""
        b = Built(self.proto, self.layout, self.wrs, self.packets, self.flushes, self.prologue, self.starts.sizes)
        a = self._arrived.get(())
        if a is not None:
            b._arrived[()] = a
        return b

    def arrive(self, scn: Scenario, net: list[tuple[int, int]],
               arrival: Callable[[list[Packet]], list[Packet]] | None = None) -> Arrived:
        pkts = self.packets
        arrivals: list[Packet] = pkts
        pinv: list[tuple[Packet, Packet, str]] = []
        if arrival is not None:
            arrivals = arrival(pkts)
        elif net:
            arrivals, pinv = apply_packet_overtakes(pkts, net, packet_pass_rule(True), NET_WINDOW)
        if is_nvlink(scn):  # GPU stores reach the peer in issue order, then the NVLink clauses apply
            arrivals = issue_order(arrivals, self.wrs)
        proto = self.proto
        tlps = respond(scn, arrivals, self.layout.max_signals, 0, proto.targets, self.prologue)
        return Arrived(arrivals, pinv, tlps, pass_rule(scn, arrivals, self.wrs))


def same_ops(new: Sequence[Sequence[object]], old: list[list[Any]]) -> bool:
    """Whether `new` holds the very op objects (or `OpRec`s) of `old`, channel by channel in the same order (ops
    are frozen, and so is a record once made: the same objects are the same ops)."""
    if len(new) != len(old):
        return False
    for c in range(len(old)):
        p, q = new[c], old[c]
        if len(p) != len(q):
            return False
        for i in range(len(q)):
            if p[i] is not q[i]:
                return False
    return True


def _post(scn: Scenario, proto: Protocol, lay: Layout, sizes: dict[str, int], programs: list[list[Any]], e: int,
          wr_base: int, psn: list[int], flushes: list[FlushWait], nic: Nic,
          recs: bool) -> tuple[list[Wr], list[Packet]]:
    """`post_and_send` of epoch `e`'s programs (`recs`: `OpRec`s), with the op check's error where it fails."""
    try:  # the requester checks each op against the layout as it reads its fields
        return post_and_send(scn, programs, e, wr_base, psn, flushes, nic)
    except Exception:  # noqa: BLE001 - the op check first, as when it ran before posting: it names the
        # first op outside the layout, in program order, whatever the requester met first (an OutsideLayout,
        # a compiled field's type check on a region that is no string, a plug-in op it cannot read: review)
        check_programs([[x.op() for x in p] for p in programs] if recs else programs, lay,
                       scn.protocol or proto.name or type(proto).__name__, e, sizes, proto.sender)
        raise


def build_form(scn: Scenario, proto: Protocol) -> Built:
    """The configuration's built form (no cache: `FormCache.get` keeps them)."""
    lay = proto.layout(scn)
    sizes = lay.sizes  # an interpreted property that makes a dict: read once, for the op check and the images
    psn = [0] * scn.topology.num_qps
    wrs: list[Wr] = []
    pkts: list[Packet] = []
    flushes: list[FlushWait] = []
    spins = scn.faults.spins
    nic = Nic(scn, sizes, lay.max_signals, lay.num_channels)  # the scenario's numbers the requester reads, once
    programs: list[list[Any]] = []
    # an exact DispatchProtocol (every built-in protocol) gives its ops as records the requester reads natively
    # (`OpRec`); any other sender, a plug-in's or a subclass's, gives its ops, and so does one whose `sender` was
    # set on the instance (a wrapper's or a test's monkeypatch: review2, its ops were bypassed unseen)
    recs = type(proto) is DispatchProtocol and "sender" not in getattr(proto, "__dict__", ())
    last: list[list[Any]] = []  # the records of the epoch before
    w: list[Wr] = []
    ps: list[Packet] = []
    f0 = 0  # where the epoch before's Flush waits start in `flushes`
    for e in range(scn.payload.epochs):
        ops = cast(DispatchProtocol, proto).sender_recs(scn, lay, e) if recs else proto.sender(scn, lay, e)
        if recs and e and same_ops(ops, last):  # the very records again (the dispatch family's memo), so the very
            # programs, spins and all: the epoch before's WRs and packets, shifted (`repost`)
            w, ps, fl = repost(w, ps, flushes[f0:], e, psn)
            f0 = len(flushes)
            flushes += fl
        else:
            # a later epoch whose sender made the very ops of the one before posts the same programs (no spins:
            # the programs are copies of those op lists); a built-in sender's fresh lists need no copy
            if not (e and not spins and same_ops(ops, programs)):
                programs = insert_spins(ops, spins, recs) if spins or not recs else ops  # `apply_spins`, compiled
            f0 = len(flushes)
            w, ps = _post(scn, proto, lay, sizes, programs, e, len(wrs), psn, flushes, nic, recs)
        last = ops
        wrs += w
        pkts += ps
    for i, p in enumerate(pkts):
        p.seq = i
    prologue = {e: proto.epoch_prologue(scn, lay, e) for e in range(scn.payload.epochs)}
    return Built(proto, lay, wrs, pkts, flushes, prologue, sizes)
