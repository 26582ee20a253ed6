"""The compiled emulator and its pure-Python sources: which one runs, and that both give the reference.

`epfuzz.core.native` picks the path once per process. The in-process equivalence test
(`test_equivalence.py`) covers whichever this process loaded; here one child process
per path checks the same reference and says which path it ran, so `make test` runs
both whenever the extensions are built (and fails if built ones go unused).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from epfuzz.core import native
from tests.conftest import ROOT


def _child(code: str, **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k != "EPFUZZ_PURE"}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def test_this_process_runs_what_was_decided() -> None:
    assert native.running() == native.decide()


@pytest.mark.parametrize("path", ["pure", "compiled"])
def test_path_matches_reference(path: str) -> None:
    """The first 1,000 reference scenarios on each path, each in a child process that names its path."""
    env = {"EPFUZZ_PURE": "1"} if path == "pure" else {}
    if path == "compiled" and native.stale_reason() is not None:
        pytest.skip(f"compiled emulator not usable here: {native.stale_reason()}")
    code = ("import sys; sys.path.insert(0, 'bench'); import equivalence\n"
            "from epfuzz import native\n"
            "n, bad = equivalence.mismatches(1000)\n"
            "print(native.running(), n, len(bad), bad[:2])")
    assert _child(code, **env) == f"{path} 1000 0 []"


def test_atheris_loaded_first_still_gets_the_compiled_core() -> None:
    """Nothing of epfuzz is line-instrumented (issue 34.2): a harness runs the compiled emulator too."""
    pytest.importorskip("atheris")
    if native.stale_reason() is not None:
        pytest.skip(f"compiled emulator not usable here: {native.stale_reason()}")
    assert _child("import atheris\nfrom epfuzz import native; print(native.running())") == "compiled"


def test_a_changed_source_makes_the_build_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    if all(native.extension(n) is None for n in native.COMPILED):
        assert native.stale_reason() == "not every compiled module was built"
        return
    monkeypatch.setattr(native, "digest", lambda names=native.COMPILED: "0" * 64)
    assert native.stale_reason() == "a source changed after the build"
