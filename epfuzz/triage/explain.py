"""Explain a finding in RDMA and PCIe terms: the timeline, the rule cell behind each
overtake, the stale bytes, and which knobs make it disappear.

The knob analysis flips one knob at a time and asks the exhaustive explorer
whether *any* allowed order still accepts an unfinished buffer (falling back to
the same schedule when the scenario is too large to enumerate), so "safe" means
safe for every schedule of this scenario, not just the one that was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epfuzz.infra.errors import InputError
from epfuzz.ir.fields import IntField
from epfuzz.ir.presets import model_of
from epfuzz.ir.scenario import Scenario, iter_leaf_fields
from epfuzz.model.device import DEVICE_CLAUSES, RO_ONLY_MODEL, mr_relaxed
from epfuzz.model.ordering import TlpType
from epfuzz.model.rxcache import LINE, RX_CLAUSES
from epfuzz.model.source import SOURCE_CLAUSES
from epfuzz.protocols.base import Protocol
from epfuzz.sim.engine import SimRun, simulate
from epfuzz.sim.packets import FlushWait, PacketKind, Tlp, TlpAction
from epfuzz.triage.findings import KIND_MEANING

#: what explain calls a knob (the dotted path is shown beside it)
LABELS = {
    "knobs.mr_relaxed": "MR registered relaxed",
    "knobs.nic_relaxed_ordering": "NIC sets RO",
    "knobs.atomic_mode": "PCI atomic mode",
    "knobs.hca_o920": "HCA enforces o9-20",
    "signal.fence": "fence on the signal",
    "signal.other_qp": "signal on another QP",
    "signal.kind": "signal kind",
    "knobs.adaptive_routing": "adaptive routing",
    "knobs.ido": "IDO",
}

PK_NAMES = {PacketKind.WRITE: "RDMA WRITE", PacketKind.VALUE: "RDMA WRITE (flag)",
            PacketKind.ATOMIC: "FETCH_AND_ADD", PacketKind.IMM: "WRITE_WITH_IMM", PacketKind.SEND: "SEND",
            PacketKind.READ: "RDMA READ"}


def tlp_name(t: Tlp) -> str:
    a = t.attrs
    if a.type == TlpType.NP_DATA:
        base = "AtomicOp"
    elif t.action == TlpAction.READ:
        base = "MemRd"
    elif t.action == TlpAction.FETCH:
        base = "MemRd(RDMA READ)"
    elif t.action == TlpAction.CQE:
        base = "MemWr(CQE)"
    elif t.action == TlpAction.ADD:
        base = "MemWr(RMW)"
    else:
        base = "MemWr"
    flags = [f for f, on in (("RO", a.ro), ("IDO", a.ido)) if on]
    return f"{base}({','.join(flags)})" if flags else base


def describe(t: Tlp, run: SimRun) -> str:
    what = f"{t.region} bytes {t.off}-{t.off + t.length - 1}"
    if t.region == "data":
        lay = run.layout
        first, last = t.off // lay.token_bytes, (t.off + t.length - 1) // lay.token_bytes
        toks = sorted({lay.token_of(s // lay.slots_per_channel, s % lay.slots_per_channel)
                       for s in range(first, last + 1)})
        what = f"token {toks[0]}" if len(toks) == 1 else f"tokens {toks}"
        what += f", bytes {t.off}-{t.off + t.length - 1}"
    return what


@dataclass
class Explanation:
    run: SimRun
    overtakes: list[str]
    knobs_needed: list[str]
    knobs_irrelevant: list[str]
    method: str
    lines: list[str] = field(default_factory=list)

    @property
    def rule_cells(self) -> set[str]:
        return {r for _, _, r in self.run.tlp_inversions}

    def text(self) -> str:
        return "\n".join(self.lines)


def explain(scn: Scenario, proto: Protocol) -> Explanation:
    run = simulate(scn, proto)
    if run.violation is None:
        raise InputError(f"scenario {scn.digest()} is clean on sim: nothing to explain")
    v = run.violation
    L: list[str] = [f"finding: {v.summary()}", f"kind: {v.kind}: {KIND_MEANING.get(v.kind, '')}".rstrip(": "),
                    "", "timeline"]
    # each epoch's times count from its own start: with several, each gets a heading (an author's trial read
    # epoch 1's t=0 right after epoch 0's t=622 as one timeline going back in time)
    several = scn.payload.epochs > 1
    for epoch in sorted({w.epoch for w in run.wrs} | {p.epoch for p in run.packets} | {f.epoch for f in run.flushes}):
        if several:
            L.append(f"  epoch {epoch} (times from the epoch's start)")
        L += _timeline(run, epoch)
    L.append("  PCIe visibility order (position: TLP)")
    pos = 0
    # an accept at an epoch's start (trigger -1) follows no TLP: the receiver's first look
    polls = (f"    receiver looks as epoch {v.epoch} starts, before any of its TLPs, and accepts {v.what}"
             if v.trigger == -1 else f"    receiver polls here and accepts {v.what}")
    if v.kind == "stale-accept" and v.position == 0:
        L.append(polls)
    overtakers = {id(a) for a, _, _ in run.tlp_inversions}
    epoch = -1
    for t in run.order:
        if several and t.epoch != epoch:
            epoch = t.epoch
            L.append(f"    epoch {epoch}")
        mark = "  <== overtook" if id(t) in overtakers else ""
        overwrote = v.kind == "overwritten-while-read" and t.seq <= v.trigger < t.seq + t.n
        if overwrote:
            mark += f"  <== lands in {v.what} while the receiver still reads what it accepted in epoch {v.epoch}"
        n = f"{t.n} TLPs" if t.n > 1 else "TLP"
        L.append(f"    {pos:>4}: {n} {t.seq}{'-' + str(t.seq + t.n - 1) if t.n > 1 else ''} "
                 f"{tlp_name(t)} QP {t.qp}, {describe(t, run)}{mark}")
        pos += t.n
        if v.kind == "stale-accept" and pos == v.position:
            L.append(polls)
            break
        if overwrote:
            break
    overtakes = overtake_lines(run)
    L.append("")
    L.append("overtakes")
    L += [f"  {o}" for o in overtakes] or [f"  none: {no_overtake_reason(run)}"]
    if v.kind in ("stale-accept", "overwritten-while-read"):
        L.append("")
        shown = min(8, len(v.bad_chunks))
        count = v.stale_chunks or len(v.bad_chunks)
        L.append(f"{'stale' if v.kind == 'stale-accept' else 'overwritten'} bytes: {v.bad_bytes} in {count} chunk(s) "
                 f"of {v.what}"
                 + (f" (the first {shown} shown):" if count > shown else ":"))
        for off, cls in v.bad_chunks[:shown]:
            L.append(f"  {v.region}+{off}: {cls}")
    needed, irrelevant, unused, method = _needs_lines(scn, proto, run, L)
    return Explanation(run, overtakes, needed, irrelevant, method, L)


def _timeline(run: SimRun, epoch: int) -> list[str]:
    """One epoch's WR posts and Flush waits by time, then its packets in arrival order."""
    posts = [((w.post, 0), f"  t={w.post:>6} ns  channel {w.channel} posts WR {w.id} {type(w.op).__name__} "
              f"on QP {w.qp}" + (" [fence]" if getattr(w.op, "fence", False) else ""))
             for w in run.wrs if w.epoch == epoch]
    posts += [((f.at, 1), flush_line(f)) for f in run.flushes if f.epoch == epoch]
    out = [line for _, line in sorted(posts, key=lambda x: x[0])]
    # packets in arrival order; one that adaptive routing moved ahead keeps the time of its in-order
    # arrival (the model orders, it does not re-time), so the line says whom it passed instead of
    # standing before an earlier time unexplained (a user trial read t=622 listed before t=602)
    passed: dict[int, list[int]] = {}
    for a, b, _ in run.packet_inversions:
        passed.setdefault(id(a), []).append(b.seq)
    for p in run.packets:
        if p.epoch != epoch:
            continue
        ahead = passed.get(id(p))
        at, when = f"t={p.arrive:>6} ns", f"arrives (sent {p.depart} ns)"
        if ahead:
            at = "ahead (AR) "  # the width of the times beside it
            when = (f"arrives ahead of packet{'s' if len(ahead) > 1 else ''} {', '.join(map(str, sorted(ahead)))} "
                    f"by adaptive routing (in order it would arrive at t={p.arrive} ns; sent {p.depart} ns)")
        out.append(f"  {at}  packet {p.seq}: QP {p.qp} PSN {p.psn} {PK_NAMES[p.kind]} "
                   f"{_bytes(p.region, p.off, p.length)} {when}")
    return out


