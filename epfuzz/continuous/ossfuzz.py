"""OSS-Fuzz / ClusterFuzzLite packaging, and a Docker-free stand-in for their build.

`harnesses(DIR)` writes the OSS-Fuzz entry points, `<name>_fuzzer.py` per built-in protocol (the
harness table is `epfuzz.continuous.targets`; these files only name it). `package(OUT)` writes, per harness,
`<name>_seed_corpus.zip` (corpus files named by sha1), `<name>.dict` and `<name>.options` next to
the fuzzers, as OSS-Fuzz expects. `local_build(OUT)` runs the project's build.sh with a shell function
`compile_python_fuzzer` that does what OSS-Fuzz's does (PyInstaller --onefile of
the harness plus a launcher script), then runs every produced fuzzer briefly. `bundle_args()` is what
build.sh adds to PyInstaller's arguments.

A build compiles the targets expected to find nothing (the fixed protocols and the clean ones); the bug
zoo's buggy halves crash on their own seeds, so building them only re-reports known bugs. EPFUZZ_TARGETS
chooses otherwise: "all", or harness names separated by spaces or commas (`targets` prints the choice).

    python -m epfuzz.continuous.ossfuzz harnesses DIR
    python -m epfuzz.continuous.ossfuzz targets
    python -m epfuzz.continuous.ossfuzz package OUT
    python -m epfuzz.continuous.ossfuzz bundle-args
    python -m epfuzz.continuous.ossfuzz local-build OUT [HARNESS ...]
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from epfuzz.cases.corpus import sha1
from epfuzz.continuous.targets import (
    SHIPPED_CORPUS,
    TARGETS_ENV,
    harness_name,
    harness_names,
    harness_protocol,
    seed_folder,
    selected_targets,
)
from epfuzz.core import native
from epfuzz.infra.errors import InputError

ROOT = Path(__file__).resolve().parent.parent.parent
MAX_LEN = 256

#: OSS-Fuzz's compile_python_fuzzer, minus the sanitizer preload that only exists in its images; like
#: theirs it adds nothing of epfuzz's own: what the bundle needs, build.sh passes as extra arguments
COMPILE_PYTHON_FUZZER = r'''
compile_python_fuzzer() {
  fuzzer_path=$1; shift
  fuzzer_basename=$(basename -s .py "$fuzzer_path")
  fuzzer_package=${fuzzer_basename}.pkg
  pyinstaller --distpath "$OUT" --workpath "$WORK/pyinstaller" --specpath "$WORK/pyinstaller" \
    --onefile --noconfirm --log-level WARN --name "$fuzzer_package" \
    "$@" "$fuzzer_path"
  cat > "$OUT/$fuzzer_basename" <<EOS
#!/bin/sh
# LLVMFuzzerTestOneInput for fuzzer detection.
this_dir=\$(dirname "\$0")
exec "\$this_dir/$fuzzer_package" "\$@"
EOS
  chmod +x "$OUT/$fuzzer_basename"
}
'''


#: where an installed epfuzz keeps the seeds (`seed_folder` reads them there outside a checkout), as a harness
#: file names it
SHIPPED = SHIPPED_CORPUS.relative_to(SHIPPED_CORPUS.parents[1])

#: an OSS-Fuzz entry point: OSS-Fuzz finds targets by file name and compiles each file alone
HARNESS_TEMPLATE = '''#!/usr/bin/env python3
"""atheris harness for the `{protocol}` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

From the root of an epfuzz checkout, whose seeds for it are corpus/{name}:

    mkdir -p runs/libfuzzer/corpus
    python harnesses/{name}.py runs/libfuzzer/corpus \\
        corpus/{name} -max_total_time=60 -artifact_prefix=runs/libfuzzer/

libFuzzer writes new inputs into its first corpus folder: a fresh one, never the checked-in seeds
(corpus/{name} is read only; an input added there fails `make replay`).
An installed epfuzz (`epfuzz list` says where) carries the same seeds as
{shipped}/{name}, and an OSS-Fuzz build zips them beside the fuzzer as
{zip}.

