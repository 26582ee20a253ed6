"""Fewer units of a count (QPs, channels), the fields that refer to them renumbered.

"Simpler" for a count is defined once (`epfuzz.triage.passes.simpler_values`); what a smaller count
does to the fields bounded by it is defined here once too, for every pass and for the knob
analysis (`epfuzz.triage.cause`), as Hypothesis' shrinker keeps dependent choices valid: a
channel's QP (`channel_qp`, bounded by `num_qps`), a spin's channel, and the per-unit lists
(`qp_delay_ns`, `qp_rate_div`, as long as `num_qps`) follow the unit they name.
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir.fields import FieldSpec, IntField, IntsField, ItemsField
from epfuzz.ir.scenario import iter_leaf_fields


def doc_get(doc: dict[str, Any], path: str) -> Any:
    """One dotted field of a scenario's JSON form (what the passes edit: the loader checks it)."""
    obj: Any = doc
    for p in path.split("."):
        obj = obj[p]
    return obj


def doc_set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `doc` with one dotted field set; the rest shared (candidates are many)."""
    head, _, rest = path.partition(".")
    out = dict(doc)
    if rest:
        out[head] = dict(doc.get(head, {}))
        out[head][rest] = value
    else:
        out[head] = value
    return out


#: the one list whose missing entries are not its lowest value: a channel with no `channel_qp` entry is on QP
#: channel % num_qps (`Scenario.qp_of_channel`, the rule the sim and the protocols follow)
CHANNEL_QP, NUM_QPS, NUM_CHANNELS = "topology.channel_qp", "topology.num_qps", "topology.num_channels"


def _spelled_out(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with a `channel_qp` entry for every channel, each its QP by that rule: a count's units used and
    their renumbering then see every channel's QP, not only the listed ones (a channel with no entry on a QP
    that was renumbered or swapped stayed on its old number, now another QP, away from that QP's delay)."""
    cq, nq = list(doc_get(doc, CHANNEL_QP)), doc_get(doc, NUM_QPS)
    return doc_set(doc, CHANNEL_QP, [cq[c] if c < len(cq) else c % nq for c in range(doc_get(doc, NUM_CHANNELS))])


def _shortened(out: dict[str, Any], listed: int) -> dict[str, Any]:
    """`out` with the trailing `channel_qp` entries past the first `listed` dropped where the rule gives
    their channel that QP anyway (the spelled-out entries no more than needed)."""
    cq, nq = list(doc_get(out, CHANNEL_QP)), doc_get(out, NUM_QPS)
    while len(cq) > listed and cq[-1] == (len(cq) - 1) % nq:
        cq.pop()
    return doc_set(out, CHANNEL_QP, cq)


def _default(path: str, spec: FieldSpec, doc: dict[str, Any], unit: int) -> int:
    """What a unit's entry of per-unit list `path` is where the list has none."""
    return unit % doc_get(doc, NUM_QPS) if path == CHANNEL_QP else spec.lo  # type: ignore[attr-defined]


def _holders(count: str) -> list[tuple[str, FieldSpec, str]]:
    """The fields that refer to count field `count`: (path, spec, how), `how` being "index" (a value
    names one of its units: `channel_qp` a QP, a spin's `channel`), "item" (an item field doing so) or
    "per" (a list with one entry per unit: `qp_delay_ns`)."""
    out: list[tuple[str, FieldSpec, str]] = []
    for path, spec in iter_leaf_fields():
        if isinstance(spec, (IntField, IntsField)) and spec.hi_from == count:
            out.append((path, spec, "index"))
        if isinstance(spec, IntsField) and spec.len_from == count:
            out.append((path, spec, "per"))
        if isinstance(spec, ItemsField):
            out += [(f"{path}.{sp}", sf, "item") for sp, sf in iter_leaf_fields(spec.cls)
                    if isinstance(sf, IntField) and sf.hi_from == count]
    return out


