"""bench/run.py's libFuzzer figures: a harness that never ran is an error, not a rate of 0 exec/s (a device run
whose harness could not import epfuzz once recorded harness_exec_per_s 0.0 in bench/results.json)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_a_harness_that_does_not_run_is_an_error(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import run

    script = tmp_path / "broken_fuzzer.py"
    script.write_text("import epfuzz_no_such_module\n")
    with pytest.raises(SystemExit) as e:
        run.libfuzzer(script, ["-max_total_time=1"])
    assert "broken_fuzzer.py did not run" in str(e.value) and "epfuzz_no_such_module" in str(e.value)
