"""Built forms (issue 31): a configuration built once, its schedules replayed over it.

The cache is only sound if its key holds everything the built form depends on; these tests
replay random schedules over forms built for *other* schedules of the same configuration
(and over forms the cache returned for earlier scenarios) and compare each with the full
build: verdict, violation, culprits, rules fired and the whole trace.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.ir.scenario import Overtake, Scenario, iter_leaf_fields
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.sim import engine
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from equivalence import trace_hash  # noqa: E402


def _record(run: engine.SimRun) -> list[Any]:
    v = run.violation
    return [None if v is None else v.summary(), sorted(run.culprit_rules()), sorted(run.rules_fired),
            trace_hash(run.fingerprint())]


def _full(scn: Scenario) -> list[Any]:
    proto = get_protocol(scn.protocol)
    return _record(engine.replay(engine.build(scn, proto), proto))


def _schedule(rng: random.Random) -> tuple[Overtake, ...]:
    return tuple(Overtake(rng.choice(("pcie", "net")), rng.randrange(400), rng.randint(1, 64))
                 for _ in range(rng.randrange(0, 6)))


def _scenarios(n: int, seed: int) -> list[Scenario]:
    rng = random.Random(seed)
    names, presets = sorted(BUILTIN), list(PRESETS)
    out = []
    while len(out) < n:
        scn = codec.decode(rng.randbytes(rng.randrange(0, 128)), rng.choice(names), rng.choice(presets))
        if rng.random() < 0.5:  # net moves take effect only with adaptive routing
            scn = scn.with_path("knobs.adaptive_routing", True)
        out.append(scn)
    return out


def _mismatches(cache: engine.FormCache, scns: list[Scenario], rng: random.Random) -> list[str]:
    bad = []
    for scn in scns:
        for sched in [_schedule(rng) for _ in range(3)]:
            other = scn.replace(schedule=sched)
            got = _record(engine.simulate_over(cache.get(other, get_protocol(scn.protocol)), other))
            want = _full(other)
            if got != want:
                bad.append(f"{other.to_json(None)}: form {got} full {want}")
    return bad


def test_schedules_over_a_cached_form_match_the_full_build() -> None:
    """300 random configurations, each built once by the cache and replayed under 3 new schedules each
    (mixes of PCIe and net overtakes): every record agrees with building from scratch."""
    cache = engine.FormCache(maxsize=64)
    rng = random.Random(31)
    scns = _scenarios(300, 31)
    for scn in scns:  # first build each form under its own schedule, as a search would
        cache.get(scn, get_protocol(scn.protocol))
    bad = _mismatches(cache, scns, rng)
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"
    assert cache.hits > 0 and len(cache.forms) <= 64


def test_an_incomplete_key_is_caught() -> None:
    """The comparison above can fail: with a key that forgets the payload section, configurations that
    differ only there share a form, and the replays no longer match the full build."""
    def forgetful(scn: Scenario) -> tuple[object, ...]:
        return tuple(x for x in engine.config_key(scn) if x is not scn.payload)

    rng = random.Random(7)
    base = _scenarios(20, 7)
    scns = [s for b in base for s in (b, b.with_path("payload.hidden_bytes", b.payload.hidden_bytes + 16))]
    assert _mismatches(engine.FormCache(key=forgetful), scns, rng)


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, tuple):
        return (*value, 1)
    return f"{value}x"


def test_every_field_but_the_schedule_is_in_the_key() -> None:
    """Changing any one schema leaf outside the schedule changes the key; the schedule never does."""
    base = Scenario()
    key = engine.config_key(base)
    paths = [path for path, _ in iter_leaf_fields() if not path.startswith("schedule")]
    assert len(paths) > 40
    for path in paths:
        assert engine.config_key(base.with_path(path, _other(base.get_path(path)))) != key, path
    for name in ("protocol", "preset"):  # names, not schema leaves
        assert engine.config_key(base.replace(**{name: "other"})) != key, name
    assert engine.config_key(base.replace(schedule=(Overtake("pcie", 3, 2),))) == key


def test_the_cache_is_a_bounded_lru() -> None:
    cache = engine.FormCache(maxsize=3)
    proto = get_protocol("dispatch_any")
    scns = [codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", k) for k in range(1, 6)]
    forms = [cache.get(s, proto) for s in scns[:3]]
    assert cache.get(scns[0], proto) is forms[0]  # a hit: the same object, now most recently used
    cache.get(scns[3], proto)                      # evicts scns[1], the least recently used
    assert len(cache.forms) == 3
    assert cache.get(scns[0], proto) is forms[0]
    assert cache.get(scns[2], proto) is forms[2]
    misses = cache.misses
    assert cache.get(scns[1], proto) is not forms[1] and cache.misses == misses + 1
    cache.get(scns[4], proto)
    assert len(cache.forms) == 3


def test_a_protocol_is_keyed_by_identity() -> None:
    """Two protocol objects never share a form, even with equal configurations."""
    from epfuzz.protocols.dispatch import DispatchProtocol

    cache = engine.FormCache()
    scn = codec.decode(b"\x01\x02", "dispatch_any")
    a, b = get_protocol("dispatch_any"), DispatchProtocol("dispatch_any", "", {}, "clean")
    assert cache.get(scn, a) is not cache.get(scn, b)
    assert cache.get(scn, a).proto is a


def test_the_last_form_shortcut_checks_the_configuration() -> None:
    """`FormCache.get` answers a repeat of the last configuration: a schedule-only change (the very section
    objects, no hash) and an equal configuration made anew (through its key's hash) both hit, while a change
    of one field right after, or another protocol object, does not get the last form."""
    from epfuzz.protocols.dispatch import DispatchProtocol

    cache = engine.FormCache()
    proto = get_protocol("dispatch_any")
    scn = codec.decode(b"\x05\x06\x07", "dispatch_any")
    form = cache.get(scn, proto)
    assert cache.get(scn.replace(schedule=(Overtake("pcie", 1, 2),)), proto) is form
    assert cache.get(codec.decode(b"\x05\x06\x07", "dispatch_any"), proto) is form
    assert cache.hits == 2
    other = scn.with_path("payload.num_tokens", scn.payload.num_tokens + 1)
    assert cache.get(other, proto) is not form and cache.misses == 2
    assert cache.get(scn, proto) is form  # from the LRU this time
    assert cache.get(scn, DispatchProtocol("dispatch_any", "", {}, "clean")) is not form


def test_schedules_over_a_lean_copy_match_the_full_build() -> None:
    """`Built.lean` (what the guided search keeps beside a base run and hands back through `put`) keeps
    only the arrival order without net overtakes and no epoch-start images: replays over it, with PCIe
    and net overtakes, still agree with building from scratch."""
    rng = random.Random(41)
    scns = _scenarios(120, 41)
    cache = engine.FormCache(maxsize=256)
    for scn in scns:
        proto = get_protocol(scn.protocol)
        full = cache.get(scn, proto)
        engine.simulate_over(full, scn.replace(schedule=()))   # the net-free arrival order, as a base run makes it
        lean = full.lean()
        assert lean is not full and lean.packets is full.packets and not lean.starts.writes and not lean.starts.images
        cache.put(scn, proto, lean)                            # one is cached: it stays
        assert cache.get(scn, proto) is full
    fresh = engine.FormCache(maxsize=256)
    for scn in scns:
        fresh.put(scn, get_protocol(scn.protocol), cache.get(scn, get_protocol(scn.protocol)).lean())
    misses = fresh.misses
    bad = _mismatches(fresh, scns, rng)
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"
    assert fresh.misses == misses          # every replay ran over a lean copy: nothing was built


def test_put_is_most_recent_and_bounded() -> None:
    cache = engine.FormCache(maxsize=2)
    proto = get_protocol("dispatch_any")
    scns = [codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", k) for k in range(1, 4)]
    forms = [engine.build_form(s, proto) for s in scns]
    cache.put(scns[0], proto, forms[0])
    cache.get(scns[1], proto)
    cache.put(scns[0], proto, forms[0].lean())             # cached already: that one stays, now most recent
    assert cache.get(scns[0], proto) is forms[0]
    cache.put(scns[2], proto, forms[2])                    # evicts scns[1], the least recently used
    assert len(cache.forms) == 2 and cache.get(scns[2], proto) is forms[2]
    misses = cache.misses
    cache.get(scns[1], proto)
    assert cache.misses == misses + 1


SECTIONS = [f for f in engine.CONFIG_FIELDS if dataclasses.is_dataclass(getattr(Scenario(), f))]


def test_an_equal_configuration_made_anew_finds_its_form() -> None:
    """`FormKey` hashes a configuration once, reusing a section's hash where the key before it had that
    very object: an equal configuration made anew (new section objects, other keys made in between)
    hashes alike and finds the form, and one changed field does not."""
    cache = engine.FormCache(maxsize=512)
    scns = _scenarios(120, 5)
    forms = [cache.get(s, get_protocol(s.protocol)) for s in scns]
    misses = cache.misses
    for s, f in reversed(list(zip(scns, forms))):
        again = s.replace(**{f: dataclasses.replace(getattr(s, f)) for f in SECTIONS})
        assert again == s and again.payload is not s.payload
        assert engine.FormKey(7, engine.config_key(again)).h == engine.FormKey(7, engine.config_key(s)).h
        assert cache.get(again, get_protocol(s.protocol)) is f
    assert cache.misses == misses
    s = scns[0].with_path("payload.hidden_bytes", scns[0].payload.hidden_bytes + 16)
    assert cache.get(s, get_protocol(s.protocol)) is not forms[0] and cache.misses == misses + 1


def test_a_one_off_configuration_is_served_but_not_kept() -> None:
    """`keep_first=False` (the process's FORMS): a configuration built once is the last form, which the runs
    right after it get, but it does not enter the LRU; built again after others, it is kept from then on."""
    cache = engine.FormCache(maxsize=8, keep_first=False)
    proto = get_protocol("dispatch_any")
    scns = [codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", k) for k in range(1, 5)]
    first = cache.get(scns[0], proto)
    assert cache.get(scns[0].replace(schedule=(Overtake("pcie", 1, 2),)), proto) is first and cache.hits == 1
    assert not cache.forms
    for s in scns[1:]:
        cache.get(s, proto)
    assert not cache.forms and cache.misses == 4
    again = cache.get(scns[0], proto)          # the second build: kept
    assert again is not first and len(cache.forms) == 1
    cache.get(scns[1], proto)                  # its second build too
    assert cache.get(scns[0], proto) is again and cache.misses == 6 and len(cache.forms) == 2


def test_the_seen_hashes_are_bounded() -> None:
    cache = engine.FormCache(keep_first=False, seen=3)
    proto = get_protocol("dispatch_any")
    scns = [codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", k) for k in range(1, 6)]
    for s in scns:
        cache.get(s, proto)
    assert len(cache._seen) == 3
    cache.get(scns[0], proto)                  # forgotten: a one-off again, not kept
    assert not cache.forms
    cache.get(scns[4], proto)                  # remembered: kept
    assert len(cache.forms) == 1


def test_keep_keeps_the_last_form_of_that_configuration_only() -> None:
    from epfuzz.protocols.dispatch import DispatchProtocol

    cache = engine.FormCache(keep_first=False)
    proto = get_protocol("dispatch_any")
    a, b = (codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", k) for k in (1, 2))
    form = cache.get(a, proto)
    cache.keep(b, proto)                                            # not the last form's configuration
    cache.keep(a, DispatchProtocol("dispatch_any", "", {}, "clean"))  # nor its protocol
    assert not cache.forms
    cache.keep(a.replace(schedule=(Overtake("pcie", 1, 2),)), proto)
    assert list(cache.forms.values()) == [form]
    cache.get(b, proto)
    misses = cache.misses
    assert cache.get(a, proto) is form and cache.misses == misses


@pytest.mark.parametrize("keep_first", [True, False])
def test_replays_agree_with_the_full_build_whatever_is_kept(keep_first: bool) -> None:
    """Both admission policies serve only forms a full build makes: 120 random configurations, each
    asked for twice apart (the second time kept under `keep_first=False`), replayed under new schedules."""
    cache = engine.FormCache(maxsize=32, keep_first=keep_first)
    rng = random.Random(17)
    scns = _scenarios(120, 17)
    for scn in scns + scns[::2]:
        cache.get(scn, get_protocol(scn.protocol))
    bad = _mismatches(cache, scns, rng)
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"


def test_preset_model_is_model_of() -> None:
    """The compiled core's preset -> ordering model look-up (`responder.preset_model`) says what
    `presets.model_of` says, for every preset and for a name no preset has."""
    from epfuzz.ir.presets import model_of
    from epfuzz.sim.responder import preset_model
    for name in [*PRESETS, "no-such-preset"]:
        assert preset_model(name) == model_of(name), name
    assert {preset_model(n) for n in PRESETS} >= {"pcie", "nvlink", "mixed"}


def test_the_responder_attrs_by_index_are_its_shared_objects() -> None:
    """`emit` reads a TLP's Attrs from `_BY_INDEX` where a run has at most two requester IDs: the very objects
    `Responder.attrs` hands out (the adversary's pass table is keyed by their identity), for every type, RO,
    IDO and requester ID."""
    from epfuzz.sim.responder import _BY_INDEX, _TYPES, Responder

    for ido in (False, True):
        for nf in (1, 2):
            scn = Scenario().with_path("knobs.ido", ido).with_path("knobs.num_functions", nf)
            r = Responder(scn, 4, 0)
            for ti, tp in enumerate(_TYPES):
                for ro in (False, True):
                    for qp in range(4):
                        assert _BY_INDEX[(ti * 2 + ro) * 4 + r.ido_at + qp % nf] is r.attrs(tp, ro, qp)