def remapped(doc: dict[str, Any], count: str, new: int) -> dict[str, Any] | None:
    """`doc` with count field `count` (QPs, channels) lowered to `new`, keeping the units the case uses
    and renumbering them: a channel's QP, a spin's channel, and the per-unit lists (delays, rates)
    follow their unit. None where the case uses more than `new` units, or only units below `new`
    (then cutting the rest, `fit`, loses nothing). Why: a case found with 7 QPs, its data on QP 6
    slowed by a delay at index 6, could only be cut to QP 1 without its delay (`fit`): no smaller
    QP count kept the finding, and the "minimized" case kept 7 QPs (pip trial, item 1)."""
    holders = _holders(count)
    if not holders:
        return None
    listed = len(doc_get(doc, CHANNEL_QP))
    orig, doc = doc, _spelled_out(doc)
    used: set[int] = set()
    for path, spec, how in holders:
        if how == "item":
            head, _, sub = path.rpartition(".")
            used |= {it[sub] for it in doc_get(doc, head) if isinstance(it.get(sub), int)}
            continue
        v = doc_get(doc, path)
        if how == "per":
            used |= {i for i, x in enumerate(v) if x != _default(path, spec, doc, i)}
        else:
            used |= set(v) if isinstance(v, list | tuple) else {v}
    if len(used) > new:
        return None
    spare = [u for u in range(doc_get(doc, count)) if u not in used]
    keep = sorted(used | set(spare[: new - len(used)]))
    where = {u: i for i, u in enumerate(keep)}
    out = doc_set(doc, count, new)
    for path, _spec, how in holders:
        if how == "item":
            head, _, sub = path.rpartition(".")
            out = doc_set(out, head, [{**it, sub: where.get(it[sub], it[sub])} for it in doc_get(out, head)])
        elif how == "per":
            v = list(doc_get(out, path))
            out = doc_set(out, path, [v[u] for u in keep if u < len(v)])
        else:
            v = doc_get(out, path)
            out = doc_set(out, path, [where.get(x, x) for x in v] if isinstance(v, list | tuple) else where.get(v, v))
    out = _shortened(out, min(listed, doc_get(out, NUM_CHANNELS)))
    cut = list(doc_get(orig, CHANNEL_QP))[: new if count == NUM_CHANNELS else None]  # what `fit` leaves of it
    if all(u < new for u in used) and doc_get(out, CHANNEL_QP) == cut:
        return None  # nothing renumbered and every channel on its QP: cutting the rest (`fit`) loses nothing
    return out


def relabelled(doc: dict[str, Any], count: str, a: int, b: int) -> dict[str, Any]:
    """`doc` with units `a` and `b` of count field `count` swapped in every field that names them
    or holds one entry per unit. A channel's data on QP 1 with the delay on QP 1 is the case with
    both on QP 0: lowering `channel_qp` alone moved the data off its delay and lost the finding,
    so a 1-minimal case kept QP 1 or QP 0 depending on how it was found."""
    swap = {a: b, b: a}
    listed = len(doc_get(doc, CHANNEL_QP))
    out = _spelled_out(doc)
    for path, spec, how in _holders(count):
        if how == "item":
            head, _, sub = path.rpartition(".")
            out = doc_set(out, head, [{**it, sub: swap.get(it[sub], it[sub])} for it in doc_get(out, head)])
        elif how == "per":
            v = list(doc_get(out, path))
            if v:
                v += [spec.lo] * (max(a, b) + 1 - len(v))  # type: ignore[attr-defined]
                v[a], v[b] = v[b], v[a]
                while v and path != CHANNEL_QP and v[-1] == spec.lo:  # type: ignore[attr-defined]
                    v.pop()
            out = doc_set(out, path, v)
        else:
            v = doc_get(out, path)
            out = doc_set(out, path, [swap.get(x, x) for x in v] if isinstance(v, list | tuple) else swap.get(v, v))
    return _shortened(out, listed)
