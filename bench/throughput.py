#!/usr/bin/env python3
"""Emulator throughput figures for `make bench` (issue 14), in CPU time of this process.

The bench machine is shared (2 cores, other work running), so every rate here is
executions per second of `time.process_time()`, not of the wall clock: it counts
only the CPU this process got, and each figure is the fastest of many short passes of
the same work, the figures of one measurement taking their passes in turn
(`bench/meter.py` says why: the host's load moves CPU time too). Parts:

- `rates`: random decoded scenarios in-process, per protocol of the zoo and for
  `dispatch_any` (the harness's), and the DeepEP #661 seed;
- `scaling`: CPU cost per scenario against packets per run (16, 64, 256) and
  epochs (1, 4), on fixed `deepep_v2_dispatch` scenarios;
- `instrumentation`: the same random loop with atheris instrumentation of one
  module group at a time (each in a fresh interpreter, so nothing else is
  instrumented), as the ratio to the uninstrumented rate, both on the pure-Python path
  (EPFUZZ_PURE=1: atheris instruments Python bytecode; the harnesses themselves run
  the compiled core, uninstrumented, since issue 34.2); `path_rates(pure=True)` gives
  the uninstrumented pure-path rates beside the compiled ones.

    .venv/bin/python bench/throughput.py            # all of it, JSON on stdout
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from meter import Meter, interleave  # noqa: E402

#: module groups whose instrumentation cost is measured (atheris `include` prefixes)
GROUPS: dict[str, list[str]] = {
    "decoder": ["epfuzz.encoding.codec", "epfuzz.encoding.codec_compile", "epfuzz.encoding.plancore",
                "epfuzz.ir.fields", "epfuzz.ir.choices", "epfuzz.ir.scenario"],
    "protocols": ["epfuzz.protocols", "epfuzz.ir.opmake"],
    "emulator": ["epfuzz.sim"],
    "oracle": ["epfuzz.model.oracle", "epfuzz.ir.payload", "epfuzz.model.epoch"],
    "all epfuzz (the harnesses)": ["epfuzz"],
}


def random_inputs(n: int = 500, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96))) for _ in range(n)]


#: executions per pass, at least: a pass of one scenario (the #661 seed, a scaling row) repeats it, each time
#: from an emptied form cache as before, so that a pass lasts tens of milliseconds, not tens of microseconds
PASS_EXECS = 200


def fresh_meter(items: list[bytes], proto: str, preset: str = "spec", cached: bool = True,
                pass_execs: int = PASS_EXECS) -> Meter:
    """A `Meter` of decode + simulate over `items`, warmed up (the plan, the caches, the compiled decoder).

    The built-form cache (`epfuzz.sim.engine.FORMS`) is emptied before each pass over `items`, so every
    scenario is built fresh (a fresh scenario's cost); `cached=False` goes around it altogether (a full
    build, what one repeated scenario costs without the cache)."""
    from epfuzz.encoding import codec
    from epfuzz.protocols import get_protocol
    from epfuzz.sim import engine

    resolved = get_protocol(proto)
    forms = getattr(engine, "FORMS", None)
    reps = max(1, -(-pass_execs // max(len(items), 1)))

    def simulate(scn: Any, p: Any) -> Any:
        if cached:
            return engine.simulate(scn, p)
        return engine.replay(engine.build(scn, p), p)

    def one_pass() -> int:
        for _ in range(reps):
            if forms is not None:
                forms.clear()
            for d in items:
                simulate(codec.decode(d, proto, preset), resolved)
        return reps * len(items)

    for d in items[:50]:
        simulate(codec.decode(d, proto, preset), resolved)
    return Meter(one_pass)


def rate(items: list[bytes], proto: str, preset: str = "spec", seconds: float = 4.0, cached: bool = True) -> float:
    """Scenarios per CPU second, decode + simulate over `items` (`fresh_meter`): the fastest of its passes in
    `seconds` of CPU (bench/meter.py says why)."""
    m = fresh_meter(items, proto, preset, cached)
    interleave([m], seconds)
    return m.best


class FreshRates:
    """The fresh-scenario figures' meters (`dispatch_any`, the #661 protocol and seed, the zoo), measured in one
    or more sittings whose passes are pooled: `bench/run.py` sits twice, minutes apart, so that a busy spell of
    the host does not hold every pass of a figure (one 16-second sitting on the device host read fresh
    `dispatch_any` 6,855/s at best, the next, a minute later, 9,337; 2026-12-05)."""

    def __init__(self) -> None:
        from epfuzz.continuous.seeds import SEED_661
        from epfuzz.encoding import codec
        from epfuzz.protocols import ZOO

        items = random_inputs()
        seed = codec.load_dict(SEED_661)
        self.meters = {"emulator_random_exec_per_s": fresh_meter(items, "dispatch_any"),
                       "emulator_661_random_exec_per_s": fresh_meter(items, "deepep_v2_dispatch"),
                       "emulator_661_seed_exec_per_s": fresh_meter([codec.encode(seed)], seed.protocol, seed.preset)}
        self.zoo = {row.bad: fresh_meter(items, row.bad) for row in ZOO}

    def sit(self, seconds: float) -> None:
        """Passes of every figure in turn over `4 * seconds` of CPU (as long as the four windows of `seconds`
        they once took one after another)."""
        interleave([*self.meters.values(), *self.zoo.values()], 4 * seconds)

    def figures(self) -> dict[str, Any]:
        """Each figure's fastest pass, the medians beside."""
        out: dict[str, Any] = {k: round(m.best) for k, m in self.meters.items()}
        out["emulator_zoo_random_exec_per_s"] = {k: round(m.best) for k, m in self.zoo.items()}
        out["emulator_zoo_mean_exec_per_s"] = round(sum(m.best for m in self.zoo.values()) / len(self.zoo))
        medians = {k: round(m.median) for k, m in self.meters.items()}
        medians["emulator_zoo_mean_exec_per_s"] = round(sum(m.median for m in self.zoo.values()) / len(self.zoo))
        out["medians"] = medians
        out["passes"] = min(len(m.rates) for m in [*self.meters.values(), *self.zoo.values()])
        return out