def _bytes(region: str, off: int, length: int) -> str:
    """A packet's bytes as `REGION bytes A-B`; a zero-length packet (a WRITE_WITH_IMM with no data) writes
    none: "data bytes 0-0" read as one byte written (an author's trial)."""
    return f"{region} bytes {off}-{off + length - 1}" if length > 0 else "with no data (zero-length)"


def flush_line(f: FlushWait) -> str:
    """A Flush in the timeline, with the completion clause (`epfuzz.model.ordering.COMPLETION_CLAUSES`) it waited by."""
    head = f"  t={f.at:>6} ns  channel {f.channel} Flush QP {f.qp}"
    if f.clause == "quiet-stale-frontier":
        head += " (quiet-stale-frontier: drains only to the post index before the channel's own WRs)"
        if f.wr < 0:
            return head + ": no wait"
        return head + f": waits for WR {f.wr} only, resumes t={f.done} ns"
    if f.wr < 0:
        return head + ": nothing posted on it, no wait"
    return head + f": waits for WR {f.wr} ({f.clause}: local completion), resumes t={f.done} ns"


def _flushed(run: SimRun) -> dict[int, FlushWait]:
    """WR id -> the first Flush that waited for it (every WR of the QP up to the awaited one, IB-sq-order)."""
    out: dict[int, FlushWait] = {}
    for f in run.flushes:
        for w in run.wrs:
            if w.epoch == f.epoch and w.qp == f.qp and w.id <= f.wr:
                out.setdefault(w.id, f)
    return out


