"""What a move may read (`Context`): the protocol, its decoder, and the runs of configurations seen lately.

Kept apart from the moves themselves (`epfuzz.search.moves`, which re-exports it): the caches here are the
search's per-run state (decoded parents, their field bounds, base runs and built forms, the receiver's marks),
bounded least-recently-used; the moves are stateless functions of (context, parent, rng).
"""

from __future__ import annotations

import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epfuzz.encoding import codec
from epfuzz.ir.choices import ChoiceReader
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol

MAX_LEN = 256
MAX_SCHEDULE = 16      # the decoder's cap on overtakes
BASES = 256            # configurations whose unscheduled run is kept for the sampler (least recently used out)
DECODED = 1024         # inputs whose decoded scenario `Context.decode` keeps (least recently used out)

#: Scenario's fields in __init__'s order (every one an init field: the positional construction below needs it)
_FIELDS = tuple(f.name for f in dataclasses.fields(Scenario) if f.init)
assert len(_FIELDS) == len(dataclasses.fields(Scenario))
_SCHEDULE = _FIELDS.index("schedule")
_values = operator.attrgetter(*_FIELDS)


def with_schedule(scn: Scenario, schedule: tuple[Any, ...]) -> Scenario:
    """`scn.replace(schedule=schedule)`, built positionally: `dataclasses.replace` walks the fields and makes
    keyword arguments at every call (twice the time), and the search makes one per schedule move."""
    values = list(_values(scn))
    values[_SCHEDULE] = schedule
    return type(scn)(*values)


