"""The safety table: which write-then-signal combinations can accept an unfinished buffer.

Rows: signal kind x MR ordering x PCI atomic mode (fetch-and-add only) x fence x
same or other QP, and the READ-based pull axis: a flag WRITE after a flush READ of
the data (`epfuzz.model.rdma_read`), the READ on the data QP (the flag fenced
behind it, or not) or on the other QP (waited for by a Flush). Columns: presets.
A cell is UNSAFE when some setting of the preset's free platform knobs (NIC RO, o9-20, adaptive routing) lets *some*
allowed order accept stale bytes in the small litmus scenario (2 tokens, one
channel, exhaustive exploration of PCIe orders and, with adaptive routing, of
packet orders); `safe` when none does; `n/a` when the preset pins a knob the row
contradicts. Possibility, not probability.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Protocol
from epfuzz.protocols.pull import READ_FLUSH_LITMUS
from epfuzz.sim.explore import explore

KINDS = ("faa", "write", "write_imm", "send")
PLATFORM = {"knobs.nic_relaxed_ordering": (True, False), "knobs.hca_o920": (False, True),
            "knobs.adaptive_routing": (False, True)}


@dataclass(frozen=True)
class Row:
    kind: str
    relaxed: bool
    mode: int | None
    fence: bool
    other_qp: bool
    flush: str = "-"  # "READ": a flush READ of the data before the flag (on the other QP with other_qp)

    def label(self) -> tuple[str, ...]:
        return (self.kind, "relaxed" if self.relaxed else "strict", "-" if self.mode is None else str(self.mode),
                "fence" if self.fence else "-", "other QP" if self.other_qp else "same QP", self.flush)

    def protocol(self) -> Protocol:
        """What the litmus runs: the dispatch protocol, or the READ-flush litmus of the pull axis."""
        return READ_FLUSH_LITMUS if self.flush == "READ" else get_protocol("dispatch_any")


def rows() -> list[Row]:
    out = []
    for kind in KINDS:
        for relaxed, mode, fence, other in itertools.product(
                (False, True), (0, 4) if kind == "faa" else (None,), (False, True), (False, True)):
            out.append(Row(kind, relaxed, mode, fence, other))
    for relaxed, fence, other in itertools.product((False, True), (False, True), (False, True)):
        out.append(Row("write", relaxed, None, fence, other, "READ"))
    return out


def litmus(row: Row, preset: str, platform: dict[str, Any]) -> Scenario | None:
    doc: dict[str, Any] = {
        "protocol": "dispatch_any", "preset": preset,
        "payload": {"num_tokens": 2, "hidden_bytes": 16},
        "topology": {"num_qps": 2 if row.other_qp else 1},
        "signal": {"kind": row.kind, "fence": row.fence, "other_qp": row.other_qp},
        "knobs": {"mr_relaxed": row.relaxed, "atomic_mode": row.mode if row.mode is not None else 0,
                  "reorder_window": 64, **{k.split(".")[1]: v for k, v in platform.items()}},
    }
    fixed = PRESETS[preset].fixed
    for path, value in fixed.items():
        section, name = path.split(".")
        current = doc.get(section, {}).get(name)
        if current is not None and current != value:
            if path == "knobs.atomic_mode" and row.mode is None:
                doc[section][name] = value  # irrelevant without a fetch-and-add
                continue
            return None
    return codec.load_dict(doc)


def cell(row: Row, preset: str) -> str:
    free = {k: v for k, v in PLATFORM.items() if k not in PRESETS[preset].fixed}
    proto = row.protocol()  # litmus() scenarios name dispatch_any: the READ litmus shares its fields
    tried = 0
    for values in itertools.product(*free.values()):
        scn = litmus(row, preset, dict(zip(free, values)))
        if scn is None:
            return "n/a"
        tried += 1
        if explore(scn, proto).violation is not None:
            return "UNSAFE"
    return "safe" if tried else "n/a"


def table(presets: tuple[str, ...] | None = None) -> tuple[list[str], list[list[str]]]:
    presets = presets or tuple(PRESETS)
    header = ["signal", "MR", "atomic mode", "fence", "QP", "flush", *presets]
    body = [[*r.label(), *(cell(r, p) for p in presets)] for r in rows()]
    return header, body


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)
