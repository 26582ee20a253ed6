#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: install epfuzz, package seeds/dicts/options, compile each harness.
# EPFUZZ_SRC and EPFUZZ_ONLY exist only for the Docker-free local run (python -m epfuzz.ossfuzz local-build).
cd "${EPFUZZ_SRC:-$SRC/epfuzz}"
pip3 install . pyinstaller
python3 -m epfuzz.ossfuzz package "$OUT"
for fuzzer in harnesses/*_fuzzer.py; do
  name=$(basename -s .py "$fuzzer")
  if [ -n "${EPFUZZ_ONLY:-}" ] && [[ " $EPFUZZ_ONLY " != *" $name "* ]]; then
    continue
  fi
  compile_python_fuzzer "$fuzzer"
done
