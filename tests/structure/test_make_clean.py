"""`make clean` removes every build output that .gitignore hides, and nothing a user made."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: one path per kind of build output (each .gitignore pattern must match one of them)
OUTPUTS = (
    ".venv/bin/python", "runs/r/finding-x.json", "build/lib/x.py", "dist/epfuzz-0.1.0-py3-none-any.whl",
    "site/index.html", "epfuzz.egg-info/PKG-INFO", "epfuzz/__pycache__/cli.cpython-311.pyc",
    "tests/cli/__pycache__/t.cpython-311.pyc", "epfuzz/stray.pyc", ".pytest_cache/v/x", ".ruff_cache/x",
    ".mypy_cache/x", ".hypothesis/examples/x", ".cache/x", ".whl/x", ".gl/x", ".cudabuild/x",
    "epfuzz/sim/engine.cpython-311-x86_64-linux-gnu.so", "epfuzz/_core__mypyc.cpython-311-x86_64-linux-gnu.so",
    "epfuzz/protocols/opcheck.cpython-311-x86_64-linux-gnu.so", "epfuzz/_core_manifest.json",
)
#: what fuzzing leaves in the folder it ran in: a user's findings, never removed by a clean
USER_FILES = ("crash-0123abcd", "finding-deepep_v2_dispatch-0123.json")


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_make_clean_leaves_nothing_ignored_but_the_users_findings(tmp_path: Path):
    for name in ("Makefile", ".gitignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "epfuzz").mkdir()
    (tmp_path / "epfuzz" / "cli.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for name in OUTPUTS + USER_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    hit = subprocess.run(["git", "check-ignore", "-v", "--no-index", *OUTPUTS, *USER_FILES], cwd=tmp_path,
                         capture_output=True, text=True).stdout
    used = {line.split(":")[1] for line in hit.splitlines()}
    patterns = {str(i) for i, line in enumerate((ROOT / ".gitignore").read_text().splitlines(), 1)
                if line.strip() and not line.startswith("#")}
    assert patterns <= used, f".gitignore lines with no example here: {sorted(patterns - used, key=int)}"
    p = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    left = subprocess.run(["git", "status", "--ignored", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert sorted(x[3:] for x in left if x.startswith("!!")) == sorted(USER_FILES)
