"""The per-pair checks every zoo family of issue 30 shares, written once.

A test module describes its pairs as data and takes the tests:

    FAMILY = Family(pull.PAIRS, {
        "read_flush_unfenced": Bad(seed=1, budget=100, kind="stale-accept", clause="IB-read-unfenced",
                                   small={"knobs": {"reorder_window": 4}, "payload": {"num_tokens": 2}}),
        ...})
    globals().update(FAMILY.tests())

which defines, by these names (so `-k` and the test ids stay as they were):

- test_pairs_have_sources_harnesses_and_seeds: bad promises a finding and fixed a clean run (on the small
  shape too), both name sources and have a harness and corpus seeds.
- test_bad_found_by_the_sampler_from_nothing[bad]: the schedule sampler (the harness's search), seed
  `seed`, finds the bad form within `budget` executions; the finding is of `kind` and, where `clause` is
  given, rests on it (a TLP inversion's rule or a packet's stale clause) and `explain` names it among its
  overtakes.
- test_small_shape_explored[bad]: arrival order alone breaks the small shape exactly when
  `in_arrival_order` (then `explain` names the clause too), and exhaustive exploration finds `kind`.
- test_fixed_small_shape_proven_clean_on_every_platform[bad] (slow): exploration proves the fixed form's
  small shape clean for every platform knob neither the preset nor the protocol pins, at each token count
  of `proof_tokens`.
- test_fixed_clean_under_sampler_and_random[fixed] (slow): `fixed_execs` sampled and as many random inputs
  (seed 11), under the pair's preset, all clean.

A new pair of such a family is one more `Bad(...)` entry (and its module's PAIRS). The same checks, one at a
time, for families with tests of their own names (the deep sets): check_registered, sampler_finding,
check_fixed_clean, corner_finding, check_corner_fixed_clean, check_explored.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.search.sampler import SamplerSearch, sample_schedule
from epfuzz.sim.engine import SimRun, simulate
from epfuzz.sim.explore import explore
from epfuzz.triage.explain import explain

ROOT = Path(__file__).resolve().parents[2]
#: the platform knobs a fixed form's proof ranges over (less what its preset or itself pins)
PLATFORM: dict[str, tuple[Any, ...]] = {"nic_relaxed_ordering": (False, True), "atomic_mode": (0, 4),
                                        "hca_o920": (False, True), "adaptive_routing": (False, True)}


@dataclass(frozen=True)
class Bad:
    """What one pair's checks need, keyed by its bad form's name in `Family.bads`."""

    #: the sampler's seed and its budget of executions: the executions to the first finding with that
    #: seed, measured, times ~4 and at least 100 (say the measurement where the pair is defined)
    seed: int
    budget: int
    #: the kind of finding ("stale-accept", "hang", ...)
    kind: str
    #: the smallest scenario fields that show the bug (the fixed form is proven clean on the same shape)
    small: dict[str, Any]
    #: the rule clause the finding rests on, named by `explain` ("" for no check)
    clause: str = ""
    #: the preset the pair is about (its home preset; the sampler's and the fixed runs')
    preset: str = "spec"
    #: arrival order alone shows the bug on the small shape (a logic bug, or bytes the NIC carried)
    in_arrival_order: bool = False


def scenario(name: str, shape: dict[str, Any], **knobs: Any) -> Scenario:
    """The protocol `name` on `shape` (scenario fields by section), knobs added."""
    shape = {**shape, "knobs": {**shape.get("knobs", {}), **knobs}}
    return codec.load_dict({"protocol": name, **shape})


def rests_on(run: SimRun, clause: str) -> bool:
    """The finding used the clause: a TLP inversion's rule, or a packet's stale (source-layer) clause."""
    return clause in {rule for _, _, rule in run.tlp_inversions} | {p.stale for p in run.packets}


def names_clause(scn: Scenario, proto: Any, clause: str) -> bool:
    """`explain` lists the clause among its overtakes."""
    return any(line.startswith(f"{clause}: ") for line in explain(scn, proto).overtakes)


def check_registered(bad: str, fixed: str, small: Scenario | None = None) -> None:
    """Bad promises a finding and fixed a clean run (on `small` too, for a promise by preset); both name
    sources and have a harness and corpus seeds."""
    b, f = REGISTRY.items[bad], REGISTRY.items[fixed]
    assert f.expect == "clean", fixed
    assert b.expect == "finding" or not isinstance(b.expect, str), bad
    if small is not None:
        assert b.expected(small) == "finding", bad
        assert f.expected(small.replace(protocol=fixed)) == "clean", fixed
    for name in (bad, fixed):
        assert REGISTRY.items[name].sources, name
        assert (ROOT / "harnesses" / f"{name}_fuzzer.py").exists(), name
        assert any((ROOT / "corpus" / f"{name}_fuzzer").iterdir()), name


def sampler_finding(bad: str, seed: int, budget: int, preset: str = "spec") -> tuple[Scenario, SimRun]:
    """The schedule sampler's (the harness's search's) first finding on the bad form, from nothing, within
    `budget` executions; the test fails if there is none."""
    proto = get_protocol(bad)
    search = SamplerSearch(bad, proto, seed, preset)
    for _ in range(budget):
        scn = search.next_scenario()
        run = simulate(scn, proto)
        if run.violation is not None:
            return scn, run
    pytest.fail(f"{bad}: no finding in {budget} sampled executions (seed {seed})")


def check_fixed_clean(fixed: str, execs: int, preset: str = "spec") -> None:
    """`execs` sampled and as many random inputs (seed 11) on the fixed form, all clean."""
    proto = get_protocol(fixed)
    search = SamplerSearch(fixed, proto, 11, preset)
    rng = random.Random(11)
    for _ in range(execs):
        for scn in (search.next_scenario(), codec.decode(rng.randbytes(rng.randrange(0, 129)), fixed, preset)):
            run = simulate(scn, proto)
            assert run.violation is None, (run.violation.summary(), scn.to_json(None))


def corner_finding(bad: str, base: Scenario, seed: int, budget: int) -> None:
    """Arrival order is safe in the corner `base`, and sampled schedules of it find the bad form."""
    proto = get_protocol(bad)
    assert simulate(base, proto).violation is None  # arrival order is safe: the schedule matters
    rng = random.Random(seed)
    for _ in range(budget):
        if simulate(base.replace(schedule=sample_schedule(base, proto, rng)), proto).violation is not None:
            return
    pytest.fail(f"{bad}: no finding in {budget} sampled schedules of its corner (seed {seed})")


def check_corner_fixed_clean(fixed: str, base: Scenario, execs: int) -> None:
    """`execs` sampled schedules (seed 5) of the corner `base` on the fixed form, all clean."""
    proto = get_protocol(fixed)
    rng = random.Random(5)
    for _ in range(execs):
        run = simulate(base.replace(schedule=sample_schedule(base, proto, rng)), proto)
        assert run.violation is None, (run.violation.summary(), run.scenario.to_json(None))


def check_explored(bad: str, fixed: str, shape: dict[str, Any], kind: str = "stale-accept") -> None:
    """On one small shape some visibility order breaks the bad form (of `kind`), none breaks the fixed one."""
    found = explore(codec.load_dict({"protocol": bad, **shape}), get_protocol(bad), max_states=50_000)
    assert found.violation is not None and found.violation.kind == kind
    proof = explore(codec.load_dict({"protocol": fixed, **shape}), get_protocol(fixed), max_states=400_000)
    assert proof.violation is None


@dataclass(frozen=True)
class Family:
    """One family's pairs (the module's PAIRS: (pattern, bad, fixed)) and each bad form's data."""

    pairs: tuple[tuple[str, str, str], ...]
    bads: dict[str, Bad]
    #: the platform knobs the fixed forms' proof ranges over
    platform: dict[str, tuple[Any, ...]] | None = None
    #: token counts of the fixed forms' proof
    proof_tokens: tuple[int, ...] = (2, 3)
    #: sampled (and as many random) inputs each fixed form runs clean
    fixed_execs: int = 300

    def tests(self) -> dict[str, Callable[..., None]]:
        """The shared tests, by name, for a test module's globals()."""
        fam = self
        bads = sorted(self.bads)
        fixeds = [fixed for _, _, fixed in self.pairs]

        def test_pairs_have_sources_harnesses_and_seeds() -> None:
            assert {bad for _, bad, _ in fam.pairs} == set(fam.bads)
            for _, bad, fixed in fam.pairs:
                check_registered(bad, fixed, scenario(bad, fam.bads[bad].small))

        @pytest.mark.parametrize("bad", bads)
        def test_bad_found_by_the_sampler_from_nothing(bad: str) -> None:
            b = fam.bads[bad]
            scn, run = sampler_finding(bad, b.seed, b.budget, b.preset)
            assert run.violation is not None and run.violation.kind == b.kind, run.violation
            if b.clause:
                assert rests_on(run, b.clause), (run.tlp_inversions, {p.stale for p in run.packets})
                assert names_clause(scn, get_protocol(bad), b.clause), explain(scn, get_protocol(bad)).text()

        @pytest.mark.parametrize("bad", bads)
        def test_small_shape_explored(bad: str) -> None:
            b = fam.bads[bad]
            scn = scenario(bad, b.small)
            proto = get_protocol(bad)
            run = simulate(scn, proto)
            assert (run.violation is not None) == b.in_arrival_order  # else the schedule matters
            if run.violation is not None and b.clause:
                assert names_clause(scn, proto, b.clause), explain(scn, proto).text()
            found = explore(scn, proto, max_states=50_000)
            assert found.violation is not None and found.violation.kind == b.kind

        @pytest.mark.slow
        @pytest.mark.parametrize("bad", bads)
        def test_fixed_small_shape_proven_clean_on_every_platform(bad: str) -> None:
            b, fixed = fam.bads[bad], f"{bad}_fixed"
            proto = get_protocol(fixed)
            pinned = {**PRESETS[b.preset].fixed, **proto.fixed}
            free = {k: v for k, v in (fam.platform or PLATFORM).items() if f"knobs.{k}" not in pinned}
            for values in itertools.product(*free.values()):
                knobs = dict(zip(free, values))
                for tokens in fam.proof_tokens:
                    shape = {**b.small, "payload": {**b.small["payload"], "num_tokens": tokens}}
                    proof = explore(scenario(fixed, shape, **knobs), proto, max_states=400_000)
                    assert proof.violation is None, (knobs, tokens, proof.violation.summary())

        @pytest.mark.slow
        @pytest.mark.parametrize("fixed", fixeds)
        def test_fixed_clean_under_sampler_and_random(fixed: str) -> None:
            bad = next(bad for _, bad, f in fam.pairs if f == fixed)
            check_fixed_clean(fixed, fam.fixed_execs, fam.bads[bad].preset)

        return {f.__name__: f for f in (test_pairs_have_sources_harnesses_and_seeds,
                                        test_bad_found_by_the_sampler_from_nothing, test_small_shape_explored,
                                        test_fixed_small_shape_proven_clean_on_every_platform,
                                        test_fixed_clean_under_sampler_and_random)}