def rates(seconds: float = 4.0) -> dict[str, Any]:
    """The fresh-scenario figures of one sitting (`FreshRates`)."""
    r = FreshRates()
    r.sit(seconds)
    return r.figures()


#: the deep shape of the schedule-only figure (issue 31): a deep-zoo protocol's DeepEP BF16 slot (14,400
#: bytes) at MPS 128, 113 TLPs a slot, two tokens on one channel
DEEP_SHAPE: dict[str, Any] = {"protocol": "deep_ro_signal", "preset": "spec", "chunking": {"max_payload": 128},
                              "payload": {"num_tokens": 2}, "topology": {"num_channels": 1}}


def schedules(n: int = 500, seed: int = 31) -> list[tuple[Any, ...]]:
    """`n` random PCIe schedules of 1-4 overtakes (indices wrap modulo the run's TLPs)."""
    from epfuzz.ir.scenario import Overtake

    rng = random.Random(seed)
    return [tuple(Overtake("pcie", rng.randrange(1024), rng.randint(1, 64)) for _ in range(rng.randint(1, 4)))
            for _ in range(n)]


def schedule_meter(scn: Any, times: int = 2) -> Meter:
    """A `Meter` of schedule-only executions: one configuration, a new schedule each execution, through
    `simulate` (its built form comes from the cache after the first; the schedule is applied and replayed);
    a pass is the 500 schedules `times` times."""
    from epfuzz.protocols import get_protocol
    from epfuzz.sim.engine import simulate

    proto = get_protocol(scn.protocol)
    scns = [scn.replace(schedule=s) for s in schedules()] * times
    for x in scns[:50]:
        simulate(x, proto)

    def one_pass() -> int:
        for x in scns:
            simulate(x, proto)
        return len(scns)

    return Meter(one_pass)


def schedule_rate(scn: Any, seconds: float = 2.0) -> float:
    """Schedule-only executions per CPU second (`schedule_meter`), the fastest pass in `seconds` of CPU."""
    m = schedule_meter(scn)
    interleave([m], seconds)
    return m.best


def deep_shape() -> Any:
    from epfuzz.encoding import codec

    return codec.load_dict(DEEP_SHAPE)


def tlp_units(scn: Any) -> int:
    from epfuzz.protocols import get_protocol
    from epfuzz.sim.engine import build

    return sum(t.n for t in build(scn, get_protocol(scn.protocol)).tlps)


def guided_rate(execs: int = 1500) -> dict[str, Any]:
    """The guided engine's executions per CPU second on each deep-zoo bad protocol (`execs` steps from an
    empty corpus, seed 1; a step is one execution, a finding does not stop it), and their mean: one run each,
    from cold caches as a user's run starts (a second run of the same steps finds the first's built forms and
    images: the fastest of three read 7-21% above the first, review 2026-12-05)."""
    from epfuzz.protocols import get_protocol
    from epfuzz.protocols.deep import DEEP_ZOO
    from epfuzz.search.engines.guided import Guided

    out: dict[str, Any] = {}
    for _, _, bad, _ in DEEP_ZOO:
        loop = Guided(bad, get_protocol(bad), 1)
        t0 = time.process_time()
        for _ in range(execs):
            loop.step()
        out[bad] = round(execs / (time.process_time() - t0))
    out["mean"] = round(sum(v for v in out.values()) / len(DEEP_ZOO))
    return out