def overtake_lines(run: SimRun) -> list[str]:
    """One line per pass the trace used ("CELL: ..."), TLPs then packets: the cells `run` reports.
    A pass of a flushed WR's TLP across QPs says so: the Flush was local completion only."""
    flushed = _flushed(run)
    chan = {w.id: w.channel for w in run.wrs}

    ro_only = _ro_only_key(run)

    def note(a: Tlp, b: Tlp, r: str) -> str:
        if ro_only and a.attrs.ro:
            return f" ({ro_only})"
        f = flushed.get(b.wr)
        if r != "xQP" or f is None:
            return ""
        if b.attrs.type != TlpType.POSTED:  # a READ's or an ATOMIC's execution: its response needed it
            return (f" (WR {b.wr} was flushed by channel {f.channel} at t={f.done} ns, but WR {a.wr} of channel "
                    f"{chan.get(a.wr, '?')} was not posted behind that wait: IB-atomic-executed and "
                    "IB-read-response order only what the waiting channel posts after it)")
        return (f" (WR {b.wr} was flushed by channel {f.channel} at t={f.done} ns: IB-local-only, the responder "
                "had its bytes, not memory)")

    out = [f"{r}: {tlp_name(a)} of {describe(a, run)} passed {tlp_name(b)} of {describe(b, run)}{note(a, b, r)}"
           for a, b, r in run.tlp_inversions]
    out += [f"{r}: packet {a.seq} (QP {a.qp} PSN {a.psn}) arrived before packet {b.seq} (QP {b.qp} PSN {b.psn})"
            for a, b, r in run.packet_inversions]
    return out + source_lines(run) + cache_lines(run)


def _ro_only_key(run: SimRun) -> str:
    """The device clause behind an RO TLP of an MR the protocol asked strict (`epfuzz.model.device`), or ""."""
    scn = run.scenario
    ro_only = model_of(scn.preset) == RO_ONLY_MODEL
    _, clause = mr_relaxed(scn.knobs.mr_relaxed, ro_only)
    if clause != "RO-only-key":
        return ""
    return f"RO-only-key: the MR was asked strict, the device registered it relaxed; {DEVICE_CLAUSES[clause].source}"


SOURCE_SHOWN = 8  # stale-source packets named one by one in `overtakes`


def source_lines(run: SimRun) -> list[str]:
    """One line per packet whose bytes the NIC's DMA read took from a send buffer not (or no longer) holding the
    payload: the sender-side clause (`epfuzz.model.source.SOURCE_CLAUSES`) that let it, the reorder of the
    source before the read."""
    out: list[str] = []
    stale = [p for p in run.packets if p.stale]
    for p in stale[:SOURCE_SHOWN]:
        clause = SOURCE_CLAUSES[p.stale]
        out.append(f"{p.stale}: the NIC read packet {p.seq} (QP {p.qp} PSN {p.psn}, {p.region} bytes {p.off}-"
                   f"{p.off + p.length - 1}) from channel {p.channel}'s send buffer at t={p.ready} ns: "
                   f"{clause.rule} ({clause.source}); it carried zeros")
    if len(stale) > SOURCE_SHOWN:
        out.append(f"... and {len(stale) - SOURCE_SHOWN} more packet(s) read from the send buffer so "
                   f"({', '.join(sorted({p.stale for p in stale[SOURCE_SHOWN:]}))})")
    return out