Nothing is line-instrumented: libFuzzer's coverage is the search's semantic features of each run
(epfuzz.search.feedbacks, as counters) and its mutator the search's moves, the same search as
`epfuzz fuzz` runs.
"""

import sys

from epfuzz.continuous.harness import main

if __name__ == "__main__":
    main("{protocol}", sys.argv)
'''


def seed_zip(name: str) -> str:
    """The seed archive OSS-Fuzz looks for beside fuzzer `name` (`package` writes it)."""
    return f"{name}_seed_corpus.zip"


def harness_source(name: str) -> str:
    """The entry point of harness `name`: generated, so the registry stays the one list of targets."""
    return HARNESS_TEMPLATE.format(name=name, protocol=harness_protocol(name), shipped=SHIPPED.as_posix(),
                                   zip=seed_zip(name))


def harnesses(folder: Path) -> list[Path]:
    """Write every harness's entry point into `folder` (only those that differ); returns them all."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in harness_names():
        path = folder / f"{name}.py"
        text = harness_source(name)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        out.append(path)
    return out


def _compiled_imports() -> set[str]:
    """The modules outside epfuzz that the compiled modules import (a submodule named in `from P import m`
    included): PyInstaller's analysis reads no import out of an extension, so it must be told these."""
    found: set[str] = set()
    for name in native.COMPILED:
        for node in ast.walk(ast.parse(native.source(name).read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] not in ("epfuzz", "__future__") and _is_module(m)}


def _is_module(name: str) -> bool:
    """Whether `name` is an importable module here (not a name a module defines, not an extra not installed)."""
    parent, _, _ = name.rpartition(".")
    try:
        if parent and getattr(importlib.util.find_spec(parent), "submodule_search_locations", None) is None:
            return False  # `from typing import Any`: Any is no module
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def bundle_args() -> list[str]:
    """PyInstaller's arguments for a harness bundle: every epfuzz module (protocols and backends are looked
    up by name, which the analysis cannot follow), every shared library in the package (the mypyc
    extensions and their shared `epfuzz/_core__mypyc`, where built) and the imports of the compiled modules;
    not the compiler (mypy, mypyc: corebuild's imports; the built extensions need neither)."""
    out = ["--collect-submodules", "epfuzz", "--collect-binaries", "epfuzz",
           "--exclude-module", "mypy", "--exclude-module", "mypyc"]
    for m in sorted(_compiled_imports()):
        out += ["--hidden-import", m]
    return out


def _seed_files(name: str) -> list[Path]:
    folder = seed_folder(name)
    return sorted(f for f in folder.iterdir() if f.is_file()) if folder is not None else []


def dictionary(name: str) -> str:
    """libFuzzer dictionary: the encoded knob prefixes of the seeds (knobs decode first)."""
    entries = set()
    for f in _seed_files(name):
        data = f.read_bytes()
        if len(data) >= 4:
            entries.add(data[:8])
    lines = [f"# {name}: knob vectors of the seed scenarios (first bytes of the encoding)"]
    for i, e in enumerate(sorted(entries)):
        lines.append(f'seed_{i}="' + "".join(f"\\x{b:02x}" for b in e) + '"')
    return "\n".join(lines) + "\n"


def options(name: str) -> str:
    """What ClusterFuzz must not randomize for this target, each with why (its strategies pick a random
    -max_len 15% of the time; libFuzzer's length control starts inputs short). `fork` is left to
    ClusterFuzz: a crash in a fork child is reported with the same three named frames
    (tests/harness/test_crash_identity.py runs the harness under -fork)."""
    return (f"[libfuzzer]\n"
            f"# an input decodes to a whole scenario whatever its length; past {MAX_LEN} bytes nothing more is read,\n"
            f"# and a shorter cap leaves schedule and fault entries unreachable\n"
            f"max_len = {MAX_LEN}\n"
            f"# short inputs decode to the simplest scenario: grow nothing, start at full length\n"
            f"len_control = 0\n"
            f"dict = {name}.dict\n")


