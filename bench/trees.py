"""An older tree beside this one, for the A/B scripts (`guided_ab.py`, `throughput_ab.py`).

A rate from another day or machine cannot be divided by one of today: both trees run in one invocation, on
one machine, interleaved. The older tree is a `git archive` of a commit (or a tar of one: the device host
has no git history), unpacked into a temporary folder, with its compiled core built there as its own
`make install` built it; each measurement runs in a fresh interpreter with the tree first on sys.path.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: an editable install of another checkout (`pip install -e`) maps `epfuzz` there ahead of sys.path
UNEDIT = ('sys.meta_path = [f for f in sys.meta_path '
          'if not str(getattr(f, "__module__", "")).startswith("__editable__")]')


def child_env() -> dict[str, str]:
    """The environment of a measuring child: no EPFUZZ_PURE (each tree runs its compiled path where built),
    no PYTHONPATH entry holding an `epfuzz` package (that tree would shadow the one under test; other entries
    stay: the device host's carried wheels are on it), one BLAS thread as the CLI sets it (idle BLAS threads
    spin on the process's CPU clock)."""
    env = {k: v for k, v in os.environ.items() if k not in ("EPFUZZ_PURE", "PYTHONPATH")}
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not (Path(p) / "epfuzz").exists()]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def add_base_arguments(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--base", help="the older commit (git archive of this repository)")
    src.add_argument("--base-tar", help="a tar of the older tree")
    ap.add_argument("--no-build", action="store_true", help="run the older tree's pure-Python path (tests)")
    ap.add_argument("--base-name", help="how the result file names the older tree (default: the commit, or the "
                                        "tar's file name)")


def build(tree: Path) -> str:
    """The older tree's compiled core, as its own `make install` built it; 'compiled' or why not."""
    for mod in ("epfuzz.core.corebuild", "epfuzz.corebuild"):
        if (tree / Path(*mod.split("."))).with_suffix(".py").exists():
            code = (f"import runpy, sys; sys.path.insert(0, {str(tree)!r}); {UNEDIT}; "
                    f"runpy.run_module({mod!r}, run_name='__main__')")
            res = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False)
            return "compiled" if res.returncode == 0 else f"build failed: {res.stderr.strip()[-200:]}"
    return "no corebuild module"


def unpack(args: argparse.Namespace, into: Path) -> tuple[Path, str]:
    """The older tree unpacked under `into`, and its name for the result file."""
    if args.base_tar:
        tar = Path(args.base_tar)
    else:
        tar = into / "base.tar"
        res = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "-o", str(tar)],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise SystemExit(f"{Path(sys.argv[0]).name}: git archive {args.base}: "
                             f"{(res.stderr.strip().splitlines() or ['failed'])[-1]}")
    with tarfile.open(tar) as t:
        t.extractall(into / "tree", filter="data")
    tree = into / "tree"
    inner = [p for p in tree.iterdir() if p.is_dir()]
    if not (tree / "epfuzz").exists() and len(inner) == 1:  # an archive made with --prefix
        tree = inner[0]
    return tree, args.base_name or args.base or tar.name


def median_run(rs: list[dict[str, Any]], key: str = "exec_per_s") -> dict[str, Any]:
    """The run of median `key` (the lower middle one of an even count), with every value beside it."""
    mid = sorted(rs, key=lambda r: r[key])[(len(rs) - 1) // 2]
    return {**mid, f"all_{key}": [r[key] for r in rs]}
