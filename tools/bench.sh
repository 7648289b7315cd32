#!/usr/bin/env bash
# Throughput benchmark, ours against PyTorch in the same sitting (ratios, not absolute numbers,
# are what compare across noisy machines).
#
#   tools/bench.sh                          zero2 vs PyTorch ZeroRedundancyOptimizer (and single, DDP)
#   tools/bench.sh zero2 ddp tensor_parallel  any stages with a //stages/<name>:train target
#   BENCH_BEFORE=/path/to/old/bazel-bin tools/bench.sh baseline zero2
#                                           also runs <BENCH_BEFORE>/stages/<name>/train (a build
#                                           of another commit) in the same sitting, interleaved
#                                           round by round, and prints after/before per round
#
# Configuration: model mini, global batch 16, T = 64, 2 ranks (the baseline: 1), one thread per
# rank. The peer is ../shared/bench/peer_torch.py on Debian's python3-torch (gloo): single, ddp,
# zero1, and tp (Megatron-style column/row-parallel layers with f/g as autograd Functions); it
# is skipped with a message when torch or the script is missing. Each stage is compared with its
# counterpart: data-parallel stages with DDP and ZeroRedundancyOptimizer, the tensor-parallel
# stages with tp. BENCH_STEPS (60), BENCH_RANKS (2), BENCH_ROUNDS (1; medians over rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(zero2)
steps=${BENCH_STEPS:-60}
ranks=${BENCH_RANKS:-2}
rounds=${BENCH_ROUNDS:-1}
before=${BENCH_BEFORE:-}
peer="$(pwd)/../shared/bench/peer_torch.py"

targets=()
for s in "${stages[@]}"; do targets+=("//stages/$s:train"); done
bazel build -c opt "${targets[@]}" >/dev/null 2>&1 || bazel build -c opt "${targets[@]}"

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

# run_ours BIN STAGE: prints tokens/s of one run.
run_ours() {
  local n=$ranks
  [ "$2" = baseline ] && n=1
  OMP_NUM_THREADS=1 "$1" --world_size "$n" --global_batch 16 --model mini --steps "$steps" \
    --eval_every 0 --log_every 1000 | grep '^done:' | sed -E 's/.* ([0-9]+) tokens\/s.*/\1/'
}

declare -A ours old
for r in $(seq "$rounds"); do
  for s in "${stages[@]}"; do
    t=$(run_ours "bazel-bin/stages/$s/train" "$s")
    ours[$s]+="$t "
    line="llmp $s round $r: $t tokens/s"
    if [ -n "$before" ]; then
      o=$(run_ours "$before/stages/$s/train" "$s")
      old[$s]+="$o "
      line+=" | before: $o tokens/s | after/before $(awk -v a="$t" -v b="$o" 'BEGIN {printf "%.3f", a / b}')"
    fi
    echo "$line"
  done
done

# The peers each stage compares with.
declare -A peers_of=([baseline]="single" [naive_dp]="ddp" [ddp]="ddp" [zero1]="zero1 ddp"
                     [zero2]="zero1 ddp" [zero3]="zero1 ddp" [tensor_parallel]="tp"
                     [sequence_parallel]="tp")
wanted=""
for s in "${stages[@]}"; do wanted+=" ${peers_of[$s]:-}"; done
declare -A torch
if [ -f "$peer" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  for strat in single ddp zero1 tp; do
    [[ " $wanted " == *" $strat "* ]] || continue
    out=$(OMP_NUM_THREADS=1 /usr/bin/python3 "$peer" --strategy "$strat" --world "$ranks" \
          --steps 30 --threads 1 2>/dev/null | grep tokens_per_s)
    torch[$strat]=$(sed -E 's/.*tokens_per_s=([0-9]+).*/\1/' <<<"$out")
    echo "pytorch $strat: $out"
  done
else
  echo "pytorch peer skipped: need /usr/bin/python3 with torch (apt-get install python3-torch) and $peer"
fi

echo
printf '%-32s %12s\n' "configuration" "tokens/s"
for s in "${stages[@]}"; do
  n=$ranks
  [ "$s" = baseline ] && n=1
  printf '%-32s %12s\n' "llmp $s, $n ranks" "$(median <<<"${ours[$s]}")"
  [ -n "$before" ] && printf '%-32s %12s\n' "  before ($before)" "$(median <<<"${old[$s]}")"
done
for strat in single ddp zero1 tp; do
  [ -n "${torch[$strat]:-}" ] && printf '%-32s %12s\n' "pytorch $strat" "${torch[$strat]}"
done
declare -A peer_name=([single]="PyTorch single process" [ddp]="PyTorch DDP"
                      [zero1]="PyTorch ZeroRedundancyOptimizer" [tp]="PyTorch Megatron-style TP")
for s in "${stages[@]}"; do
  for strat in ${peers_of[$s]:-}; do
    [ -n "${torch[$strat]:-}" ] || continue
    awk -v a="$(median <<<"${ours[$s]}")" -v b="${torch[$strat]}" -v s="$s" -v p="${peer_name[$strat]}" \
      'BEGIN { printf "ratio llmp %s / %s = %.2fx\n", s, p, a / b }'
  done
done
