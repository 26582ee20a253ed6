"""Running the installed `epfuzz` script the way a user does, from any folder.

The console script, not `python -m epfuzz`: `-m` puts the current folder on sys.path itself,
which is what a user running `epfuzz replay .` in an artifact folder does not get."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: the command under test: the venv's script, or EPFUZZ_UNDER_TEST (a wheel's, or an older tree's wrapper)
EPFUZZ = os.environ.get("EPFUZZ_UNDER_TEST") or str(Path(sys.executable).parent / "epfuzz")
ROOT = Path(__file__).resolve().parent.parent.parent


def epfuzz(cwd: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None,
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EPFUZZ, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, input=stdin)


def one_line_error(p: subprocess.CompletedProcess[str]) -> bool:
    """What every refused input gets: no traceback, and the complaint on one stderr line."""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    return "Traceback" not in p.stderr and "Traceback" not in p.stdout and len(lines) >= 1 and all(
        x.startswith(("epfuzz:", "error:")) for x in lines)
