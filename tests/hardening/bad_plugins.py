"""Plug-ins that misbehave on purpose, for the hardening tests and the bad-input generator.

`write(folder)` writes `mb.py` there: protocol `mb:Bad` is examples.seqflag's SeqFlag whose
receiver, on a scenario of at least $BAD_FROM channels (default 0: all), does what $BAD says:
loop, sleep, alloc (grow without end), bigalloc (one impossible allocation), exit (sys.exit(0)),
os_exit (os._exit(0)), raise (ZeroDivisionError), or nothing ("none")."""

from __future__ import annotations

import json
from pathlib import Path

KINDS = ("loop", "sleep", "alloc", "bigalloc", "exit", "os_exit", "raise")
#: what each kind is, as the CLI documents it: a finding of kind hang/oom (exit 1), or a protocol error (exit 3)
OUTCOME = {"loop": "hang", "sleep": "hang", "alloc": "oom", "bigalloc": "oom", "exit": "protocol error",
           "os_exit": "protocol error", "raise": "protocol error"}
#: limits small enough for a test: an endless loop is past any bound, so the verdict does not depend on them
ENV = {"EPFUZZ_CALL_LIMIT_S": "1", "EPFUZZ_MEMORY_LIMIT_MB": "700"}


def env(kind: str) -> dict[str, str]:
    """The limits for a test of `kind`: growing memory also takes CPU (page faults), so the time limit
    of an `alloc` test is far above what reaching the memory limit takes on any load; the kind of
    outcome is then the memory's, not whichever limit a loaded machine reaches first."""
    return {**ENV, "BAD": kind, **({"EPFUZZ_CALL_LIMIT_S": "120"} if kind == "alloc" else {})}

SOURCE = r'''
"""A plug-in that misbehaves on purpose: BAD names how, BAD_FROM from how many channels on."""

from typing import Any

from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Layout, MemoryView, Protocol, Receiver
from epfuzz.ir.scenario import Scenario


class MailboxReceiver(Receiver):
    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch: int) -> None:
        self.got = [False] * self.layout.num_channels

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        out = []
        for c, got in enumerate(self.got):
            if not got and mem.u64(ops.SIGNAL, c * 8) == epoch + 1:
                self.got[c] = True
                n = self.layout.tokens_in_channel[c] * self.layout.token_bytes
                out.append(Consume(ops.DATA, self.layout.slot_offset(c, 0), n, c, f"mailbox {c}"))
        return out

    def done(self) -> bool:
        return all(self.got)

    def state(self) -> tuple[Any, ...]:
        return tuple(self.got)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.got = list(state)


class SeqFlag(Protocol):
    name = "seqflag"
    doc = "message, then a sequence flag by RDMA WRITE on the same QP"
    expect = "finding"
    fixed = {"knobs.mr_relaxed": True}
    sources = ("examples/seqflag.py",)
    # the signal fields of the scenario are not used by this protocol: keep them out of dedup
    signature_knobs = ("knobs.mr_relaxed", "knobs.nic_relaxed_ordering", "knobs.adaptive_routing")

    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        progs = []
        for c in range(layout.num_channels):
            qp = scn.qp_of_channel(c)
            n = layout.tokens_in_channel[c] * layout.token_bytes
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n)] if n else []
            prog.append(self.flag(qp, c, epoch))
            progs.append(prog)
        return progs

    def flag(self, qp: int, c: int, epoch: int) -> ops.Op:
        return ops.WriteValue(qp, ops.SIGNAL, c * 8, epoch + 1)

    def receiver(self, scn: Scenario, layout: Layout) -> Receiver:
        return MailboxReceiver(layout)


class SeqFlagAtomic(SeqFlag):
    name = "seqflag_atomic"
    doc = "message, then the flag raised by fetch-and-add (+1 per epoch) on a strict MR, same QP"
    expect = "clean"
    fixed = {"knobs.mr_relaxed": False}
    reset_signals = False  # the flag counts epochs: epoch e leaves e + 1

    def flag(self, qp: int, c: int, epoch: int) -> ops.Op:
        return ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1)


import os as _os
import sys as _sys
import time as _time

HOG = []


def misbehave(kind):
    if kind == "loop":
        while True:
            pass
    if kind == "sleep":
        _time.sleep(1e6)
    if kind == "alloc":
        while True:
            HOG.append(bytearray(1 << 24))
    if kind == "bigalloc":
        return bytearray(1 << 46)
    if kind == "exit":
        _sys.exit(0)
    if kind == "os_exit":
        _os._exit(0)
    if kind == "raise":
        raise ZeroDivisionError("plug-in bug")


class BadReceiver(MailboxReceiver):
    def poll(self, mem, epoch):
        if self.layout.num_channels >= int(_os.environ.get("BAD_FROM", "0")):
            misbehave(_os.environ.get("BAD", "loop"))
        return super().poll(mem, epoch)


class Bad(SeqFlag):
    name = "bad"

    def receiver(self, scn, layout):
        return BadReceiver(layout)
'''


def write(folder: Path) -> Path:
    path = folder / "mb.py"
    path.write_text(SOURCE)
    return path


def regression_case(folder: Path, root: Path) -> Path:
    """The DeepEP C2b regression case as one of mb:Bad (a SeqFlag, with the same mr_relaxed pin), which
    `--protocol mb:Bad` runs: it no longer moves a case that names another protocol (new-user trial item 2)."""
    d = json.loads((root / "corpus" / "regressions" / "deepep661-c2b.json").read_text())
    d = {**d, "protocol": "mb:Bad", "scenario": {**d["scenario"], "protocol": "mb:Bad"}, "input": "", "signature": ""}
    path = folder / "c2b-mb.json"
    path.write_text(json.dumps(d))
    return path
