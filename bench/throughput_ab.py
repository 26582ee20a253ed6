#!/usr/bin/env python3
"""Issue 31's emulator rates, this tree against an older commit, in one invocation on one machine.

The fresh-scenario and schedule-only figures of `bench/throughput.py` (`rates`, `schedule_rate`) move by
tens of percent with a shared host's load from one minute to the next, so a session's gain is the ratio of
two trees measured together: each (tree, round) runs in a fresh interpreter with the collector as the CLI
sets it, the rounds one after another with the trees interleaved within each, `--parallel` at a time; each
figure's median over the rounds is kept with every value beside it. Both trees run *this* tree's
measuring code (bench/throughput.py) over their own `epfuzz`, so the older tree must have the calls it
makes (`codec.decode`, `engine.simulate`, the zoo, the #661 seed): b51aa9b (2026-12-03) and later do.

    .venv/bin/python bench/throughput_ab.py --base b51aa9b --out /tmp/ab.json
    .venv/bin/python bench/throughput_ab.py --base-tar base.tar --parallel 4 --out ...   # the device host
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from trees import UNEDIT, add_base_arguments, build, child_env, unpack  # noqa: E402

from epfuzz.cases.corpus import write_atomic  # noqa: E402  (this tree's; the older one runs in its own interpreters)

#: one round in a fresh interpreter: the tree's `epfuzz` imported first, so that every later `epfuzz.*`
#: import (bench/throughput.py's included, which puts this tree on sys.path) resolves under that tree
ONE = r"""
import json, sys
tree, bench, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
sys.path.insert(0, tree)
{unedit}
import epfuzz
assert epfuzz.__file__.startswith(tree), epfuzz.__file__
from epfuzz.infra.proc import tune_gc
tune_gc()
sys.path.insert(0, bench)
import throughput
from epfuzz.continuous.seeds import SEED_661
from epfuzz.core.native import running
from epfuzz.encoding import codec
out = throughput.rates(seconds)
out["schedule_only_661_exec_per_s"] = round(throughput.schedule_rate(codec.load_dict(SEED_661), seconds / 2))
out["schedule_only_deep_exec_per_s"] = round(throughput.schedule_rate(throughput.deep_shape(), seconds / 2))
out["path"] = running()
print(json.dumps(out))
""".replace("{unedit}", UNEDIT)

#: the figures compared (issue 31's rows); the zoo's per-protocol rates are kept in the runs
FIGURES = ("emulator_random_exec_per_s", "emulator_661_random_exec_per_s", "emulator_661_seed_exec_per_s",
           "emulator_zoo_mean_exec_per_s", "schedule_only_661_exec_per_s", "schedule_only_deep_exec_per_s")


def one(tree: Path, seconds: float) -> dict[str, Any]:
    env = child_env()
    res = subprocess.run([sys.executable, "-c", ONE, str(tree), str(ROOT / "bench"), str(seconds)],
                         capture_output=True, text=True, env=env, cwd=tree, check=False)
    if res.returncode != 0:
        raise SystemExit(f"throughput_ab: {tree}: {(res.stderr.strip().splitlines() or ['failed'])[-1]}")
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the lower middle one of an even count) and every value."""
    return {f: {"median": sorted(r[f] for r in rounds)[(len(rounds) - 1) // 2], "all": [r[f] for r in rounds]}
            for f in FIGURES}


#: how the rendered table names each figure
LABELS = {"emulator_random_exec_per_s": "fresh random `dispatch_any` scenarios",
          "emulator_661_random_exec_per_s": "fresh random #661-protocol scenarios",
          "emulator_661_seed_exec_per_s": "the DeepEP #661 seed",
          "emulator_zoo_mean_exec_per_s": "fresh random scenarios, zoo mean",
          "schedule_only_661_exec_per_s": "schedule-only, #661 shape",
          "schedule_only_deep_exec_per_s": "schedule-only, deep shape"}


def render(doc: dict[str, Any], guided: dict[str, Any] | None = None) -> str:
    """The figures of this tree against the older one (and the guided engine's, from bench/guided_ab.json,
    whose older tree may be another commit): medians per CPU second, every round's value in the data."""
    lines = ["| exec/s per CPU second | older tree | its median | this tree | ratio |",
             "| --- | --- | --- | --- | --- |"]
    for f in FIGURES:
        lines.append(f"| {LABELS[f]} | `{doc['base'].split()[0]}` | {doc['figures']['base'][f]['median']:,} | "
                     f"{doc['figures']['this'][f]['median']:,} | {doc['ratio'][f]}x |")
    if guided is not None:
        lines.append(f"| guided engine, deep-zoo mean | `{guided['base'].split()[0]}` | {guided['mean']['base']:,} | "
                     f"{guided['mean']['this_tuned_gc']:,} | {guided['ratio']}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_base_arguments(ap)
    ap.add_argument("--seconds", type=float, default=4.0, help="CPU seconds of each rate in bench/throughput.py")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of each tree; the median is kept")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.parallel < 1 or args.seconds <= 0:
        ap.error("--repeat and --parallel must be >= 1 and --seconds > 0")
    with tempfile.TemporaryDirectory() as tmp:
        base, name = unpack(args, Path(tmp))
        base_build = "not built (--no-build)" if args.no_build else build(base)
        jobs = [tree for _ in range(args.repeat) for tree in (base, ROOT)]
        with ThreadPoolExecutor(args.parallel) as pool:
            got = list(pool.map(lambda t: one(t, args.seconds), jobs))
    runs = {"base": [r for t, r in zip(jobs, got) if t != ROOT], "this": [r for t, r in zip(jobs, got) if t == ROOT]}
    med = {k: summary(v) for k, v in runs.items()}
    out = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()} python {platform.python_version()}",
           "cores": os.cpu_count(), "parallel": args.parallel, "repeat": args.repeat, "seconds": args.seconds,
           "base": name, "base_build": base_build,
           "method": "bench/throughput.py's rates (fresh scenarios: the built-form cache emptied every pass) and "
                     "schedule-only rates per CPU second, each the fastest of its interleaved passes "
                     "(bench/meter.py), each (tree, round) in a fresh interpreter with the "
                     "collector as the CLI sets it, both trees interleaved in one invocation on one machine",
           "runs": runs, "figures": med,
           "ratio": {f: round(med["this"][f]["median"] / med["base"][f]["median"], 2) for f in FIGURES}}
    write_atomic(Path(args.out), (json.dumps(out, indent=2) + "\n").encode())
    print(json.dumps(out["ratio"]))
    print("median exec/s, base -> this:", ", ".join(
        f"{f.removesuffix('_exec_per_s')} {med['base'][f]['median']} -> {med['this'][f]['median']}" for f in FIGURES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
