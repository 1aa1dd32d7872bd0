#!/usr/bin/env bash
# The prepared GPU check of benchkit's CUDA operator path, in one run (a few minutes on one H100):
#
#   bash lab/gpu_check.sh [OUT_DIR]          # default OUT_DIR: ./gpu-check
#
# 1. records one real BERT fp16 training step's operator inputs (scripts/record_bert_log.py);
# 2. on that log (fp16, 2 inputs per operator): the operatorbench reference
#    (lab/operatorbench_reference.py) and `benchkit operators --device cuda`, each its own
#    process with its own empty inductor and Triton caches, timed, then side by side; benchkit
#    again with --no-compile-ahead (GPU_CHECK_SERIAL=0 leaves it out); then the reference once
#    more on benchkit's caches (the same kernels and autotuned configs), side by side;
# 3. A/A: benchkit against itself on that log, each run a fresh process: twice on benchkit's own
#    cache for the torch build (empty before the first: it compiles and autotunes, the second
#    finds its kernels and autotuning choices: the reproducible choice, benchkit's default), and
#    step 2's cold run against one more with --cold (each compiles and autotunes afresh); per
#    operator the two median speedups and whether the generated kernels (the CSV's kernels
#    column) are the same (GPU_CHECK_BENCHKIT_AA=0 leaves it out);
# 4. the same as step 2 on benchkit's default operator set in fp32, and benchkit with
#    --no-compile-ahead against the reference on its caches (does the compile on a background
#    thread move the small kernels' figures? GPU_CHECK_SERIAL=0 leaves it out);
# 5. the asv operator suite on CUDA (benchmarks/operators_cuda.py) with `asv run --python=same`
#    into a results folder of its own, and what asv recorded.
# Writes OUT_DIR/gpu_check.log (everything), OUT_DIR/summary.md (the side-by-side tables),
# OUT_DIR/bert_fp16.txt (the recorded log), the CSVs and OUT_DIR/asv_results.tar.gz.
# GPU_CHECK_REPEATS (default 10) sets the repeats of both methods. GPU_CHECK_AA=1 also runs the
# reference a second time on each log with cold caches (how far the method itself moves between
# processes);
# GPU_CHECK_ASV=0 leaves step 5 out. GPU_CHECK_STEP_LIMIT (default 180) bounds each command's
# seconds. Wheels in ./.whl (asv and its dependencies, for a machine without them or without an
# index) are installed first. benchkit itself runs from this checkout, installed or not.
set -uo pipefail
cd "$(dirname "$0")/.."
# This checkout for every python step and for asv's benchmark processes, which keep only
# ASV_PYTHONPATH of the caller's path (asv drops PYTHONPATH): nothing needs installing.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ASV_PYTHONPATH="$PYTHONPATH"
out=$(realpath -m "${1:-gpu-check}")
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
repeats=${GPU_CHECK_REPEATS:-10}
step_limit=${GPU_CHECK_STEP_LIMIT:-180}  # seconds for any one command (exit 124 past it); the check goes on
work=$(mktemp -d)
export HOME="$work/home" BENCHKIT_CACHE_DIR="$work/benchkit-cache" PYTHONUNBUFFERED=1 COLUMNS=200
mkdir -p "$HOME"
check_started=$(date +%s.%N)

if ! python3 -c "import asv" 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || echo "gpu_check: wheel install failed"
fi
nvidia-smi -L
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"

elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }

# Runs "$@" with empty inductor and Triton caches of its own; prints and returns its wall seconds.
fresh_timed() {
  local name=$1
  shift
  local started
  started=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR="$work/inductor-$name" TRITON_CACHE_DIR="$work/triton-$name" timeout "$step_limit" "$@"
  echo "gpu_check: $name exited $? after $(elapsed "$started") s"
  seconds[$name]=$(elapsed "$started")
}
declare -A seconds

