#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: install epfuzz, package seeds/dicts/options, compile each harness.
# The harnesses are one entry point per built-in protocol, written from the protocol registry (the same
# files as harnesses/, which a test keeps equal), so a protocol added is a target built.
# EPFUZZ_SRC and EPFUZZ_ONLY exist only for the Docker-free local run (python -m epfuzz.continuous.ossfuzz local-build).
cd "${EPFUZZ_SRC:-$SRC/epfuzz}"
pip3 install . pyinstaller
python3 -m epfuzz.continuous.ossfuzz package "$OUT"
python3 -m epfuzz.continuous.ossfuzz harnesses "$WORK/harnesses" > /dev/null
for fuzzer in "$WORK"/harnesses/*_fuzzer.py; do
  name=$(basename -s .py "$fuzzer")
  if [ -n "${EPFUZZ_ONLY:-}" ] && [[ " $EPFUZZ_ONLY " != *" $name "* ]]; then
    continue
  fi
  compile_python_fuzzer "$fuzzer"
done
