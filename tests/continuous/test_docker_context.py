"""The ClusterFuzzLite/OSS-Fuzz image copies the checkout (`COPY . $SRC/epfuzz`): a working copy's virtualenv,
the host's compiled emulator and its runs must stay out of it (operator trial 1205, item 10: there was no
.dockerignore, so a `make install`ed checkout sent its .venv and a .so built for the host's Python)."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def excluded(path: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for these patterns: a pattern excludes a path it matches or any path under one it
    matches; `**/` matches any number of leading folders."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pat in patterns:
        forms = [pat, pat.removeprefix("**/")] if pat.startswith("**/") else [pat]
        for prefix in prefixes:
            tails = ["/".join(prefix.split("/")[j:]) for j in range(len(prefix.split("/")))]
            if any(fnmatch.fnmatchcase(prefix, f) for f in forms) or (
                    pat.startswith("**/") and any(fnmatch.fnmatchcase(t, forms[1]) for t in tails)):
                return True
    return False


def test_a_working_copys_own_files_stay_out_of_the_image():
    pats = _patterns()
    for path in (".venv/bin/python", "epfuzz/_core__mypyc.cpython-311-x86_64-linux-gnu.so",
                 "epfuzz/_core_manifest.json", "runs/deepep_v2_dispatch_fuzzer-guided-20261205/progress.csv",
                 "epfuzz/sim/__pycache__/x.cpython-311.pyc", ".whl/atheris-3.1.0.whl", "site/index.html",
                 "epfuzz.egg-info/PKG-INFO", "crash-0123"):
        assert excluded(path, pats), path


def test_what_build_sh_needs_is_copied():
    pats = _patterns()
    for path in ("epfuzz/sim/engine.py", "corpus/deepep_v2_dispatch_fuzzer.verdicts", "harnesses/tma_flag_fuzzer.py",
                 ".clusterfuzzlite/build.sh", "pyproject.toml", "setup.py", "Makefile", "README.md", "LICENSE"):
        assert not excluded(path, pats), path
    if (ROOT / ".git").exists():  # every file the repository tracks is one the image may need
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split()
        assert len(tracked) > 500 and not [p for p in tracked if excluded(p, pats)]