# Runs "$@" on the inductor and Triton caches another fresh_timed run left behind.
same_kernels() {
  local name=$1 from=$2
  shift 2
  local started
  started=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR="$work/inductor-$from" TRITON_CACHE_DIR="$work/triton-$from" timeout "$step_limit" "$@"
  echo "gpu_check: $name exited $? after $(elapsed "$started") s (on $from's caches)"
  seconds[$name]=$(elapsed "$started")
}

echo "== 1. a real BERT fp16 training log"
timeout "$step_limit" python3 scripts/record_bert_log.py --out "$out/bert_fp16.txt" --dtype float16

echo "== 2. BERT fp16 log: operatorbench reference, then benchkit (cold caches each)"
bert=(--inp-file "$out/bert_fp16.txt" --dtype float16 --repeats "$repeats" --max-samples 2)
fresh_timed ref_bert python3 -m lab.operatorbench_reference "${bert[@]}" --json "$out/reference_bert_fp16.json"
fresh_timed bk_bert python3 -m benchkit.cli operators --device cuda "${bert[@]}" --output-dir "$out"
if [ "${GPU_CHECK_SERIAL:-1}" = 1 ]; then
  mkdir -p "$work/serial"
  fresh_timed bk_bert_serial python3 -m benchkit.cli operators --device cuda "${bert[@]}" --no-compile-ahead \
    --output-dir "$work/serial"
fi
# The reference again, on the kernels benchkit compiled and autotuned (its caches): the
# speedups then differ only by the timing method and the GPU's noise, not by autotuning.
same_kernels ref_bert_same bk_bert python3 -m lab.operatorbench_reference "${bert[@]}" \
  --json "$out/reference_same_kernels_bert_fp16.json"
if [ "${GPU_CHECK_AA:-0}" = 1 ]; then
  fresh_timed ref2_bert python3 -m lab.operatorbench_reference "${bert[@]}" --json "$out/reference2_bert_fp16.json"
fi

# Runs "$@" on benchkit's own caches under $work/aa-cache (no cache folder set from outside);
# prints and records its wall seconds.
own_caches_timed() {
  local name=$1
  shift
  local started
  started=$(date +%s.%N)
  env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR BENCHKIT_CACHE_DIR="$work/aa-cache" timeout "$step_limit" "$@"
  echo "gpu_check: $name exited $? after $(elapsed "$started") s (benchkit's own caches)"
  seconds[$name]=$(elapsed "$started")
}

if [ "${GPU_CHECK_BENCHKIT_AA:-1}" = 1 ]; then
  echo "== 3. A/A: benchkit twice on the BERT log, fresh processes"
  mkdir -p "$out/aa/own1" "$out/aa/own2" "$out/aa/cold2"
  own_caches_timed aa_own1 python3 -m benchkit.cli operators --device cuda "${bert[@]}" --output-dir "$out/aa/own1"
  own_caches_timed aa_own2 python3 -m benchkit.cli operators --device cuda "${bert[@]}" --output-dir "$out/aa/own2"
  own_caches_timed aa_cold2 python3 -m benchkit.cli operators --device cuda "${bert[@]}" --cold \
    --output-dir "$out/aa/cold2"
fi

echo "== 4. default set fp32: operatorbench reference, then benchkit (cold caches each)"
default=(--suite default --dtype float32 --repeats "$repeats")
fresh_timed ref_default python3 -m lab.operatorbench_reference "${default[@]}" --json "$out/reference_default_fp32.json"
fresh_timed bk_default python3 -m benchkit.cli operators --device cuda "${default[@]}" --output-dir "$out"
same_kernels ref_default_same bk_default python3 -m lab.operatorbench_reference "${default[@]}" \
  --json "$out/reference_same_kernels_default_fp32.json"
if [ "${GPU_CHECK_SERIAL:-1}" = 1 ]; then
  # The default set's kernels run for microseconds: timed with nothing compiling beside them,
  # then the reference on the same kernels.
  mkdir -p "$out/serial"
  fresh_timed bk_default_serial python3 -m benchkit.cli operators --device cuda "${default[@]}" \
    --no-compile-ahead --output-dir "$out/serial"
  same_kernels ref_default_same_serial bk_default_serial python3 -m lab.operatorbench_reference \
    "${default[@]}" --json "$out/reference_same_kernels_serial_default_fp32.json"
