"""Semantic feedback: features in the model's language, fed to libFuzzer as coverage.

Line coverage of the emulator saturates within seconds (every branch of the
adversary and the responder runs on the first few inputs), after which a new
ordering looks like an old one. These features name what an ordering *did*:

(a) reorder pairs: (later TLP/packet class, earlier class, rule cell, region pair,
    same bytes or not) for every inversion the adversary made; a data TLP that ends a
    slot (where the trailer lives) is its own class, so "trailer passed a middle TLP"
    is a feature, and "a signal passed a store to the same word" (whose value then
    stays, RFF's write-order half) is another;
(b) reads-from: for each accepted range, whether the receiver read this epoch's
    bytes, an earlier epoch's, poison, or a mix;
(c) slack: the signed distance, in TLPs made visible, between the last landing of
    an accepted range's data and the accept, per phase (epoch, batch or final),
    bucketed by log2; only the run's minimum per phase is emitted (IJON's max idea,
    turned round), so an input that comes closer to a stale accept is kept;
(d) protocol state: each channel's progress (none, part, all of its slots accepted)
    before and after each accepting poll, per epoch;
(e) shape waypoints (FuzzFactory's idea): which kinds of work request each channel
    posts on its data QP or on another, whether a channel has no tokens, how many
    epochs ran. They hold no ordering, but they mark the rare corners of the
    configuration where deep bugs live (a remainder batch finished by a flag, a
    signal on a shared QP, an empty channel in a later call), so the in-process
    loop (epfuzz.greybox) keeps such a configuration and spends schedules on it.

`features(run)` is pure (tested without atheris). `Counters` maps feature keys onto
a block of atheris' 8-bit counters, reserved before `atheris.Setup` and bumped with
`atheris._trace_branch`: libFuzzer reads them as it reads its own edge counters
(up to 8 features per counter, by hit-count bucket). Keys are hashed with CRC32, not
`hash()`, so every process (fork, merge) maps a key to the same counter.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from epfuzz import ops
from epfuzz.sim.engine import SimRun
from epfuzz.sim.packets import TlpAction

POOL = 1 << 14          # counters reserved for semantic features
_ACTION = {TlpAction.COPY: "data", TlpAction.VALUE: "value", TlpAction.ADD: "add", TlpAction.READ: "read",
           TlpAction.CQE: "cqe"}
Feature = tuple[Any, ...]


def _tlp_class(t: Any, token_bytes: int) -> str:
    name = _ACTION.get(t.action, "?")
    if t.local:
        return "local"
    if name == "data" and t.region == ops.DATA and token_bytes and (t.off + t.length) % token_bytes == 0:
        name = "data-end"      # holds a slot's last 16 bytes: the trailer
    return f"{name}/{t.attrs.type.name}{'/RO' if t.attrs.ro else ''}"


def _overlap(a: Any, b: Any) -> bool:
    """The two TLPs touch the same bytes: which one's value stays is decided by the reordering
    (a reset store passed by a signal, a flag passed by the word it guards)."""
    return a.region == b.region and a.off < b.off + max(b.length, 1) and b.off < a.off + max(a.length, 1)


def reorder_pairs(run: SimRun) -> set[Feature]:
    tb = run.layout.token_bytes
    out: set[Feature] = {("ro", _tlp_class(a, tb), _tlp_class(b, tb), rule, a.region, b.region, _overlap(a, b))
                         for a, b, rule in run.tlp_inversions}
    out |= {("pk", int(a.kind), int(b.kind), rule, a.region, b.region) for a, b, rule in run.packet_inversions}
    return out


def _bucket(x: int) -> int:
    """Signed log2 bucket: 0 for 0, +-bit_length otherwise."""
    return x.bit_length() if x >= 0 else -(-x).bit_length()


def _last_landing(run: SimRun) -> dict[tuple[int, str, int], int]:
    """(epoch, region, slot or 16-byte word) -> position at which its last TLP became visible."""
    tb = run.layout.token_bytes or 16
    out: dict[tuple[int, str, int], int] = {}
    pos = 0
    for t in run.order:
        pos += t.n
        unit = tb if t.region == ops.DATA else 16
        for k in range(t.off // unit, (t.off + max(t.length, 1) - 1) // unit + 1):
            key = (t.epoch, t.region, k)
            if out.get(key, -1) < pos:
                out[key] = pos
    return out


def accept_features(run: SimRun) -> set[Feature]:
    """(b) reads-from, (c) minimum slack per phase, (d) progress transitions."""
    lay = run.layout
    tb = lay.token_bytes or 16
    landing = _last_landing(run)
    out: set[Feature] = set()
    best: dict[tuple[int, str], int] = {}
    done: dict[tuple[int, int], int] = {}
    for p in run.polls:
        e = p.epoch
        before = tuple(_progress(done.get((e, c), 0), lay.tokens_in_channel[c]) for c in range(lay.num_channels))
        for c in p.consumes:
            unit = tb if c.region == ops.DATA else 16
            keys = range(c.offset // unit, (c.offset + max(c.length, 1) - 1) // unit + 1)
            last = max((landing.get((e, c.region, k), 0) for k in keys), default=0)
            slack = p.position - last          # < 0: some of it landed only after the accept
            end = (c.offset + c.length) // tb - c.channel * lay.slots_per_channel
            final = c.region == ops.DATA and end >= lay.tokens_in_channel[c.channel]
            phase = (min(e, 3), "final" if final else "batch")
            best[phase] = min(best.get(phase, slack), slack)
            if c.region == ops.DATA:
                done[(e, c.channel)] = done.get((e, c.channel), 0) + c.length // tb
        after = tuple(_progress(done.get((e, c), 0), lay.tokens_in_channel[c]) for c in range(lay.num_channels))
        if after != before:
            out.add(("st", min(e, 3), before, after))
    for phase, slack in best.items():
        out.add(("slack", *phase, _bucket(slack)))
    v = run.violation
    if v is not None and v.kind != "hang":
        classes = {cls for _, cls in v.bad_chunks}
        mix = "mix" if v.bad_bytes < v.length or len(classes) > 1 else next(iter(classes), "?")
        out.add(("rf", v.region, mix))
    elif run.polls:
        out.add(("rf", "fresh"))
    return out


def _progress(k: int, n: int) -> int:
    return 0 if k == 0 else (2 if k >= n else 1)


def shape_features(run: SimRun) -> set[Feature]:
    """(e) configuration waypoints: work-request kinds per QP relation, empty channels, epochs."""
    data_qps: dict[int, set[int]] = {}
    for w in run.wrs:
        if getattr(w.op, "region", None) == ops.DATA:
            data_qps.setdefault(w.channel, set()).add(w.qp)
    out: set[Feature] = {("wr", type(w.op).__name__, getattr(w.op, "region", "-"),
                          "data-qp" if w.qp in data_qps.get(w.channel, ()) else "other-qp") for w in run.wrs}
    epochs = min(max((w.epoch for w in run.wrs), default=0), 3)
    out.add(("epochs", epochs))
    if 0 in run.layout.tokens_in_channel:
        out.add(("empty-channel", epochs))
    return out


def features(run: SimRun) -> set[Feature]:
    return reorder_pairs(run) | accept_features(run) | shape_features(run)


def feature_index(key: Feature) -> int:
    return zlib.crc32(repr(key).encode()) % POOL


class Counters:
    """A block of atheris counters; `emit` bumps one per feature key (reserve before Setup)."""

    def __init__(self, size: int = POOL) -> None:
        import atheris

        self.size = size
        self.base = [atheris._reserve_counter() for _ in range(size)]
        self._atheris = atheris

    def emit(self, keys: Iterable[Feature]) -> None:
        # looked up per call: atheris.Setup rebinds _trace_branch to the libFuzzer-linked core
        base, trace = self.base, self._atheris._trace_branch
        for k in keys:
            trace(base[feature_index(k) % self.size])