class ScheduleRates:
    """The schedule-only figures' meters (the #661 and deep shapes), in one or more sittings (`FreshRates`)."""

    def __init__(self) -> None:
        from epfuzz.continuous.seeds import SEED_661
        from epfuzz.encoding import codec

        self.seed, self.deep = codec.load_dict(SEED_661), deep_shape()
        self.m661, self.mdeep = schedule_meter(self.seed), schedule_meter(self.deep)

    def sit(self, seconds: float) -> None:
        interleave([self.m661, self.mdeep], 2 * seconds)

    def figures(self) -> dict[str, Any]:
        return {"schedule_only_661_exec_per_s": round(self.m661.best),
                "schedule_only_661_tlps": tlp_units(self.seed),
                "schedule_only_deep_exec_per_s": round(self.mdeep.best),
                "schedule_only_deep_tlps": tlp_units(self.deep),
                "schedule_only_medians": {"schedule_only_661_exec_per_s": round(self.m661.median),
                                          "schedule_only_deep_exec_per_s": round(self.mdeep.median)}}


def schedule_rates(seconds: float = 2.0) -> dict[str, Any]:
    """The schedule-only figures of one sitting (passes interleaved over `2 * seconds` of CPU) and the guided
    engine's."""
    r = ScheduleRates()
    r.sit(seconds)
    return {**r.figures(), "guided_deep_exec_per_s": guided_rate()}


