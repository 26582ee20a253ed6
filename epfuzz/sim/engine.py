"""The `sim` run: build packets and TLPs, let the adversary reorder them, replay into memory.

The receiver is woken after every TLP that lands in a region it watches and
reads the slots it then believes ready at that very instant: reading later can
only find more data landed, so this is the most demanding receiver, and what it
catches is exactly what some receiver timing could catch (see README, limits).
"""

from __future__ import annotations

import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.sim.adversary import apply_tlp_overtakes
from epfuzz.sim.built import ARRIVALS_PER_FORM, NET_WINDOW, Arrived, Built, build_form
from epfuzz.sim.packets import Packet
from epfuzz.sim.receive import Poll, Receiving
from epfuzz.sim.run import SimRun

__all__ = ["ARRIVALS_PER_FORM", "FORMS", "NET_WINDOW", "Arrived", "Built", "FormCache", "Poll", "SimRun", "build",
           "build_form", "build_over", "FormKey", "config_key", "replay", "schedule_moves", "simulate",
           "simulate_over"]


def build(scn: Scenario, proto: Protocol,
          arrival: Callable[[list[Packet]], list[Packet]] | None = None) -> SimRun:
    """Everything up to (not including) memory replay: deterministic in the scenario.

    `arrival`, if given, chooses the packet arrival order instead of the schedule's
    net overtakes (exhaustive exploration of adaptive routing uses it). Always a full
    build (no cache): `build_form` then `build_over`.
    """
    return build_over(build_form(scn, proto), scn, arrival)


def schedule_moves(scn: Scenario) -> tuple[list[tuple[int, int]], tuple[tuple[int, int], ...]]:
    """The schedule's PCIe moves and its net overtakes that take effect (none without adaptive routing):
    `build_over` applies them, and the tests that compare the adversary's copies take their arrival
    orders from here, so that they see the net moves the product runs.

    One pass, each overtake's stage read once (an attribute of an interpreted object: a generic look-up
    from compiled code)."""
    ar = scn.knobs.adaptive_routing
    moves: list[tuple[int, int]] = []
    net: list[tuple[int, int]] = []
    for o in scn.schedule:
        stage = o.stage
        if stage == "pcie":
            moves.append((o.index, o.distance))
        elif ar and stage == "net":
            net.append((o.index, o.distance))
    return moves, tuple(net)


def build_over(form: Built, scn: Scenario,
               arrival: Callable[[list[Packet]], list[Packet]] | None = None) -> SimRun:
    """`scn`'s schedule applied to the built form of its configuration: what `build` returns."""
    moves, net = schedule_moves(scn)
    if arrival is not None:
        a = form.arrive(scn, [], arrival)
    else:
        a = form.arrived(scn, net)
    window = scn.knobs.reorder_window
    order, tinv = apply_tlp_overtakes(a.tlps, moves, a.rule, window, a.streams(window) if moves else None)
    return SimRun(scn, form.layout, form.wrs, a.packets, a.tlps, order, tinv, a.pinv, flushes=form.flushes,
                  starts=form.starts)


#: key hashes of configurations built and not kept that `FormCache` remembers (`keep_first=False`): a
#: configuration built again within this many one-off builds is kept from then on
SEEN: Final = 2048

#: every Scenario field but the schedule, read from the dataclass itself: a field another change adds to
#: the Scenario joins the key without anyone remembering to add it here
CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Scenario) if f.name != "schedule")
_config_of = operator.attrgetter(*CONFIG_FIELDS)


def config_key(scn: Scenario) -> tuple[object, ...]:
    """What a built form depends on, besides the protocol: the whole scenario except its schedule.

    Why this is complete: `build_form` reads the scenario only through the protocol's layout, sender and
    prologue and the requester, all functions of the scenario (every section is a frozen, hashable
    dataclass, compared by value); the schedule is the one field left out, and it reaches a run only in
    `build_over` (PCIe moves) and `Built.arrived` (net moves, the arrivals' own key). The protocol is the
    other input: the cache keys it by identity and keeps it alive. tests/sim/test_built_form.py checks
    the key against the full build on random scenarios.
    """
    out: tuple[object, ...] = _config_of(scn)
    return out