def package(out: Path, only: list[str] | None = None) -> list[Path]:
    """Seed zip, dictionary and options of each target `only` names (default: those the build compiles,
    `selected_targets`): nothing in $OUT for a target that is not built."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in selected_targets() if only is None else only:
        z = out / seed_zip(name)
        with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in _seed_files(name):
                data = f.read_bytes()
                zf.writestr(sha1(data), data)
        (out / f"{name}.dict").write_text(dictionary(name))
        (out / f"{name}.options").write_text(options(name))
        written += [z, out / f"{name}.dict", out / f"{name}.options"]
    return written


def local_build(out: Path, only: list[str] | None = None, run_seconds: int = 3) -> dict[str, str]:
    """Run build.sh as OSS-Fuzz would, without Docker; then run each fuzzer briefly. `only`: the harnesses to
    build (else what $EPFUZZ_TARGETS chooses, by default the clean targets)."""
    out.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}-work"
    work.mkdir(exist_ok=True)
    # the builder image's Python: a fresh virtualenv, so `pip3 install .` never touches the caller's
    venv = work / "venv"
    if not (venv / "bin" / "pip3").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    build = (ROOT / ".clusterfuzzlite" / "build.sh").read_text()
    env = {**os.environ, "OUT": str(out), "SRC": str(ROOT.parent), "WORK": str(work),
           "EPFUZZ_SRC": str(ROOT),
           "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
    if only:
        env[TARGETS_ENV] = " ".join(only)
    script = COMPILE_PYTHON_FUZZER + "\n" + build
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, check=True)
    results = {}
    for f in sorted(out.iterdir()):
        if f.suffix or not f.name.endswith("_fuzzer") or not f.stat().st_mode & stat.S_IXUSR:
            continue
        p = subprocess.run([str(f), f"-max_total_time={run_seconds}", "-print_final_stats=1"],
                           capture_output=True, text=True, timeout=300, cwd=work)
        ok = "stat::number_of_executed_units" in p.stderr
        m = re.search(r"^epfuzz harness: emulator (\w+)", p.stderr, re.M)
        results[f.name] = (f"ran, emulator {m.group(1) if m else 'unknown'}" if ok
                           else f"failed (exit {p.returncode}): {p.stderr[-300:]}")
    return results


USAGE = "usage: python -m epfuzz.continuous.ossfuzz {harnesses DIR | targets | package OUT | bundle-args | " \
        "local-build OUT [HARNESS ...]}"


def main(argv: list[str]) -> int:
    """The commands build.sh runs (and local-build). `-h`/`--help` anywhere prints the help: a word that starts
    with `-` is never taken for a folder (`local-build --help` made a folder `--help` and started a build)."""
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    flags = [a for a in argv if a.startswith("-")]
    if flags:
        print(f"epfuzz ossfuzz: unknown option {flags[0]!r}; {USAGE}", file=sys.stderr)
        return 2
    try:
        return _run(argv)
    except InputError as e:
        print(f"epfuzz ossfuzz: {e}", file=sys.stderr)
        return 2


def _run(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "harnesses":
        for p in harnesses(Path(argv[1])):
            print(p)
        return 0
    if argv == ["targets"]:
        print("\n".join(selected_targets()))
        return 0
    if len(argv) == 2 and argv[0] == "package":
        for p in package(Path(argv[1])):
            print(p)
        return 0
    if argv == ["bundle-args"]:
        print("\n".join(bundle_args()))
        return 0
    if len(argv) >= 2 and argv[0] == "local-build":
        only = [harness_name(n) for n in argv[2:]] or None  # an unknown name fails before the build starts
        res = local_build(Path(argv[1]), only)
        for k, v in res.items():
            print(f"{k}: {v}")
        return 0 if res and all(v.startswith("ran") for v in res.values()) else 1
    print(USAGE, file=sys.stderr)
    return 2


def entry(argv: list[str]) -> int:
    """`main`, quiet when the reader of its output went away (`targets | head`), as `epfuzz list | head` is:
    exit 141 (128 + SIGPIPE) and no BrokenPipeError traceback (pip trial item 10)."""
    import signal

    try:
        rc = main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return rc
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # what is left of the output goes nowhere
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    raise SystemExit(entry(sys.argv[1:]))
