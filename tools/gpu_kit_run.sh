#!/usr/bin/env bash
# The GPU kit's runner (packed as kit/run.sh by tools/gpu_kit.sh): issue 16's GPU checks on a
# machine with a GPU and none of this project's build tools, in one command.
#
#   bash run.sh [tests|bench|profile|profile_flash|all]      (default all: tests and bench)
#     tests   1. every kit binary finds its shared libraries (ldd: no "not found")
#             2. the GPU gtests: every //kernels/cuda test (the CUDA kernels against their CPU
#                twins), tensor_device_test, the NCCL process group at 2 ranks (skips on 1 GPU)
#             3. tests/stage_equivalence_test.sh, cpu (the kit's own check: the trainers and
#                mpiexec work here) then cuda: every stage with --device cuda against the GPU
#                baseline, the GPU baseline against the CPU's; tests/mixed_precision_runs_test.sh
#                cuda: every stage that takes --precision, in bf16 (fp16 for one of each kind)
#                on the GPU, its report rows ok and its loss the 16-bit GPU baseline's
#             4. tests/device_flag_test.sh: --device cuda trains where a GPU is, refused by name
#                where the stage cannot; tests/clip_grad_test.sh: --clip_grad on every stage that
#                takes it (CPU), then the baseline and zero2 with ZeRO-Offload on the GPU
#             5. the issue's command: zero2 --device cuda, its report in GPU bytes
#             6. the recompute and long_sequences tables with --device cuda
#     bench   tools/gpu_bench.sh on the kit's trainers: gpt2 bf16 tokens/s and MFU, fp32 (TF32 on
#             and off), --attention flash, the data-parallel stages at world size 1
#     profile tools/gpu_profile.sh: ncu's time per kernel of a gpt2 step, TF32 and bf16
#     profile_flash  the same for bf16 with --attention flash (the tensor-core blockwise kernels),
#             in a device call of its own
# Output: everything to stdout and to $OUT/gpu_kit.log ($OUT: the device tool's folder that comes
# back; ./gpu_kit_out without it), one line per check to $OUT/summary.txt, the benchmark's table
# to $OUT/bench.md. Exit 0 when every check passed (a skip is printed as SKIP, not ok).
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
mode=${1:-all}
case "$mode" in tests | bench | profile | profile_flash | all) ;; *)
  echo "error: mode '$mode' is none of tests, bench, profile, profile_flash, all" >&2
  exit 2
  ;;
esac
out=${OUT:-$PWD/gpu_kit_out}
mkdir -p "$out"
exec > >(tee -a "$out/gpu_kit.log") 2>&1
summary=$out/summary.txt
failed=0
note() {  # note STATUS WHAT: one summary line
  printf '%-4s %s\n' "$1" "$2" | tee -a "$summary"
  [ "$1" = FAIL ] && failed=1
  return 0
}

# The machine's CUDA libraries (driver, cuBLAS, NCCL): the kit carries none of them.
libdirs=()
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -maxdepth 9 \
            -name "$lib" 2>/dev/null | head -1)
  if [ -z "$found" ]; then
    note FAIL "no $lib on this machine (searched /usr/local/cuda*, /usr/lib, /opt)"
  else
    libdirs+=("$(dirname "$found")")
  fi
done
ld=$kit/lib
for d in "${libdirs[@]}"; do ld+=":$d"; done
export LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$kit/bin:$PATH
export LLMP_MPIEXEC=$kit/bin/mpiexec.hydra
export UCX_MODULE_DIR=$kit/lib/ucx
# The stages' default corpus (--data's default): the kit's copy where the machine has none.
if [ ! -e /usr/share/games/fortunes ]; then
  mkdir -p /usr/share/games && cp -r "$kit/data/fortunes" /usr/share/games/fortunes ||
    note FAIL "cannot install the corpus at /usr/share/games/fortunes (the stages' default --data)"
fi
echo "== $(head -1 "$kit/MANIFEST")"
echo "== $(date -u +%FT%TZ) on $(hostname): $(nvidia-smi -L 2>&1 | head -2 | tr '\n' ' ')"
echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# check NAME TIMEOUT CMD...: runs CMD, notes ok / SKIP (a gtest or script that said it skipped
# everything) / FAIL with the exit status.
check() {
  local name=$1 limit=$2 log
  shift 2
  log=$(mktemp)
  echo "== $name: $*"
  timeout "$limit" "$@" </dev/null 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    note FAIL "$name (exit $rc)"
  elif grep -qE '^SKIPPED:|\[  SKIPPED \]' "$log" && ! grep -qE '\[       OK \]|^ok ' "$log"; then
    note SKIP "$name: $(grep -m1 -E 'SKIPPED|skipped' "$log" | cut -c1-160)"
  else
    note ok "$name$(grep -qE '\[  SKIPPED \]' "$log" && echo " (some cases skipped: $(grep -c '\[  SKIPPED \]' "$log") lines)")"
  fi
  rm -f "$log"
}

