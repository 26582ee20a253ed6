#!/usr/bin/env python3
"""Fixed protocols under the two in-process searches: N sampled schedules and N random inputs each.

    python bench/fixed_search.py [--execs N] [--set deep|zoo|all] [NAME ...]   # writes bench/fixed_search.md

The schedule sampler aims its reorderings at signals and trailers, so it is the harder
test for a fixed protocol than random bytes; bench/fixed_budget.py is the same check
through the libFuzzer harness. Any finding here is a false alarm (a model bug).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import EpfuzzError  # noqa: E402
from epfuzz.protocols import ZOO, get_protocol  # noqa: E402
from epfuzz.protocols.deep import DEEP_ZOO  # noqa: E402
from epfuzz.search.sampler import SamplerSearch  # noqa: E402
from epfuzz.sim.engine import simulate  # noqa: E402


def one(name: str, n: int, seed: int = 11) -> tuple[str, int, int, float]:
    proto = get_protocol(name)
    sampler, rng = SamplerSearch(name, proto, seed), random.Random(seed)
    found, t0 = 0, time.perf_counter()
    for _ in range(n):
        for scn in (sampler.next_scenario(), codec.decode(rng.randbytes(rng.randrange(0, 129)), name)):
            found += simulate(scn, proto).violation is not None
    return name, 2 * n, found, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="fixed protocols (default: the set's)")
    ap.add_argument("--execs", type=int, default=50_000, help="per search (sampler, random)")
    ap.add_argument("--set", default="deep", choices=("deep", "zoo", "all"))
    a = ap.parse_args()
    for n in a.names:  # a misspelt name is one line, before any table is rewritten
        try:
            get_protocol(n)
        except EpfuzzError as e:
            ap.error(str(e))
    rows = {"deep": DEEP_ZOO, "zoo": ZOO, "all": (*DEEP_ZOO, *ZOO)}[a.set]
    names = a.names or [r[3] for r in rows]
    out = [f"Fixed protocols, {a.execs} sampled schedules + {a.execs} random inputs each (seed 11), "
           f"{time.strftime('%Y-%m-%d')}:", "", "| fixed protocol | executions | findings | seconds |",
           "| --- | --- | --- | --- |"]
    bad = 0
    for name in names:
        name, execs, found, secs = one(name, a.execs)
        bad += found
        out.append(f"| `{name}` | {execs} | {found} | {secs:.0f} |")
        print(out[-1], flush=True)
        write_atomic(ROOT / "bench" / "fixed_search.md", ("\n".join(out) + "\n").encode())
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
