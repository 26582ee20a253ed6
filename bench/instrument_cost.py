#!/usr/bin/env python3
"""What atheris' instrumentation of each part costs per execution (CPU time, fixed inputs).

    python bench/instrument_cost.py all|nosim|none PROTOCOL [N]

Runs the harness's test_one_input over N random inputs (seed 5) in a process whose
epfuzz modules were imported under bench/search.py's instrumentation mode, and
prints executions per CPU second. CPU time, not wall time, because the machine is
shared; the same inputs for every mode, because under libFuzzer the input mix
differs with the feedback and would confound the comparison.
"""

import random
import sys
import time
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import search  # noqa: E402


def main() -> None:
    mode, name = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 250
    spec = eval("dict(" + search.INSTRUMENT[mode]() + ")")  # noqa: S307 - our own literal
    with atheris.instrument_imports(**spec):
        from epfuzz.harness import Harness
    h = Harness(name, keep_going=True)
    rng = random.Random(5)
    inputs = [rng.randbytes(rng.randrange(0, 129)) for _ in range(n)]
    t0 = time.process_time()
    for d in inputs:
        h.test_one_input(d)
    print(mode, name, round(n / (time.process_time() - t0)), "exec/s (cpu time)")


if __name__ == "__main__":
    main()