def cache_lines(run: SimRun) -> list[str]:
    """One line per L2 line of the receiver's cache (`epfuzz.model.rxcache`) that served the accepted read
    bytes other than memory held: the receiver-side clause and the epoch whose read filled the line."""
    v = run.violation
    if v is None or v.extra.get("rx_cache") != "RX-stale-line":
        return []
    clause = RX_CLAUSES["RX-stale-line"]
    return [f"RX-stale-line: the receiver read {v.region} bytes {off}-{off + LINE - 1} from an L2 line its read in "
            f"epoch {filled} filled; {clause.rule} ({clause.source})" for off, filled in v.extra["rx_lines"]]


def no_overtake_reason(run: SimRun) -> str:
    """Without overtakes the order is the one posted: across QPs that is timing, on one QP the program."""
    qps = {w.qp for w in run.wrs}
    if len(qps) > 1:
        return "arrival order alone exposes it (timing across QPs)"
    return "the order the protocol posts in exposes it, on one QP, with no reordering"


def _fence_posted(run: SimRun) -> bool:
    return any(getattr(w.op, "fence", False) for w in run.wrs)


def _label(path: str, value: object) -> str:
    return f"{LABELS[path]} ({path}={value})" if path in LABELS else f"{path}={value}"


def _needs_lines(scn: Scenario, proto: Protocol, run: SimRun,
                 L: list[str]) -> tuple[list[str], list[str], list[str], str]:
    """What the finding needs, field by field (`epfuzz.triage.cause.needs`, the analysis the bug
    table's root cause reads too): (knobs needed, knobs that do not matter, signal fields the
    protocol does not follow, check method), written to `L`.

    A `signal.*` field is the protocol's to follow: a plug-in may fence its own signal whatever
    `signal.fence` says, so a value that leaves the posted ops unchanged is reported as not
    followed, never as "does not matter" (issue 18.7)."""
    from epfuzz.backends import get_backend
    from epfuzz.backends.base import SIGNATURE_FIELDS
    from epfuzz.triage.cause import needs

    kind = run.violation.kind if run.violation else None
    # the default knobs too: a plug-in's signature leaves out the signal fields it does not follow,
    # which explain names as such (the root cause, from the signature alone, agrees on the rest)
    fields = tuple(dict.fromkeys(SIGNATURE_FIELDS + get_backend("sim").signature_fields(proto)))
    got = needs(scn, proto, kind, fields)
    specs = dict(iter_leaf_fields())
    needed = [_label(n.path, n.value) + (f", pinned by the {n.pinned}" if n.pinned else "")
              + (f": not with {', '.join(map(_value, n.without))}" if isinstance(specs[n.path], IntField)
                 or n.path.startswith("gpu.") else "")
              for n in got.knobs]  # a count: which fewer kill it (some more may keep it); a gpu knob: which values
    irrelevant = [_label(p, scn.get_path(p)) for p in got.irrelevant]
    unused = [f"{p}={scn.get_path(p)}: the same ops either way"
              + (" (it posts fenced WRs itself)" if p == "signal.fence" and _fence_posted(run) else "")
              for p in got.unfollowed]
    L.append("")
    L.append(f"knobs without which the finding disappears ({got.method} check):")
    L += [f"  {k}" for k in needed] or ["  none: no other value of a knob makes it safe"]
    shape = [f"  {n.path}={_value(n.value)}: not with {', '.join(map(_value, n.without))}" for n in got.shape]
    if shape:
        L.append("the shape it needs (with any simpler value tried, no allowed order shows it):")
        L += shape
    if irrelevant:
        L.append("knobs that do not matter here:")
        L += [f"  {k}" for k in irrelevant]
    if got.untried:
        L.append("knobs no other value of which makes a scenario this protocol runs (neither needed nor not):")
        L += [f"  {_label(p, scn.get_path(p))}" for p in got.untried]
    if got.plumbing:
        L.append(f"knobs the {scn.preset} preset pins only to keep the NIC stages from reordering (not asked: "
                 "another value is no NVLink platform):")
        L += [f"  {_label(p, scn.get_path(p))}" for p in got.plumbing]
    if unused:
        L.append("scenario fields this protocol's ops do not follow:")
        L += [f"  {k}" for k in unused]
    return needed, irrelevant, unused, got.method


def _value(v: object) -> str:
    """A field value as JSON writes it (a list of spins, not a tuple of dataclasses)."""
    import json

    from epfuzz.ir.scenario import _to_plain

    return json.dumps(_to_plain(v), separators=(",", ":"))
