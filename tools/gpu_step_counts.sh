#!/usr/bin/env bash
# One training step's calls to the GPU, counted on the CUDA emulator (kernels/cuda/emulator/
# api_counts.h): every kernel launch by kernel, every call that makes the host wait for the
# device, every cuBLAS product by operand type with its FLOPs, the copies, allocations and NCCL
# operations. No GPU needed, and none used: a count, not a time.
#
#   tools/gpu_step_counts.sh TRAINER [FLAGS...]
#     TRAINER  an emulated trainer (bazel-bin/stages/<stage>/train_emulated: stages/trainer.bzl)
#     FLAGS    its flags (--device cuda is added; give --model, --layers, --global_batch, ...)
#
# It trains for 2 steps and for 3 from the same start, each with $LLMP_CUDA_EMULATOR_COUNTS set,
# and prints the difference: the third step's calls, which have no set-up in them (the first
# step's allocations and uploads are in both runs). Output: tab-separated, one row per (category,
# name) with a non-zero difference, under the header `category name calls bytes flops`; pipe it
# through `column -t -s $'\t'` to read it. Rank 0's counts for a multi-rank run. The 3-step
# run's model line and "done:" line (its FLOP/token: what the kernels declared,
# kernels/cpu/flops.h) go to stderr.
#
#   bazel build //stages/baseline:train_emulated
#   tools/gpu_step_counts.sh bazel-bin/stages/baseline/train_emulated --model tiny \
#       --precision bf16 | column -t -s $'\t'
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 TRAINER [FLAGS...]" >&2
  exit 2
fi
trainer=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for steps in 2 3; do
  if ! LLMP_CUDA_EMULATOR_COUNTS="$tmp/c$steps" "$trainer" --device cuda --eval_every 0 \
       --log_every 1000 "$@" --steps "$steps" </dev/null >"$tmp/log$steps" 2>&1; then
    echo "gpu_step_counts: $trainer $* --steps $steps failed:" >&2
    tail -5 "$tmp/log$steps" >&2
    exit 1
  fi
  # a multi-rank run writes one file per rank (FILE.<rank>): rank 0's
  [ -f "$tmp/c$steps" ] || mv "$tmp/c$steps.0" "$tmp/c$steps" 2>/dev/null || {
    echo "gpu_step_counts: $trainer wrote no counts (not an emulated trainer?)" >&2
    exit 1
  }
done

# the 3-step run's model line (L, C, H, T) and summary (tokens/s, FLOP/token)
grep -E '^[a-z0-9_]+: [0-9]+ ranks \| model |^done:' "$tmp/log3" >&2 || true
awk -F'\t' -v OFS='\t' '
  FNR == 1 { if (NR == 1) print; next }
  NR == FNR { calls[$1 OFS $2] = $3; bytes[$1 OFS $2] = $4; flops[$1 OFS $2] = $5; next }
  {
    k = $1 OFS $2
    d = $3 - calls[k]
    if (d != 0) printf "%s\t%d\t%.0f\t%.0f\n", k, d, $4 - bytes[k], $5 - flops[k]
  }' "$tmp/c2" "$tmp/c3"