@dataclass
class Context:
    """What a move may read: the protocol, its decoder, and the runs of configurations seen lately."""

    protocol: str
    proto: Protocol
    preset: str = "spec"
    sim: bool = True                          # schedule moves read the emulator's run of the configuration
    max_len: int = MAX_LEN
    #: the runs `base` keeps, least recently used first: a bounded LRU, so a long run's memory does not grow
    #: with its corpus, and the configurations of the inputs picked most often stay (clearing them all when
    #: full made a schedule move re-run its parent's configuration more often as the corpus grew)
    bases: OrderedDict[Scenario, Any] = field(default_factory=OrderedDict)
    base_runs: int = 0                        # configurations `base` had to run (not kept)
    #: the built form of each configuration in `bases` (`Built.lean`), handed back to the form cache on use
    forms: dict[Scenario, Any] = field(default_factory=dict)
    #: what the receiver hinges on in each base run (`sampler._marked`), made on first use; leaves with its run
    marks: dict[Scenario, list[Any]] = field(default_factory=dict)
    #: the configuration `base` is running now: where the plug-in's code loops or raises inside a move,
    #: this is the input that does so again (a fresh move's parent is b"", which runs something else)
    running: Scenario | None = None
    #: inputs -> their decoded scenarios, least recently used first: a parent is picked many times, and each
    #: schedule move on it decoded its bytes again (a bounded LRU, so memory does not grow with the corpus)
    decoded: OrderedDict[bytes, Scenario] = field(default_factory=OrderedDict)
    #: (bytes, scenario) of the input the last built-in move made from a scenario (`emit`), so the engine
    #: runs that scenario instead of decoding the bytes it was just encoded to
    made: tuple[bytes, Scenario] | None = None
    #: inputs -> the byte offsets of their decoder's draws (`bounds`), least recently used first
    starts: OrderedDict[bytes, list[int]] = field(default_factory=OrderedDict)
    #: inputs -> their configuration (`config_of`), least recently used first: a parent picked again gets the
    #: very same configuration object (no `dataclasses.replace` per pick; the emulator's form cache compares its
    #: sections by identity first)
    configs: OrderedDict[bytes, Scenario] = field(default_factory=OrderedDict)
    #: the built form `base` found or made for the configuration it was last given (None where it has none):
    #: the schedule move reads it right after, without a second lookup (a hash of the whole configuration)
    last_form: Any = None
    #: inputs -> their encoding cut around the schedule (`codec.split`), least recently used first: a schedule
    #: move's mutant differs from its parent only in the schedule, so only that is encoded (`emit_schedule`)
    cuts: OrderedDict[bytes, codec.Split] = field(default_factory=OrderedDict)
    #: (bytes, cut) of the last `emit_schedule`: its mutant has its parent's configuration, so its parent's cut;
    #: kept for it if the engine keeps it (`remember`), where it is a parent to be
    made_cut: tuple[bytes, codec.Split] | None = None
    #: id(a configuration object) -> [that object, its base run, its form, its marks or None], least recently used
    #: out (at most BASES): `config_of` hands out one object per input, so a parent picked again finds its base,
    #: form and marks by identity, where each lookup by value hashed the whole configuration again (four per
    #: schedule move, ~10 us each run cache-cold in the engine). A record of an equal configuration made
    #: before its base left `bases` holds an equal run (a base is a function of its configuration)
    hot: OrderedDict[int, list[Any]] = field(default_factory=OrderedDict)

    def decode(self, data: bytes) -> Scenario:
        """`codec.decode`, through the `decoded` cache (the scenarios are frozen: sharing one is safe)."""
        cache = self.decoded
        scn = cache.get(data)
        if scn is not None:
            cache.move_to_end(data)
            return scn
        scn = codec.decode(data, self.protocol, self.preset)
        self.remember(data, scn)
        return scn

    def bounds(self, data: bytes) -> list[int]:
        """`field_bounds` of `data` under this context's decoder, kept (a bounded LRU, as `decoded`): the IR
        moves read a parent's draws at every pick, and recording them is a decode through a Python reader."""
        cache = self.starts
        got = cache.get(data)
        if got is not None:
            cache.move_to_end(data)
            return got
        got = cache[data] = field_bounds(data, self.decoder())
        if len(cache) > DECODED:
            cache.popitem(last=False)
        return got

    def remember(self, data: bytes, scn: Scenario) -> None:
        """`scn` is what `data` decodes to (the engine's executor decoded it, or a move encoded it): a later
        `decode` of `data` (a kept input picked as a parent) returns it."""
        cache = self.decoded
        cache[data] = scn
        cache.move_to_end(data)
        if len(cache) > DECODED:
            cache.popitem(last=False)
        made = self.made_cut
        if made is not None and made[0] is data:
            self._cut(data, made[1])

    def emit(self, scn: Scenario) -> bytes:
        """`scn`'s bytes, and `scn` kept beside them in `made`. Only for a scenario that decodes back to
        itself: one decoded under this context's protocol and preset (its pinned fields hold their values),
        changed only within the codec's bounds (a schedule of at most MAX_SCHEDULE overtakes, each index an
        `encodable` one, each distance in 1..64), as the schedule moves' are; tests/search/test_moves.py
        checks `decode(encode(s)) == s` for what they make."""
        data = codec.encode(scn)
        self.made = (data, scn)
        return data

    def emit_schedule(self, data: bytes, scn: Scenario, schedule: tuple[Any, ...]) -> bytes:
        """`emit(scn.replace(schedule=schedule))` for `scn`, what `data` decodes to: the same bytes, with only
        the schedule encoded. The cut is kept per input (a bounded LRU, as `decoded`), and for the mutant too
        if the engine keeps it (`made_cut`); the key is complete because the cut is a function of `scn`
        without its schedule (the mutant's is its parent's), and `scn` of `data` (this context's decoder, or
        a scenario `remember`ed as what `data` decodes to)."""
        cut = self.cuts.get(data)
        if cut is None:
            cut = codec.split(scn)
        self._cut(data, cut)
        out = codec.encode_split(cut, schedule)
        self.made = (out, with_schedule(scn, schedule))
        self.made_cut = (out, cut)
        return out

    def _cut(self, data: bytes, cut: codec.Split) -> None:
        """`cut` kept for `data` as its most recent entry (a bounded LRU, as `decoded`)."""
        cache = self.cuts
        cache[data] = cut
        cache.move_to_end(data)
        if len(cache) > DECODED:
            cache.popitem(last=False)

    def config_of(self, data: bytes, scn: Scenario) -> Scenario:
        """`scn.replace(schedule=())` for `scn`, what `data` decodes to, kept per input (a bounded LRU, as
        `decoded`: bytes hash once, a configuration at every lookup)."""
        cache = self.configs
        got = cache.get(data)
        if got is not None:
            cache.move_to_end(data)
            return got
        got = cache[data] = with_schedule(scn, ())
        if len(cache) > DECODED:
            cache.popitem(last=False)
        return got

    def decoder(self) -> Callable[[ChoiceReader], object]:
        return codec.decoder_for(self.protocol, self.preset)

    def culprit(self, parent: bytes) -> bytes:
        """The input to keep when a move ran the plug-in past a limit or into an exception."""
        return codec.encode(self.running) if self.running is not None else parent

    def base(self, config: Scenario) -> Any:
        """The configuration's run in arrival order, replayed (its polls say what the receiver reads);
        its `starts` (the images a replay begins from) are not kept. The configuration's built form, kept
        beside it (`Built.lean`: the lists the run holds anyway), goes back into the emulator's form cache,
        so the mutant this move makes, which has the same configuration, runs without building it again."""
        from epfuzz.sim.engine import FORMS, simulate

        bases = self.bases
        rec = self.hot.get(id(config))
        if rec is not None and rec[0] is config:
            try:
                bases.move_to_end(config)         # the LRU order a hit by value leaves
            except KeyError:                      # its base left `bases`: run again, as a miss by value does
                rec = None
            else:
                self.hot.move_to_end(id(config))
                form = self.last_form = rec[2]
                if form is not None:
                    FORMS.put(config, self.proto, form.lean())
                run: Any = rec[1]
                return run
        run = bases.get(config)
        if run is not None:
            bases.move_to_end(config)
            form = self.last_form = self.forms.get(config)
            if form is not None:
                FORMS.put(config, self.proto, form.lean())   # a copy: what the cache adds to it is not kept here
            self._hot(config, run, form)
            return run
        self.running = config
        run = simulate(config, self.proto)
        self.running = None
        self.base_runs += 1
        # a base is read (its TLPs, packets and polls), never replayed: it does not keep its built form's
        # epoch-start images alive once the form cache (epfuzz.sim.engine) lets the form go
        run = bases[config] = dataclasses.replace(run, starts=None)
        self.forms[config] = self.last_form = FORMS.get(config, self.proto).lean()  # what `simulate` used
        while len(bases) > BASES:
            old, _ = bases.popitem(last=False)
            self.forms.pop(old, None)
            self.marks.pop(old, None)
        self._hot(config, run, self.last_form)
        return run

    def _hot(self, config: Scenario, run: Any, form: Any) -> None:
        hot = self.hot
        hot[id(config)] = [config, run, form, None]
        hot.move_to_end(id(config))
        if len(hot) > BASES:
            hot.popitem(last=False)

    def marked(self, config: Scenario, run: Any) -> list[Any]:
        """`sampler._marked(run)` for the base run of `config`, kept beside it: a function of that run alone,
        which each focused change point on a parent of this configuration made again."""
        from epfuzz.search.sampler import _marked

        rec = self.hot.get(id(config))
        mine = rec is not None and rec[0] is config and rec[1] is run
        if mine and rec is not None and rec[3] is not None:
            kept: list[Any] = rec[3]
            return kept
        got = self.marks.get(config)
        if got is None:
            got = self.marks[config] = _marked(run)
        if mine and rec is not None:
            rec[3] = got
        return got


def field_bounds(data: bytes, decode: Callable[[ChoiceReader], object]) -> list[int]:
    """Byte offsets at which each draw of the decoder starts."""
    starts: list[int] = []

    class Recorder(ChoiceReader):
        def draw(self, lo: int, hi: int) -> int:
            starts.append(self.pos)
            return super().draw(lo, hi)

    decode(Recorder(data))
    return starts
