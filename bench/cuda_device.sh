#!/usr/bin/env bash
# Everything the cuda backend claims, measured on a GPU machine in as few commands as device time
# allows. Results go to OUT (default bench/cuda/out); each stage leaves its own files there.
#
#   bench/cuda_device.sh smoke   OUT   # build the kernels, tests/cuda, one throughput sample per shape
#   bench/cuda_device.sh harness OUT   # dispatch_any_fuzzer --backend=cuda for 90 s, minimize a NVLink find
#   bench/cuda_device.sh table   OUT   # bench/cuda_litmus.py: the README's weak-outcome table
#   bench/cuda_device.sh cold    OUT   # where weak rounds fall: reused buffers vs new ones every run
#   bench/cuda_device.sh interp  OUT   # the op interpreter: its tests, then every protocol for ROUNDS rounds
#   bench/cuda_device.sh agree   OUT   # the agreement table's cuda cells (ROUNDS, BUDGET seconds)
#   bench/cuda_device.sh tma     OUT   # TMA bulk stores (sm_90): tma_flag/_fixed cells (ROUNDS), kernel builds
set -euo pipefail
stage=${1:?usage: cuda_device.sh smoke|harness|table|cold|interp|agree|tma [OUT]}
out=${2:-bench/cuda/out}
mkdir -p "$out"
py=${PYTHON:-python3}

case "$stage" in
smoke)
  t0=$(date +%s)
  $py -c "from epfuzz.backends.cuda import _extension; _extension()"
  echo "kernels built in $(( $(date +%s) - t0 )) s"
  $py -m pytest -q -p no:cacheprovider -rfs --tb=short tests/cuda 2>&1 | tee "$out/pytest-cuda.txt" | tail -40 || true
  [ "${THROUGHPUT:-1}" = 1 ] || exit 0
  for shape in mp-64k-words-flag slot-70-words-faa; do
    $py - "$shape" <<'EOF' | tee -a "$out/throughput.txt"
import sys
sys.path.insert(0, "bench")
from cuda_litmus import DISPATCH_ANY, scenario
from epfuzz.backends.cuda import CudaBackend
b = CudaBackend()
for path in ("p2p", "same", "host"):
    try:
        o = b.run_litmus(scenario(sys.argv[1], path, "none"), repeats=20_000)
        print(sys.argv[1], path, o.summary.replace("\n", " | "))
    except Exception as e:  # noqa: BLE001
        print(sys.argv[1], path, "error:", str(e).splitlines()[0])
EOF
  done
  ;;
harness)
  # findings stay outside OUT (a campaign writes dozens); OUT gets the log, the pick and its minimized form
  work=$(mktemp -d)
  mkdir -p "$work/corpus" "$work/findings" "$out/harness"
  cp corpus/dispatch_any_fuzzer/* "$work/corpus/"
  timeout $(( ${FUZZ_SECONDS:-90} + 60 )) $py harnesses/dispatch_any_fuzzer.py --backend=cuda --keep-going \
    --findings-dir="$work/findings" "$work/corpus" -max_total_time="${FUZZ_SECONDS:-90}" -seed=1 \
    -print_final_stats=1 >"$out/harness/fuzz.log" 2>&1 || true
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$out/harness/fuzz.log" || true
  echo "findings: $(ls "$work/findings" | wc -l)"
  grep -h "signature:" "$out/harness/fuzz.log" | sort | uniq -c | sort -rn | head -30
  # prefer what reproduces best on hardware: an atomic signal over NVLink without a fence
  pick=$($py - "$work/findings" <<'EOF'
import sys
from pathlib import Path
from epfuzz.cases.corpus import load_case
cases = [(p, load_case(p).scenario) for p in sorted(Path(sys.argv[1]).glob("*.json"))]
order = [lambda s: s.gpu.path == "p2p" and s.gpu.fence == "none" and s.signal.kind == "faa",
         lambda s: s.gpu.path == "p2p" and s.gpu.fence == "none", lambda s: s.gpu.path == "p2p", lambda s: True]
for want in order:
    hit = [p for p, s in cases if want(s)]
    if hit:
        print(hit[0])
        break
EOF
)
  if [ -n "$pick" ]; then
    cp "$pick" "$out/harness/picked.json"
    echo "picked $(basename "$pick"); its replay:"
    $py -m epfuzz run "$out/harness/picked.json" --backend cuda --repeats 40000 2>&1 | tail -3 || true
    $py -m epfuzz minimize "$out/harness/picked.json" --backend cuda --repeats 2000 --threshold 0.0005 \
      --max-seconds 120 -o "$out/harness/minimized.json" 2>&1 | tail -5 || true
    echo "minimized, replayed:"
    $py -m epfuzz run "$out/harness/minimized.json" --backend cuda --repeats 40000 2>&1 | tail -3 || true
  fi
  rm -rf "$work"
  ;;
interp)
  $py -m pytest -q -p no:cacheprovider -rfs --tb=short tests/cuda/test_interp_gpu.py tests/cuda/test_interp_encoding.py \
    2>&1 | tee "$out/pytest-interp.txt" | tail -30 || true
  $py bench/cuda_agreement.py cuda "$out/agree-smoke.jsonl" --rounds "${ROUNDS:-2000}" --weak-rounds "${ROUNDS:-2000}" \
    --budget "${BUDGET:-200}"
  ;;
agree)
  $py bench/cuda_agreement.py cuda "$out/agreement-cuda.jsonl" --rounds "${ROUNDS:-100000}" \
    --weak-rounds "${WEAK_ROUNDS:-50000}" --budget "${BUDGET:-480}" \
    $(for p in ${ONLY:-}; do printf -- '--only %s ' "$p"; done)
  ;;
tma)
  # one GPU is enough (path same); rows as the agreement table's in tma-cells.jsonl, then the other
  # interpreter tests (nothing else broke) and the NVRTC builds where the image has a libnvrtc
  rm -f "$out/tma-cells.jsonl"
  EPFUZZ_TMA_OUT="$out/tma-cells.jsonl" EPFUZZ_TMA_ROUNDS="${ROUNDS:-100000}" $py -m pytest -q -p no:cacheprovider \
    -rA --tb=short -s tests/cuda/test_interp_tma.py tests/cuda/test_interp_gpu.py tests/cuda/test_interp_nvrtc.py \
    2>&1 | tee "$out/pytest-tma.txt" | tail -60
  ;;
cold)
  $py bench/cuda_litmus.py --out "$out/cold.jsonl" --cold-study "${RUNS:-20}"
  ;;
table)
  # ROW_GROUPS="stress" MERGE=bench/cuda/litmus.jsonl: only those rows, tabled with the earlier ones
  $py bench/cuda_litmus.py --out "$out/litmus.jsonl" --budget "${BUDGET:-480}" --row-cap "${ROW_CAP:-45}" \
    $(for g in ${ROW_GROUPS:-}; do printf -- '--group %s ' "$g"; done) \
    $(for m in ${MERGE:-}; do printf -- '--merge %s ' "$m"; done)
  ;;
*)
  echo "cuda_device.sh: unknown stage $stage (smoke|harness|table|cold|interp|agree|tma)" >&2
  exit 2
  ;;
esac
