#!/usr/bin/env bash
# Throughput of naive DP and DDP on the `mini` model next to PyTorch's DDP (a benchmark, not a
# test: the numbers depend on the machine and on what else runs on it).
#
#   stages/ddp/bench.sh                 # 2 and 4 ranks, 30 steps each, 3 rounds
#   STEPS=50 RANKS="2" REPEAT=5 stages/ddp/bench.sh
#
# naive_dp and ddp alternate within each round (so both see the same background load) and the
# summary compares their medians over the rounds.
#
# Every run: mini (Ψ = 834,304), global batch B = 16 sequences of T = 64 tokens, one thread per
# rank, no validation. Printed per run: tokens/s and ms per step (train_main's "done:" line,
# timed from the end of step 1), and for DDP the fraction of the all_reduce time hidden behind
# backward (rank 0's OverlapMeter line); for naive DP the blocking all_reduce time, all exposed.
# The peer is stages' counterpart in PyTorch (Debian's python3-torch, gloo backend, the same
# model, batch and sequence length): ../shared/bench/peer_torch.py next to the repository.
set -euo pipefail

root="$(git rev-parse --show-toplevel)"
cd "$root"
steps="${STEPS:-30}"
ranks="${RANKS:-2 4}"
repeat="${REPEAT:-3}"
peer="$root/../shared/bench/peer_torch.py"

bazel build -c opt //stages/naive_dp:train //stages/ddp:train >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"

# run <stage> <ranks> [flags...]: one line of results.
run() {
  local stage="$1" n="$2"
  shift 2
  local out
  out="$(OMP_NUM_THREADS=1 "$bin/stages/$stage/train" --model mini --global_batch 16 \
    --world_size "$n" --steps "$steps" --eval_every 0 --log_every "$steps" "$@" 2>&1)" || {
    echo "$out" >&2
    echo "$stage on $n ranks failed" >&2
    return 1
  }
  local done_line tok ms extra
  done_line="$(grep -m1 'done:' <<<"$out")"
  tok="$(sed -E 's/.* ([0-9.]+) tokens\/s.*/\1/' <<<"$done_line")"
  ms="$(sed -E 's/.* ([0-9.]+) ms\/step.*/\1/' <<<"$done_line")"
  extra="$(grep -m1 -E '^\[rank 0\] (ddp|naive_dp):' <<<"$out" | sed -E 's/^\[rank 0\] //' || true)"
  printf '%-9s N=%d %-28s %8s tokens/s %7s ms/step | %s\n' "$stage" "$n" "$*" "$tok" "$ms" "$extra"
  echo "$tok" >>"$tmp/$stage.$n"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "mini, B=16, T=64, $steps steps, 1 thread per rank, $(nproc) cores"
for ((round = 1; round <= repeat; round++)); do
  for n in $ranks; do
    run naive_dp "$n"
    run ddp "$n"
  done
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for n in $ranks; do
  # Paired: each round's ddp/naive_dp ratio cancels the drift between rounds (CPU frequency, load).
  paste "$tmp/ddp.$n" "$tmp/naive_dp.$n" | awk '{ print $1 / $2 }' >"$tmp/ratio.$n"
  awk -v n="$n" -v m="$(median "$tmp/ratio.$n")" -v all="$(tr '\n' ' ' <"$tmp/ratio.$n")" 'BEGIN {
    printf "N=%d, paired rounds: ddp/naive_dp tokens/s ratios %s-> median %.3f (ddp step time %.1f%% lower)\n",
           n, all, m, 100 * (1 - 1 / m) }'
  a="$(median "$tmp/naive_dp.$n")"
  b="$(median "$tmp/ddp.$n")"
  awk -v a="$a" -v b="$b" -v n="$n" -v r="$repeat" 'BEGIN {
    printf "N=%d, median of %d rounds: naive_dp %.0f tokens/s, ddp %.0f tokens/s: ddp step time %.1f%% lower\n",
           n, r, a, b, 100 * (1 - a / b) }'
done

if [[ ! -f "$peer" ]]; then
  echo "PyTorch peer skipped: $peer not found"
elif ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "PyTorch peer skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
else
  line="$(OMP_NUM_THREADS=1 /usr/bin/python3 "$peer" --strategy ddp --world 2 --steps "$steps" \
    --threads 1 2>&1 | grep -m1 tokens_per_s)"
  echo "pytorch   N=2 DDP (gloo)                     $line"
  torch_tok="$(sed -E 's/.*tokens_per_s=([0-9.]+).*/\1/' <<<"$line")"
  if [[ -f "$tmp/ddp.2" ]]; then
    awk -v a="$(median "$tmp/ddp.2")" -v b="$torch_tok" \
      'BEGIN { printf "ddp / PyTorch DDP on 2 ranks: %.1fx tokens/s\n", a / b }'
  fi
fi
