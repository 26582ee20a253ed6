#!/usr/bin/env python3
"""Every fixed protocol through its harness for N executions (default 100,000), two at a time: no finding.

    python bench/fixed_budget.py [RUNS]     # writes bench/fixed_budget.md
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.protocols.zoo import ZOO  # noqa: E402

FIXED = [z[3] for z in ZOO] + ["write_imm_signal"]


def one(name: str, runs: int) -> tuple[str, int, float, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py"), str(work),
                            str(ROOT / "corpus" / f"{name}_fuzzer"), f"-runs={runs}", "-seed=11",
                            f"-artifact_prefix={tmp}/", "-print_final_stats=1"], capture_output=True, text=True)
        m = re.search(r"stat::number_of_executed_units:\s+(\d+)", p.stderr)
        crashed = any(Path(tmp).glob("crash-*"))
        return name, int(m.group(1)) if m else 0, time.monotonic() - t0, crashed


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rows = []
    out = ROOT / "bench" / "fixed_budget.md"

    def record(n: str) -> None:
        rows.append(one(n, runs))
        print(rows[-1], flush=True)
        write(rows, runs, out)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(record, FIXED))
    return 1 if any(c for *_, c in rows) else 0


def write(rows: list[tuple[str, int, float, bool]], runs: int, out: Path) -> None:
    """Rewritten after every protocol, so a cut-off run still leaves its rows."""
    md = [f"Fixed protocols, {runs} executions each through the harness (seed corpus, -seed=11), "
          f"{time.strftime('%Y-%m-%d')}:", "", "| fixed protocol | executions | seconds | finding |",
          "| --- | --- | --- | --- |"]
    md += [f"| `{n}` | {e} | {s:.0f} | {'YES' if c else 'none'} |" for n, e, s, c in rows]
    out.write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
