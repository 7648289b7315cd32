#!/usr/bin/env bash
# Throughput benchmark, ours against PyTorch in the same sitting (ratios, not absolute numbers,
# are what compare across noisy machines).
#
#   tools/bench.sh                 zero2 vs PyTorch ZeroRedundancyOptimizer (and single, DDP)
#   tools/bench.sh zero2 ddp       any stages with a //stages/<name>:train target
#
# Configuration (issue #2 §5): model mini, global batch 16, T = 64, 2 ranks, one thread per rank.
# The peer is ../shared/bench/peer_torch.py on Debian's python3-torch (gloo backend); it is
# skipped with a message when torch or the script is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(zero2)
steps=${BENCH_STEPS:-60}
ranks=${BENCH_RANKS:-2}
peer="$(pwd)/../shared/bench/peer_torch.py"

targets=()
for s in "${stages[@]}"; do targets+=("//stages/$s:train"); done
bazel build -c opt "${targets[@]}" >/dev/null 2>&1 || bazel build -c opt "${targets[@]}"

declare -A ours
for s in "${stages[@]}"; do
  line=$(OMP_NUM_THREADS=1 "bazel-bin/stages/$s/train" --world_size "$ranks" --global_batch 16 \
         --model mini --steps "$steps" --eval_every 0 --log_every 1000 | grep '^done:')
  ours[$s]=$(sed -E 's/.* ([0-9]+) tokens\/s.*/\1/' <<<"$line")
  echo "llmp $s ($ranks ranks): $line"
done

declare -A torch
if [ -f "$peer" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  for strat in single ddp zero1; do
    out=$(OMP_NUM_THREADS=1 /usr/bin/python3 "$peer" --strategy "$strat" --world "$ranks" \
          --steps 30 --threads 1 2>/dev/null | grep tokens_per_s)
    torch[$strat]=$(sed -E 's/.*tokens_per_s=([0-9]+).*/\1/' <<<"$out")
    echo "pytorch $strat: $out"
  done
else
  echo "pytorch peer skipped: need /usr/bin/python3 with torch (apt-get install python3-torch) and $peer"
fi

echo
printf '%-28s %12s\n' "configuration" "tokens/s"
for s in "${stages[@]}"; do printf '%-28s %12s\n' "llmp $s, $ranks ranks" "${ours[$s]}"; done
for strat in single ddp zero1; do
  [ -n "${torch[$strat]:-}" ] && printf '%-28s %12s\n' "pytorch $strat" "${torch[$strat]}"
done
if [ -n "${torch[zero1]:-}" ]; then
  for s in "${stages[@]}"; do
    awk -v a="${ours[$s]}" -v b="${torch[zero1]}" -v d="${torch[ddp]}" -v s="$s" \
      'BEGIN { printf "ratio llmp %s / pytorch ZeroRedundancyOptimizer = %.2fx, / pytorch DDP = %.2fx\n", s, a / b, a / d }'
  done
fi