def path_rates(pure: bool, seconds: float = 4.0) -> dict[str, Any]:
    """`rates()` in a child process on one emulator path: the compiled one (if built) or the pure sources."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "EPFUZZ_PURE"}
    if pure:
        env["EPFUZZ_PURE"] = "1"
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "import throughput\nfrom epfuzz.core import native\nfrom epfuzz.infra.proc import tune_gc\ntune_gc()\n"
            f"out = throughput.rates({seconds}); out.update(throughput.schedule_rates({seconds / 2}))\n"
            "out['path'] = native.running(); print(json.dumps(out))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def _scaling_scenario(packets: int, epochs: int) -> Any:
    """A `deepep_v2_dispatch` scenario whose run has about `packets` packets over `epochs` epochs."""
    from epfuzz.encoding import codec

    doc: dict[str, Any] = {"protocol": "deepep_v2_dispatch",
                           "payload": {"hidden_bytes": 1008, "epochs": epochs, "num_tokens": 1},
                           "chunking": {"mtu": 256, "max_payload": 256},
                           "signal": {"interval": 4},
                           "schedule": [{"stage": "pcie", "index": 7 * i + 3, "distance": 6} for i in range(4)]}
    best = codec.load_dict(doc)
    for tokens in range(1, 65):
        doc["payload"]["num_tokens"] = tokens
        try:
            scn = codec.load_dict(doc)
        except Exception:  # noqa: BLE001 - past the packet budget
            break
        if _packets(scn) > packets:
            break
        best = scn
    return best


def _packets(scn: Any) -> int:
    from epfuzz.protocols import get_protocol
    from epfuzz.sim.engine import build

    return len(build(scn, get_protocol(scn.protocol)).packets)


def scaling(seconds: float = 2.0) -> list[dict[str, Any]]:
    """CPU microseconds per scenario (and per packet) at 16, 64, 256 packets a run, 1 and 4 epochs."""
    from epfuzz.encoding import codec

    rows = []
    for epochs in (1, 4):
        for packets in (16, 64, 256):
            scn = _scaling_scenario(packets, epochs)
            fresh = fresh_meter([codec.encode(scn)], scn.protocol, scn.preset, cached=False, pass_execs=20)
            sched = schedule_meter(scn, times=1)
            interleave([fresh, sched], 2 * seconds, at_least=3)
            r, sr = fresh.best, sched.best
            n = _packets(scn)
            rows.append({"epochs": epochs, "target_packets": packets, "packets": n, "tlps": tlp_units(scn),
                         "tokens": scn.payload.num_tokens, "us_per_scenario": round(1e6 / r, 1),
                         "us_per_packet": round(1e6 / r / n, 2), "us_per_schedule": round(1e6 / sr, 1)})
    return rows


def modules_outside(prefixes: list[str]) -> list[str]:
    """Every epfuzz module not under one of `prefixes`, by file (atheris excludes modules by full name)."""
    names = []
    for f in sorted((ROOT / "epfuzz").rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return [n for n in names if not any(n == p or n.startswith(p + ".") for p in prefixes)]


def instrumented_child(group: str, body: str = "") -> str:
    """The code of a fresh interpreter that imports epfuzz with only `group`'s modules instrumented, checks
    that they were (`check_instrumented`), then runs `body`.

    atheris' `include` selects whole top-level packages (`epfuzz.encoding.codec` means all of
    `epfuzz`), so a group is instrumented as include=["epfuzz"] minus the other modules. The pure path's
    finder (`epfuzz.core.native.PureFinder`, which loads the compiled set's sources) is installed first:
    atheris instruments what the finders on `sys.meta_path` when its block starts load, so with the finder
    installed inside the block the whole compiled set (the emulator, the oracle, the decoder's loop, the
    built-in protocols) ran uninstrumented and the table read slowdowns below 1 (2026-12-04). The measured
    protocol is resolved inside the block too: the registry imports its module (and what that imports) on use.
    """
    exclude = modules_outside(GROUPS[group])
    return ("import sys, atheris, json\n"
            f"sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "import epfuzz.core.native\n"
            f"with atheris.instrument_imports(include=['epfuzz'], exclude={exclude!r}):\n"
            "    import epfuzz.encoding.codec, epfuzz.sim.engine, epfuzz.protocols\n"
            "    epfuzz.protocols.get_protocol('dispatch_any')\n"  # the registry imports a protocol's module on use
            "import throughput\n"
            f"throughput.check_instrumented({GROUPS[group]!r})\n" + body)


def check_instrumented(prefixes: list[str]) -> None:
    """Fail unless every one of `prefixes` has a loaded module with a function atheris instrumented (its
    code holds the atheris module among its constants): a figure of an uninstrumented run is not one."""
    import inspect

    import atheris

    def instrumented(mod: Any) -> bool:
        return any(inspect.isfunction(f) and f.__module__ == mod.__name__
                   and any(c is atheris for c in f.__code__.co_consts) for f in vars(mod).values())

    for p in prefixes:
        mods = [m for n, m in list(sys.modules.items()) if m is not None and (n == p or n.startswith(p + "."))]
        if not any(instrumented(m) for m in mods):
            raise SystemExit(f"bench: atheris instrumented no module of {p} ({len(mods)} loaded)")


def instrumented_rate(group: str, seconds: float) -> float:
    """The random-scenario rate with only `group`'s modules instrumented (a fresh interpreter)."""
    code = instrumented_child(
        group, f"print(json.dumps(throughput.rate(throughput.random_inputs(), 'dispatch_any', seconds={seconds})))\n")
    # the pure path, as the baseline: nothing selects it under atheris any more (issue 34.2), and against the
    # compiled path a ratio would mix instrumentation with compilation
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "EPFUZZ_PURE": "1"})
    return float(out.stdout.strip().splitlines()[-1])


def pure_rate(seconds: float) -> float:
    """The uninstrumented random-scenario rate on the pure-Python path (a fresh interpreter)."""
    import os

    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "import throughput\n"
            f"print(json.dumps(throughput.rate(throughput.random_inputs(), 'dispatch_any', seconds={seconds})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "EPFUZZ_PURE": "1"})
    return float(out.stdout.strip().splitlines()[-1])


def instrumentation(seconds: float = 3.0) -> dict[str, Any]:
    """Slowdown per instrumented group against the uninstrumented pure-Python path.

    Both sides run the pure path (EPFUZZ_PURE=1): against the compiled one the ratios would mix
    instrumentation with compilation.
    """
    base = pure_rate(seconds)
    out: dict[str, Any] = {"uninstrumented_exec_per_s": round(base), "path": "pure"}
    for group in GROUPS:
        r = instrumented_rate(group, seconds)
        out[group] = {"exec_per_s": round(r), "slowdown": round(base / r, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0],
                            epilog="No options: every part (minutes of CPU), JSON on stdout; nothing is written "
                                   "(bench/run.py records these figures).").parse_args(argv)
    from epfuzz.infra.proc import tune_gc

    tune_gc()  # the collector as the CLI and the harnesses set it (`bench/run.py` does the same)
    print(json.dumps({"statistic": "CPU time; each rate the fastest of its short passes, the passes of a part's "
                                   "rates taken in turn (bench/meter.py); `medians` the median passes",
                      "rates": {**rates(), **schedule_rates()}, "scaling": scaling(),
                      "instrumentation": instrumentation()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
