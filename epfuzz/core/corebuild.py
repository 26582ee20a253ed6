"""Compile the emulator's hot modules with mypyc, beside their sources (`make install` runs this).

    .venv/bin/python -m epfuzz.core.corebuild                # build; a failure says why, exits 1
    .venv/bin/python -m epfuzz.core.corebuild --best-effort  # the same, exit 0 on failure (make install)
    .venv/bin/python -m epfuzz.core.corebuild --clean        # remove the extensions and the manifest

mypyc (from the `mypy` package on PyPI, the `core` extra) turns the typed modules of
`epfuzz.core.native.COMPILED` into C extensions; gcc and the Python headers do the rest.
The sources stay the reference: `epfuzz.core.native` loads them instead whenever the
extensions are missing, stale or unwanted, and the equivalence test runs both paths.
A build that fails prints one line and leaves the pure path: the emulator is then pure
Python, only slower. Run by a person it exits 1, so that the failure is not mistaken for a
build (a user trial read exit 0 as success); `make install` and the ClusterFuzzLite build pass
`--best-effort`, which exits 0, so that they never stop on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from epfuzz.core import native
from epfuzz.infra.extras import install_hint
from epfuzz.infra.shipped import SHIPPED

ROOT = native.PACKAGE_DIR.parent


def clean() -> int:
    """Remove every built extension of the compiled set, mypyc's shared library and the manifest."""
    removed = 0
    for name in native.COMPILED:
        while (p := native.extension(name)) is not None:
            p.unlink()
            removed += 1
    for p in native.PACKAGE_DIR.glob("*__mypyc*"):
        p.unlink()
        removed += 1
    native.MANIFEST.unlink(missing_ok=True)
    return removed


def _compile(tmp: str) -> None:
    """mypyc + setuptools' build_ext in `tmp` (away from pyproject.toml), then the extensions beside the sources."""
    from mypyc.build import mypycify
    from setuptools import setup

    # mypy reads the package from a copy of its sources under `tmp`: where the package sits in site-packages
    # (a pip install), mypy takes site-packages as the package's root and its typing_extensions.py as a file
    # that shadows the standard library's stub, and the build stops (user audit D2)
    copy = Path(tmp) / "src" / native.PACKAGE_DIR.name
    # the data a wheel carries (infra.shipped.SHIPPED): no code to compile
    shutil.copytree(native.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__", *SHIPPED.values()))
    files = [str(copy.parent.joinpath(*n.split(".")).with_suffix(".py")) for n in native.COMPILED]
    # mypy's cache in `tmp` too: its default, .mypy_cache/ of the working directory, left 13 MB in the folder a
    # pip user ran the build from (pip trial item 7)
    cache = f"--cache-dir={os.path.join(tmp, 'mypy-cache')}"
    exts = mypycify(files + ["--follow-imports=silent", "--ignore-missing-imports", cache], opt_level="3",
                    target_dir=os.path.join(tmp, "c"), group_name="epfuzz._core")
    lib = os.path.join(tmp, "lib")
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    os.chdir(tmp)
    setup(name="epfuzz-core", ext_modules=exts, script_args=[
        "-q", "build_ext", "--build-lib", lib, "--build-temp", os.path.join(tmp, "o"), "--parallel", jobs])
    for so in Path(lib).rglob("*"):
        if so.is_file():
            dest = ROOT / so.relative_to(lib)
            shutil.copyfile(so, dest)


def _why(e: BaseException) -> str:
    """A failed build's cause in a few words, with the remedy where it is the missing `core` extra."""
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] in ("mypyc", "mypy", "setuptools"):
        return f"{e.name} is not installed: {install_hint('core')}"
    return f"{type(e).__name__}: {str(e)[:200]}"


def build(best_effort: bool = False) -> int:
    """Compile, then record the sources' hash; on any failure, clean up and say so in one line (exit 1, or 0
    with `best_effort`)."""
    t0 = time.monotonic()
    clean()
    cwd = os.getcwd()
    # the hash of the sources as the build reads them, before it copies them: taken after the compile, it recorded
    # a source edited during the build (minutes) as built, and the stale extension ran as current
    sources = native.digest()
    try:
        with tempfile.TemporaryDirectory(prefix="epfuzz-core-") as tmp:
            _compile(tmp)
        native.MANIFEST.write_text(json.dumps({"sources": sources, "python": sys.version.split()[0]}) + "\n")
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure means: run the pure path
        clean()
        print(f"epfuzz: compiled emulator not built ({_why(e)}); using pure Python")
        return 0 if best_effort else 1
    finally:
        os.chdir(cwd)
    print(f"epfuzz: compiled emulator built ({len(native.COMPILED)} modules, {time.monotonic() - t0:.0f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="remove the extensions and the manifest")
    ap.add_argument("--best-effort", action="store_true",
                    help="exit 0 when the build fails (the pure path runs): what make install and CI builds pass")
    a = ap.parse_args(argv)
    if a.clean:
        print(f"epfuzz: removed {clean()} compiled files")
        return 0
    return build(a.best_effort)


if __name__ == "__main__":
    raise SystemExit(main())