fi
if [ "${GPU_CHECK_AA:-0}" = 1 ]; then
  fresh_timed ref2_default python3 -m lab.operatorbench_reference "${default[@]}" \
    --json "$out/reference2_default_fp32.json"
fi

compare() { python3 -m lab.gpu_compare "$@"; }
{
  echo "# GPU check ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), repeats $repeats)"
  echo
  echo "\`GPU_CHECK_AA=${GPU_CHECK_AA:-0} GPU_CHECK_ASV=${GPU_CHECK_ASV:-1} GPU_CHECK_SERIAL=${GPU_CHECK_SERIAL:-1}" \
    "GPU_CHECK_BENCHKIT_AA=${GPU_CHECK_BENCHKIT_AA:-1}" \
    "GPU_CHECK_REPEATS=$repeats bash lab/gpu_check.sh\` on $(date -u +%Y-%m-%d)," \
    "torch $(python3 -c 'import torch; print(torch.__version__)')"
  echo
  bert_csv="$out/operatorbench_bert_fp16_float16.csv"
  default_csv="$out/operatorbench_default_float32.csv"
  compare --title "BERT training log, float16: each with cold caches" --benchkit-csv "$bert_csv" \
    --reference-json "$out/reference_bert_fp16.json" \
    --benchkit-seconds "${seconds[bk_bert]}" --reference-seconds "${seconds[ref_bert]}"
  compare --title "BERT training log, float16: the reference on benchkit's kernels" --benchkit-csv "$bert_csv" \
    --reference-json "$out/reference_same_kernels_bert_fp16.json" \
    --note "The reference ran with benchkit's inductor and Triton caches: the same kernels and autotuned configs."
  compare --title "default set, float32: each with cold caches" --benchkit-csv "$default_csv" \
    --reference-json "$out/reference_default_fp32.json" \
    --benchkit-seconds "${seconds[bk_default]}" --reference-seconds "${seconds[ref_default]}"
  compare --title "default set, float32: the reference on benchkit's kernels" --benchkit-csv "$default_csv" \
    --reference-json "$out/reference_same_kernels_default_fp32.json" \
    --note "The reference ran with benchkit's inductor and Triton caches: the same kernels and autotuned configs."
  if [ "${GPU_CHECK_SERIAL:-1}" = 1 ]; then
    compare --title "default set, float32: benchkit --no-compile-ahead, the reference on its kernels" \
      --benchkit-csv "$out/serial/operatorbench_default_float32.csv" \
      --reference-json "$out/reference_same_kernels_serial_default_fp32.json" \
      --note "Nothing compiled on a background thread while benchkit timed; the reference ran on benchkit's caches."
  fi
  if [ "${GPU_CHECK_BENCHKIT_AA:-1}" = 1 ]; then
    compare --title "A/A: benchkit twice on its own caches (the reproducible choice), BERT float16" \
      --benchkit-csv "$out/aa/own1/operatorbench_bert_fp16_float16.csv" \
      --second-csv "$out/aa/own2/operatorbench_bert_fp16_float16.csv" \
      --benchkit-seconds "${seconds[aa_own1]}" --reference-seconds "${seconds[aa_own2]}" \
      --note "Fresh processes; the first compiled and autotuned into benchkit's empty cache for this torch build, the second found its kernels and autotuning choices there."
    compare --title "A/A: benchkit twice with cold caches, BERT float16" --benchkit-csv "$bert_csv" \
      --second-csv "$out/aa/cold2/operatorbench_bert_fp16_float16.csv" \
      --benchkit-seconds "${seconds[bk_bert]}" --reference-seconds "${seconds[aa_cold2]}" \
      --note "Step 2's run (empty caches) and one with --cold: each compiled and autotuned afresh."
  fi
  if [ "${GPU_CHECK_AA:-0}" = 1 ]; then
    compare --title "A/A: the reference twice, cold caches, BERT float16" \
      --benchkit-csv "$out/reference2_bert_fp16.json" --reference-json "$out/reference_bert_fp16.json" \
      --benchkit-seconds "${seconds[ref2_bert]}" --reference-seconds "${seconds[ref_bert]}"
    compare --title "A/A: the reference twice, cold caches, default set float32" \
      --benchkit-csv "$out/reference2_default_fp32.json" --reference-json "$out/reference_default_fp32.json" \
      --benchkit-seconds "${seconds[ref2_default]}" --reference-seconds "${seconds[ref_default]}"
  fi
  echo "## Wall times (seconds, whole command, cold caches)"
  echo
  echo "| log | benchkit (compiling ahead) | benchkit --no-compile-ahead | reference |"
  echo "|---|---:|---:|---:|"
  echo "| BERT fp16, whole log | ${seconds[bk_bert]} | ${seconds[bk_bert_serial]:-not run} | ${seconds[ref_bert]} |"
  echo "| default set fp32 | ${seconds[bk_default]} | ${seconds[bk_default_serial]:-not run} | ${seconds[ref_default]} |"
  echo
} > "$out/summary.md"
cat "$out/summary.md"

