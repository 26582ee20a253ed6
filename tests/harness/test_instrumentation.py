"""Nothing of epfuzz is line-instrumented, whichever way a harness starts (issue 34.2).

`import epfuzz` put epfuzz's own import hook ahead of atheris', so `python harnesses/x_fuzzer.py`
loaded the emulator uninstrumented and `python -m` instrumented it: coverage depended on the entry
point. Now no harness asks atheris to instrument anything; libFuzzer's coverage is the semantic
features (epfuzz.search.feedbacks as counters). Checked by libFuzzer's own coverage lines, which
are the same for both entry points and start at a handful of features, not at the hundreds of
edges line coverage of the emulator gives.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")
ROOT = Path(__file__).resolve().parents[2]

def _cov(cmd: list[str], tmp: Path) -> list[int]:
    p = subprocess.run([*cmd, "-runs=150", "-seed=1", "--keep-going"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300, env={"EPFUZZ_FINDINGS_DIR": str(tmp), **_env()})
    assert "Done 150 runs" in p.stderr, p.stderr[-2000:]
    return [int(x) for x in re.findall(r"cov: (\d+)", p.stderr)]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("EPFUZZ_")}


def test_both_entry_points_see_the_same_coverage_and_it_is_the_features(tmp_path):
    script = _cov([sys.executable, "harnesses/deep_gdr_fuzzer.py"], tmp_path)
    module = _cov([sys.executable, "-m", "harnesses.deep_gdr_fuzzer"], tmp_path)
    assert script == module
    assert script[0] < 40, script[:3]      # INITED: the first inputs' features, no emulator edges
    assert script[-1] > script[0]          # the features grow as libFuzzer finds new orderings
