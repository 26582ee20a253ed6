"""bench/search.py's libFuzzer trials (issue 34.7): a plug-in protocol runs under the plug-in harness,
and a trial whose harness never fuzzed is an error, not a result of zero executions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_search():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import search
        yield search
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_a_plugin_protocol_runs_under_the_clusterfuzzlite_harness(bench_search):
    r = bench_search.libfuzzer("libfuzzer-cfl", "tests.search.many_tokens:ManyTokens", 1, 120, execs=40)
    assert r["execs"] > 0 or r["found"], r


def test_a_harness_that_never_fuzzed_is_an_error_not_a_trial(bench_search):
    with pytest.raises(SystemExit, match="ran no executions"):
        bench_search.libfuzzer("libfuzzer-cfl", "tests.search.no_such_module:Nothing", 1, 120, execs=40)
