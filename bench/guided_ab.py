#!/usr/bin/env python3
"""The guided engine's executions per CPU second on the deep zoo, this tree against an older commit (issue 31).

Issue 31's target is relative ("the guided engine's executions per second on the deep set >= 3x today's"):
a figure from another day or machine cannot be divided by this one, so both trees run here, in the same
invocation, on the same machine. The older tree is a `git archive` of the commit (or a tar of one), unpacked
into a temporary folder, with its compiled core built there as `make install` builds it; each (tree,
protocol) runs in a fresh interpreter, `--parallel` at a time, for `--steps` guided steps from an empty
corpus with seed 1 (a step is one execution; a finding does not stop it), and reports steps per CPU second
of that process. This tree runs twice: with the collector as the CLI sets it (`epfuzz.infra.proc.tune_gc`,
what a user's `epfuzz fuzz` runs) and with CPython's defaults, so that its share of the gain is shown apart.

    .venv/bin/python bench/guided_ab.py --base f997269 --out bench/guided_ab.json
    .venv/bin/python bench/guided_ab.py --base-tar base.tar --out ...   # a tree without git (the device)
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

from epfuzz.cases.corpus import write_atomic  # noqa: E402  (this tree's; the older one runs in its own interpreters)

sys.path.insert(0, str(ROOT / "bench"))
from trees import UNEDIT, add_base_arguments, build, child_env, median_run, unpack  # noqa: E402

DEEP = ("deep_ro_signal", "deep_remainder_flag", "deep_flag_write", "deep_notify_qp", "deep_other_qp",
        "deep_imm_other_qp", "deep_gdr", "deep_reset_race")

#: run in a fresh interpreter with the tree first on sys.path: the older tree's engine was `epfuzz.greybox`
ONE = r"""
import json, sys, time
tree, bad, steps, tune = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, tree)
{unedit}
from epfuzz.protocols import get_protocol
try:
    from epfuzz.search.engines.guided import Guided as Engine
    from epfuzz.core.native import running
except ImportError:
    from epfuzz.greybox import Greybox as Engine
    from epfuzz.native import running
if tune:
    from epfuzz.infra.proc import tune_gc
    tune_gc()
loop = Engine(bad, get_protocol(bad), 1)
first = None
t0 = time.process_time()
for i in range(steps):
    if loop.step().run.violation is not None and first is None:
        first = i + 1
dt = time.process_time() - t0
print(json.dumps({"path": running(), "exec_per_s": round(steps / dt, 1), "first_finding": first}))
""".replace("{unedit}", UNEDIT)


def one(tree: Path, bad: str, steps: int, tune: bool) -> dict[str, Any]:
    env = child_env()
    res = subprocess.run([sys.executable, "-c", ONE, str(tree), bad, str(steps), "1" if tune else "0"],
                         capture_output=True, text=True, env=env, cwd=tree, check=False)
    if res.returncode != 0:
        raise SystemExit(f"guided_ab: {tree} {bad}: {res.stderr.strip().splitlines()[-1:]}")
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def mean(rows: dict[str, dict[str, Any]]) -> float:
    return round(sum(r["exec_per_s"] for r in rows.values()) / len(rows), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_base_arguments(ap)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--parallel", type=int, default=max(1, (os.cpu_count() or 2) // 4))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (tree, protocol); the median is kept")
    ap.add_argument("--protocols", default=",".join(DEEP), help="comma-separated (default: the deep zoo's)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base, name = unpack(args, Path(tmp))
        base_build = "not built (--no-build)" if args.no_build else build(base)
        protocols = [p for p in args.protocols.split(",") if p]
        # each (tree, protocol) `--repeat` times, the rounds one after another and the trees interleaved within
        # each: a host whose load drifts during the run slows both trees alike, and the median drops an outlier
        jobs = [(tree, bad, tune) for _ in range(args.repeat) for bad in protocols
                for tree, tune in ((base, False), (ROOT, False), (ROOT, True))]
        with ThreadPoolExecutor(args.parallel) as pool:
            got = list(pool.map(lambda j: one(j[0], j[1], args.steps, j[2]), jobs))
    every: dict[str, dict[str, list[dict[str, Any]]]] = {"base": {}, "this": {}, "this_tuned_gc": {}}
    for (tree, bad, tune), r in zip(jobs, got):
        every["base" if tree != ROOT else "this_tuned_gc" if tune else "this"].setdefault(bad, []).append(r)
    runs = {k: {bad: median_run(rs) for bad, rs in v.items()} for k, v in every.items()}
    out = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()} python {platform.python_version()}",
           "cores": os.cpu_count(), "parallel": args.parallel, "repeat": args.repeat, "steps": args.steps, "seed": 1,
           "base": name, "base_build": base_build,
           "method": "guided steps per CPU second of a fresh interpreter per (tree, protocol), the median of "
                     "`repeat` runs, both trees interleaved in one invocation on one machine; 'this_tuned_gc' is "
                     "what `epfuzz fuzz` runs",
           "runs": runs, "mean": {k: mean(v) for k, v in runs.items()}}
    out["ratio"] = round(out["mean"]["this_tuned_gc"] / out["mean"]["base"], 2)
    write_atomic(Path(args.out), (json.dumps(out, indent=2) + "\n").encode())
    print(json.dumps(out["mean"]), "ratio", out["ratio"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
