#!/usr/bin/env bash
# Bad input to the tp_2d / tp_2p5d train binaries: each case must end every rank with exit 2 and
# exactly one line "error: ..." naming the offending values; a hang is a failure (timeout).
#   usage: tp2d_bad_input_test.sh path/to/train tp_2d|tp_2p5d
set -u
bin=$1
stage=$2
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet --model tiny)
# tiny: H = 2 heads, C = 32, V = 256.
if [[ "$stage" == tp_2d ]]; then
  expect_exit_2 not_a_square "tp_2d needs P = q×q ranks: world size 6 is not a square" -- \
    "$bin" --world_size 6 "${fast[@]}"
  expect_exit_2 not_a_square_in_ranks "world size 2 is not a square" -- \
    mpiexec -n 2 "$bin" --world_size 2 "${fast[@]}"
  expect_exit_2 q_not_dividing_heads "grid side q=3 does not divide H=2, C=32, 4C=128 and V=256" -- \
    "$bin" --world_size 9 "${fast[@]}"
  expect_exit_2 batch_not_divisible "global batch 5 is not divisible by d·q = 2" -- \
    "$bin" --world_size 4 --global_batch 5 "${fast[@]}"
  expect_exit_2 batch_not_divisible_in_ranks "global batch 5 is not divisible by d·q = 2" -- \
    mpiexec -n 4 "$bin" --world_size 4 --global_batch 5 "${fast[@]}"
else
  expect_exit_2 not_q2d "tp_2p5d needs P = q×q×d ranks: world size 6 is not q²·2 (--depth 2)" -- \
    "$bin" --world_size 6 --depth 2 "${fast[@]}"
  expect_exit_2 not_q2d_in_ranks "world size 2 is not q²·4 (--depth 4)" -- \
    mpiexec -n 2 "$bin" --world_size 2 --depth 4 "${fast[@]}"
  expect_exit_2 depth_zero "--depth 0 must be at least 1" -- \
    "$bin" --world_size 8 --depth 0 "${fast[@]}"
  expect_exit_2 q_not_dividing_heads "grid side q=3 does not divide H=2" -- \
    "$bin" --world_size 18 --depth 2 "${fast[@]}"
  expect_exit_2 batch_not_divisible "global batch 6 is not divisible by d·q = 4" -- \
    "$bin" --world_size 8 --depth 2 --global_batch 6 "${fast[@]}"
fi
grid4=(--world_size 4)  # a 2×2 grid: tp_2p5d at depth 1
[[ "$stage" == tp_2p5d ]] && grid4+=(--depth 1)
# --recompute none, selective and full are the walk's; ZeRO-R's Pa and Pa+cpu are not.
expect_exit_2 partition_refused "--partition_activations: $stage's checkpoints are already split" \
  -- "$bin" --recompute full --partition_activations "${fast[@]}"
expect_exit_2 partition_refused_in_ranks "--partition_activations: $stage's checkpoints" -- \
  mpiexec -n 4 "$bin" "${grid4[@]}" --recompute full --partition_activations "${fast[@]}"

finish