# gpu_check NAME TIMEOUT CMD...: a check that needs a GPU to mean anything. Without one (the
# baseline's refusal names the runtime's reason) it is noted SKIP with that reason, so the kit
# can be tried out on a machine without a GPU and what needs one is not taken for broken.
no_gpu=$("$kit/stages/baseline/train" --model tiny --layers 1 --steps 1 --eval_every 0 --quiet \
           --device cuda </dev/null 2>&1 | grep -m1 -E -- '--device cuda: (no CUDA device|no kernels)')
gpu_check() {
  if [ -n "$no_gpu" ]; then note SKIP "$1: no GPU here ($no_gpu)"; else check "$@"; fi
}

if [ "$mode" = tests ] || [ "$mode" = all ]; then
  missing=$(for f in "$kit"/stages/*/train "$kit"/tests/* "$kit"/bin/*; do
              ldd "$f" 2>&1 | grep 'not found' | sed "s#^#$(basename "$f"): #"
            done)
  if [ -n "$missing" ]; then note FAIL "shared libraries not found: $(sort -u <<<"$missing" | head -5 | tr '\n' ';')"
  else note ok "every kit binary finds its shared libraries"; fi

  for t in "$kit"/tests/*; do
    case "$t" in
      # an emulated test at 2 ranks gets its BUILD's 2 emulated GPUs (one per rank, as NCCL
      # needs; the real CUDA runtime does not read the variable)
      *_np2) LLMP_CUDA_EMULATOR_DEVICES=2 check "$(basename "$t")" 300 "$t" --ranks=2 ;;
      *) check "$(basename "$t")" 300 "$t" ;;
    esac
  done
  check stage_equivalence_cpu 300 bash "$kit/scripts/stage_equivalence_test.sh" cpu \
    "$kit/bin/compare_checkpoints" "$kit/stages/baseline/train"
  check stage_equivalence_cuda 420 bash "$kit/scripts/stage_equivalence_test.sh" cuda \
    "$kit/bin/compare_checkpoints" "$kit/stages/baseline/train"
  # Every 16-bit stage on the GPU (ranks sharing it): report rows ok, the 16-bit baseline's loss.
  check mixed_precision_runs_cuda 420 bash "$kit/scripts/mixed_precision_runs_test.sh" cuda \
    "$kit/stages/baseline/train"
  check device_flag 300 bash "$kit/scripts/device_flag_test.sh" "$kit/stages/baseline/train" \
    "$kit/bin/cpu_only_stage" "$kit/stages/tp_2d/train" "$kit/scripts/expect_error.sh" \
    "$kit/stages/zero3/train"
  # The third argument names the GPU run's binary: the kit's trainer itself, on the real GPU.
  gpu_check clip_grad 300 bash "$kit/scripts/clip_grad_test.sh" "$kit/bin/compare_checkpoints" \
    "$kit/stages/baseline/train" "$kit/stages/baseline/train"
  gpu_check zero2_device_cuda 300 "$kit/stages/zero2/train" --device cuda --world_size 1 \
    --steps 50 --eval_every 25
  # The two table tools on the GPU: recomputation's peaks in device bytes with the Pa+cpu row,
  # and the long-sequence methods at 2 ranks sharing the GPU (stages/*/README.md).
  gpu_check recompute_table_cuda 120 "$kit/stages/recompute/train" --device cuda --timed 11
  gpu_check long_sequences_cuda 240 "$kit/stages/long_sequences/train" --device cuda \
    --world_size 2 --ctx 1024 --timed 2
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  export GPU_BENCH_BIN=$kit/stages  # prebuilt trainers: no Bazel there
  gpu_check gpu_bench 580 bash "$kit/scripts/gpu_bench.sh"
  sed -n '/^| run /,/^$/p' "$out/gpu_kit.log" >"$out/bench.md"
fi
if [ "$mode" = profile ]; then
  gpu_check gpu_profile_tf32 300 bash "$kit/scripts/gpu_profile.sh" "$kit/stages/baseline/train" --tf32
  gpu_check gpu_profile_bf16 300 bash "$kit/scripts/gpu_profile.sh" "$kit/stages/baseline/train" \
    --precision bf16
fi
if [ "$mode" = profile_flash ]; then  # a call of its own: each profile may take up to 300 s
  gpu_check gpu_profile_bf16_flash 300 bash "$kit/scripts/gpu_profile.sh" \
    "$kit/stages/baseline/train" --precision bf16 --make_vocab_size_divisible_by 128 \
    --attention flash
fi
echo "== summary"
cat "$summary"
exit "$failed"
