#!/usr/bin/env bash
# The throughput figures of bench/results.json, measured on a lent GPU host in ONE device call.
#
# Why a script: the host has Python 3.12, torch and numpy but no package index, device time is short
# (about 30 minutes a session) and a host may be lent once; every step done by hand costs a call.
#
#   bench/device_throughput.sh wheels        # HERE (network): the cp312 wheels the host lacks, into .whl/
#   bench/device_throughput.sh tree          # the sources' hash a run's log names its tree by
#   bench/device_throughput.sh run [OUT]     # THERE: install them, build the compiled core, bench/run.py
#                                            # --throughput; results.json/.md and a log go to OUT ($OUT)
#
# With the device tool:  run(command="bench/device_throughput.sh run", carry=[".whl"])
# then copy OUT's results.json and results.md over bench/'s and regenerate the docs tables
# (bench/docs_tables.py). .whl must stay under the 64 MiB carry limit with the tree (about 54 MiB: atheris
# 36, mypy 15; keep nothing else in it).
set -euo pipefail
stage=${1:?usage: device_throughput.sh wheels|tree|run [OUT]}
here=$(cd "$(dirname "$0")/.." && pwd)
whl=$here/.whl
py=${PYTHON:-python3}
# mypy (mypyc) and setuptools build the core, isal gives the payload's CRC-32 (ISA-L), structlog and atheris epfuzz needs
pkgs=(mypy setuptools isal structlog atheris)

tree_hash() { (cd "$here" && find epfuzz bench -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12); }

case "$stage" in
tree)
  tree_hash
  ;;
wheels)
  mkdir -p "$whl"
  python3 -m pip download -q --only-binary :all: --python-version 3.12 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$whl" "${pkgs[@]}"
  du -sh "$whl"
  ;;
run)
  out=${2:-${OUT:-/tmp/device-throughput}}
  mkdir -p "$out"
  cd "$here"
  {
    date -u
    nvidia-smi -L 2>/dev/null || true
    $py -m pip install -q --no-index --find-links "$whl" "${pkgs[@]}"
    export PYTHONPATH=$here
    t0=$(date +%s)
    $py -m epfuzz.core.corebuild
    echo "core built in $(( $(date +%s) - t0 )) s"
    $py -c "from epfuzz.core import native; r = native.stale_reason(); print('core:', r or 'built'); assert r is None"
    $py bench/run.py --throughput
    # the device copies the working tree but not always a current .git: name the tree by its sources' hash,
    # which `bench/device_throughput.sh tree` prints here for the same tree
    echo "tree: sources $(tree_hash)"
  } 2>&1 | tee "$out/device-throughput.log"
  cp bench/results.json bench/results.md "$out/"
  ;;
*)
  echo "device_throughput.sh: unknown stage '$stage' (wheels, tree or run)" >&2
  exit 2
  ;;
esac
