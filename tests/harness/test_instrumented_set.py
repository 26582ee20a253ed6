"""What a harness script has atheris instrument: the emulator only when it fuzzes on the sim.

A harness imports epfuzz.harness inside `atheris.instrument_imports`, so every module that import
pulls in is instrumented; on the verbs backend (in the TCG guest) instrumenting the emulator was
a third of a campaign's start-up, for code no input reaches there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = ("import json, sys; sys.argv = ['h_fuzzer.py', *sys.argv[1:]]; import epfuzz.harness; "
         "print(json.dumps(sorted(m for m in sys.modules if m.startswith('epfuzz'))))")


def imported(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    e = {k: v for k, v in os.environ.items() if k != "EPFUZZ_BACKEND"} | (env or {})
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, env=e)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize(("argv", "env"), [((), None), (("--backend=sim",), None),
                                           ((), {"EPFUZZ_BACKEND": "sim"})])
def test_a_sim_harness_imports_the_emulator_and_the_feedback(argv, env):
    mods = imported(*argv, env=env)
    assert {"epfuzz.sim.engine", "epfuzz.backends.sim", "epfuzz.feedback", "epfuzz.epoch"} <= mods


@pytest.mark.parametrize(("argv", "env"), [(("--backend=verbs",), None), ((), {"EPFUZZ_BACKEND": "verbs"}),
                                           (("--backend=cuda",), None)])
def test_another_backends_harness_imports_what_its_runner_calls_and_not_the_emulator(argv, env):
    mods = imported(*argv, env=env)
    assert not any(m.startswith(("epfuzz.sim", "epfuzz.backends.sim", "epfuzz.feedback")) for m in mods), mods
    assert {"epfuzz.epoch", "epfuzz.protocols.opcheck", "epfuzz.oracle", "epfuzz.codec"} <= mods