if [ "${GPU_CHECK_ASV:-1}" = 0 ]; then
  echo "gpu_check: whole check $(elapsed "$check_started") s (asv step left out)"
  rm -rf "$work"
  exit 0
fi
echo "== 5. the asv operator suite on CUDA (operators_cuda), asv run --python=same"
asv_dir="$work/asv"
mkdir -p "$asv_dir"
git init -q -b main "$asv_dir/history"
git -C "$asv_dir/history" -c user.name=gpu-check -c user.email=gpu-check@localhost commit -q --allow-empty \
  -m "torch $(python3 -c 'import torch; print(torch.__version__)')"
commit=$(git -C "$asv_dir/history" rev-parse HEAD)
python3 - "$asv_dir" "$PWD" <<'EOF'
import json, sys
asv_dir, repo = sys.argv[1], sys.argv[2]
lines = [line for line in open(f"{repo}/asv.conf.json") if not line.lstrip().startswith("//")]
conf = json.loads("".join(lines))
conf.update(repo=f"{asv_dir}/history", results_dir=f"{asv_dir}/results", html_dir=f"{asv_dir}/html",
            env_dir=f"{asv_dir}/env", benchmark_dir=f"{repo}/benchmarks")
json.dump(conf, open(f"{asv_dir}/asv.conf.json", "w"), indent=1)
EOF
asv machine --yes --machine gpu-check --config "$asv_dir/asv.conf.json" >/dev/null
started=$(date +%s.%N)
TORCHINDUCTOR_CACHE_DIR="$work/inductor-asv" TRITON_CACHE_DIR="$work/triton-asv" \
  timeout $((step_limit + 60)) asv run --python=same --set-commit-hash "$commit" --show-stderr --config "$asv_dir/asv.conf.json" \
  -b '^operators_cuda\.'
echo "gpu_check: asv exited $? after $(elapsed "$started") s"
tar -czf "$out/asv_results.tar.gz" -C "$asv_dir" results
python3 - "$asv_dir/results" <<'EOF'
import json, math, pathlib, sys
files = [p for p in pathlib.Path(sys.argv[1]).rglob("*.json") if p.name not in ("machine.json", "benchmarks.json")]
for path in files:
    results = json.loads(path.read_text())["results"]
    numbers = sum(1 for r in results.values() for v in (r[0] or []) if v is not None and not math.isnan(v))
    missing = sum(1 for r in results.values() for v in (r[0] or [None]) if v is None or math.isnan(v))
    print(f"asv results file {path.name}: {len(results)} benchmarks, {numbers} numbers, {missing} without")
    for name, result in sorted(results.items()):
        if name.endswith("track_compiled_over_eager"):
            values = ", ".join("n/a" if v is None else f"{1 / v:.3f}x" for v in result[0])
            print(f"  {name.split('.')[1]}: speedup per input {values}")
EOF
echo "gpu_check: whole check $(elapsed "$check_started") s"
rm -rf "$work"