class FormKey:
    """A cache key: a protocol's id and a configuration (`config_key`), hashed once.

    A tuple key was hashed anew by each dict operation of a miss (look-up, insert, LRU move), and each
    time every section's dataclass `__hash__` ran, interpreted; here the hash is taken once, and a section
    that is the very object the previous key had there (the decoder shares its default sections) reuses
    that one's hash. Equality is still the whole configuration's, so the key is as complete as `config_key`."""

    __slots__ = ("pid", "cfg", "h")

    def __init__(self, pid: int, cfg: tuple[object, ...]) -> None:
        self.pid, self.cfg = pid, cfg
        objs, hashes = _PREV_OBJ, _PREV_HASH
        n = len(cfg)
        if len(objs) != n:
            objs[:] = [None] * n
            hashes[:] = [0] * n
        # the hashes stay Python ints (`object`): typed `int`, each was unboxed on reading and boxed again on
        # appending, and a pair made per section hashed (issue 31)
        hs: list[object] = [pid]
        for i in range(n):
            x = cfg[i]
            if objs[i] is x:
                hs.append(hashes[i])
            else:
                hx: object = hash(x)
                objs[i] = x
                hashes[i] = hx
                hs.append(hx)
        self.h = hash(tuple(hs))

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FormKey) and self.h == other.h and self.pid == other.pid
                and self.cfg == other.cfg)


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two configurations hold the very same section objects, position by position."""
    if len(a) != len(b):
        return False
    for i in range(len(a)):  # noqa: SIM110 - a loop mypyc compiles; all() over a generator is an object per call
        if a[i] is not b[i]:
            return False
    return True


#: per position of the configuration, the section object last hashed there and its hash (they keep at most
#: one configuration's sections alive)
_PREV_OBJ: Final[list[object]] = []
_PREV_HASH: Final[list[object]] = []


class FormCache:
    """Built forms by (protocol, configuration), least recently used first out, at most `maxsize`.

    The guided search and the schedule sampler run many schedules of one configuration; each then costs
    only the adversary's moves and the replay. Results cannot depend on what is cached (a hit is the very
    object a miss builds, and nothing mutates it), only the time they take.

    With `keep_first=False` (the process's `FORMS`) a configuration's form enters the LRU only when the
    configuration is built a second time (its key's hash is among the last `seen` built and not kept) or
    the search hands it back (`put`); the last form returned still serves the runs right after it. Most
    configurations a search makes are one-offs (fresh draws, libFuzzer's new inputs, IR mutants): kept,
    128 of them held their packets, TLPs and images (megabytes) and each was freed 128 builds later, cold
    in the CPU's caches, ~10% of a fresh scenario's time (perf; FORMS limited to one form ran the fresh
    `dispatch_any` inputs 13% faster, interleaved in one process). A configuration the search comes back
    to pays one more build."""

    def __init__(self, maxsize: int = 128,
                 key: Callable[[Scenario], tuple[object, ...]] | None = None, keep_first: bool = True,
                 seen: int = SEEN) -> None:
        self.maxsize = maxsize
        self.key = key or config_key  # another key only in tests (one that forgets a field must be caught)
        self.forms: OrderedDict[FormKey, Built] = OrderedDict()
        self.keep_first = keep_first
        self._seen: OrderedDict[int, None] = OrderedDict()
        self.seen_max = seen
        self.hits = 0
        self.misses = 0
        #: the last form returned, with its protocol and configuration: the most recent entry of `forms` when
        #: it is kept there (a hit through it leaves the LRU order as it is), else a one-off only this holds
        self._last: tuple[Protocol, tuple[object, ...], Built] | None = None
        self._last_h = 0  # `_last`'s key hash (`FormKey.h`)

    def get(self, scn: Scenario, proto: Protocol) -> Built:
        cfg = self.key(scn)
        last = self._last
        # the search's next scenario mostly shares its configuration's very objects with the last one
        # (`Scenario.replace(schedule=...)`): those are compared by identity alone, no hash of the sections
        mine = last is not None and last[0] is proto and last[2].proto is proto
        if mine and last is not None and _same(last[1], cfg):
            self.hits += 1
            return last[2]
        key = FormKey(id(proto), cfg)
        # equal but not identical sections: the key's hash first, which a miss needs anyway, so that a fresh
        # configuration costs no interpreted dataclass `__eq__` against the last one (issue 31)
        if mine and last is not None and key.h == self._last_h and last[1] == cfg:
            self.hits += 1
            return last[2]
        forms = self.forms
        f = forms.get(key)
        if f is not None and f.proto is proto:  # the identity check: an id may be reused after a protocol dies
            forms.move_to_end(key)
            self.hits += 1
            self._last, self._last_h = (proto, cfg, f), key.h
            return f
        self.misses += 1
        stale = f is not None
        built = build_form(scn, proto)
        self._last, self._last_h = (proto, cfg, built), key.h
        if not (stale or self.keep_first or self._second(key.h)):
            return built
        forms[key] = built
        if stale:  # a new key goes in last already; a replaced one keeps its place
            forms.move_to_end(key)
        while len(forms) > self.maxsize:
            forms.popitem(last=False)
        return built

    def _second(self, h: int) -> bool:
        """Whether a configuration of key hash `h` was built and not kept lately (then it is kept now); else
        it is noted. A hash shared by two configurations only keeps a form one build early."""
        seen = self._seen
        if h in seen:
            del seen[h]
            return True
        seen[h] = None
        if len(seen) > self.seen_max:
            seen.popitem(last=False)
        return False

    def keep(self, scn: Scenario, proto: Protocol) -> None:
        """Keep in the LRU the last form returned, where it is `scn`'s configuration's under `proto` (nothing
        is built): the guided search calls it for an input it keeps, whose configuration its moves come back
        to, so that `keep_first=False` costs it no second build of each one."""
        last = self._last
        if last is None or last[0] is not proto or last[1] != self.key(scn):
            return
        key = FormKey(id(proto), last[1])
        forms = self.forms
        f = forms.get(key)
        if f is None or f.proto is not proto:
            forms[key] = last[2]
            self._seen.pop(key.h, None)
            while len(forms) > self.maxsize:
                forms.popitem(last=False)

    def put(self, scn: Scenario, proto: Protocol, form: Built) -> None:
        """Make `form`, the built form of `scn`'s configuration under `proto` (a `Built.lean` copy of one
        the caller kept), the most recent entry, unless one is cached already (then that one is). The
        guided search does so for the parent of a schedule move: fresh inputs and IR mutants each add a
        form, so with a corpus of hundreds of configurations a parent's had mostly left the cache by the
        time it was mutated again, and its child paid the build (issue 27: a cost that grew with the
        corpus). Results cannot depend on it: the form is what a miss would build."""
        cfg = self.key(scn)
        key = FormKey(id(proto), cfg)
        forms = self.forms
        f = forms.get(key)
        if f is None or f.proto is not proto:
            f = forms[key] = form
        forms.move_to_end(key)
        while len(forms) > self.maxsize:
            forms.popitem(last=False)
        self._last, self._last_h = (proto, cfg, f), key.h

    def clear(self) -> None:
        self.forms.clear()
        self._seen.clear()
        self._last = None
        self.hits = self.misses = 0


#: the process's built forms, which `simulate` uses (the harnesses too: nothing is line-instrumented, so
#: a cache hit changes no coverage; libFuzzer's is the run's semantic features, the same either way)
FORMS = FormCache(keep_first=False)


def replay(run: SimRun, proto: Protocol) -> SimRun:
    """Land TLPs in visibility order; wake the receiver; stop at the first violation."""
    step = Receiving(run.scenario, proto, run.layout, run.order, run.polls, run.starts)
    pos = 0
    for t in run.order:
        if t.epoch != step.epoch:
            v = step.close(pos)
            if v is not None:
                run.violation = v
                return run
            step.start_epoch(t.epoch)
            v = step.wake(pos)
            if v is not None:
                run.violation = v
                return run
        pos += t.n
        v = step.land(t, pos)
        if v is not None:
            run.violation = v
            return run
    run.violation = step.close(pos)
    return run


def simulate(scn: Scenario, proto: Protocol) -> SimRun:
    """Build and replay `scn` under `proto` (the caller resolved it once, by the scenario's name).

    The configuration's built form comes from `FORMS` (a schedule-only change rebuilds nothing)."""
    return replay(build_over(FORMS.get(scn, proto), scn), proto)


def simulate_over(form: Built, scn: Scenario) -> SimRun:
    """Replay `scn` over `form`, the built form of its configuration the caller kept (`FORMS.get` or
    `build_form`): a search that holds one skips even the cache's lookup."""
    return replay(build_over(form, scn), form.proto)
