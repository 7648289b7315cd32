#!/usr/bin/env bash
# The trainer's "done:" line reports FLOP/token summed over every rank, per token of the global
# batch (common/train/train_main.cc): the model's matrix-product FLOPs per token, whatever the
# split. Each stage below splits the work differently (ZeRO over the batch, a pipeline over the
# layers, tensor parallelism over the hidden dimension, hybrid_3d all three) and must print the
# baseline's figure; full recomputation must print more (one more forward of every block).
# A count of rank 0's share alone printed half (2 ranks) or a quarter of it.
#   usage: flop_per_token_test.sh BASELINE   (the other stages' binaries at ../<stage>/train)
set -u
base=$1
dir=$(dirname "$(dirname "$base")")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--model tiny --steps 3 --eval_every 0 --global_batch 8 --timeout 120)
fails=0
flops() {  # NAME BIN ARGS...: prints the run's FLOP/token
  local name=$1 bin=$2
  shift 2
  if ! timeout 300 "$bin" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: the run failed:" >&2; cat "$tmp/$name.log" >&2
    return 1
  fi
  grep -o '[0-9.e+]* FLOP/token' "$tmp/$name.log" | cut -d' ' -f1
}
want=$(flops baseline "$base") || exit 1
[ -n "$want" ] || { echo "FAIL baseline: no FLOP/token in its done: line"; exit 1; }
echo "baseline: $want FLOP/token"
check() {  # NAME BIN ARGS...
  local name=$1 got
  got=$(flops "$@") || { fails=$((fails + 1)); return; }
  if [ "$got" = "$want" ]; then
    echo "ok   $name: $got FLOP/token"
  else
    echo "FAIL $name: $got FLOP/token, the baseline's is $want"
    fails=$((fails + 1))
  fi
}
check zero2 "$dir/zero2/train" --world_size 2
check 1f1b "$dir/1f1b/train" --world_size 2 --micro_batches 2
check tensor_parallel "$dir/tensor_parallel/train" --world_size 2
check hybrid_3d "$dir/hybrid_3d/train" --world_size 4 --dp 2 --pp 2 --tp 1 --micro_batches 2
check hybrid_3d_tp "$dir/hybrid_3d/train" --world_size 4 --dp 1 --pp 2 --tp 2 --micro_batches 2
# Full recomputation runs every block's forward again: more FLOPs per token, on every split.
recomputed=$(flops recompute "$dir/tensor_parallel/train" --world_size 2 --recompute full) ||
  fails=$((fails + 1))
if awk -v a="$recomputed" -v b="$want" 'BEGIN { exit !(a > b) }'; then
  echo "ok   tensor_parallel --recompute full: $recomputed FLOP/token > $want"
else
  echo "FAIL tensor_parallel --recompute full: $recomputed FLOP/token, not above $want"
  fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
