#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: install epfuzz with its compiled emulator, package seeds/dicts/options,
# compile each harness. The harnesses are one entry point per built-in protocol, written from the protocol
# registry (the same files as harnesses/, which a test keeps equal), so a protocol added is a target built.
# Which are built: EPFUZZ_TARGETS (set it with ENV in the Dockerfile): unset or "clean", the targets expected to
# find nothing (fixed and clean protocols: the bug zoo's buggy halves crash on their own seeds and would only
# re-report known bugs); "all"; or harness names separated by spaces or commas. `... ossfuzz targets` prints them.
# EPFUZZ_SRC exists only for the Docker-free local run (python -m epfuzz.continuous.ossfuzz local-build).
cd "${EPFUZZ_SRC:-$SRC/epfuzz}"
pip3 install '.[core]' pyinstaller
# The compiled (mypyc) emulator, ~2.5-3x the pure one, built into the installed copy that PyInstaller bundles:
# from $WORK, `import epfuzz` is that copy, not this source tree. Built without the sanitizer flags OSS-Fuzz
# exports: the harness's coverage is epfuzz's semantic features, not edges of mypyc's C, and ASan there checks
# mypyc's runtime, not the protocols. Not for the coverage build: coverage.py sees only Python lines. A failed
# build leaves the pure emulator (--best-effort: corebuild exits 0); the line below says which one the fuzzers run.
installed=$(cd "$WORK" && python3 -c 'import epfuzz, os; print(os.path.dirname(epfuzz.__file__))')
if [[ "$installed/" == "$PWD/"* ]]; then
  echo "epfuzz build: import epfuzz from \$WORK resolves to the source tree ($installed), not the install" >&2
  exit 1
fi
if [[ "${SANITIZER:-}" != *coverage* && "${SANITIZER:-}" != *introspector* ]]; then
  (cd "$WORK" && CFLAGS= CXXFLAGS= LDFLAGS= python3 -m epfuzz.core.corebuild --best-effort)
fi
echo "epfuzz build: $installed $(cd "$WORK" && python3 -c 'from epfuzz.core import native; print(native.describe())')"
targets=$(python3 -m epfuzz.continuous.ossfuzz targets)
echo "epfuzz build: $(echo "$targets" | wc -w) targets (EPFUZZ_TARGETS=${EPFUZZ_TARGETS:-clean})"
python3 -m epfuzz.continuous.ossfuzz package "$OUT"
python3 -m epfuzz.continuous.ossfuzz harnesses "$WORK/harnesses" > /dev/null
# PyInstaller's arguments: every epfuzz module (targets are looked up by name), the compiled extensions and
# what they import (mypyc's C hides those imports from PyInstaller's analysis)
bundle_args=$(python3 -m epfuzz.continuous.ossfuzz bundle-args)
for name in $targets; do
  # shellcheck disable=SC2086  # one argument per word: module names have no spaces
  compile_python_fuzzer "$WORK/harnesses/$name.py" $bundle_args
done
