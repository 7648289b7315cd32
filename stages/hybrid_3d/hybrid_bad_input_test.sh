#!/usr/bin/env bash
# Bad input to the hybrid_3d stage (after tests/bad_input_test.sh's shared cases): each case must
# end every rank with exactly one line "error: ..." naming the values, and exit 2; a hang fails.
#   usage: hybrid_bad_input_test.sh path/to/train
set -u
bin=$1
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"

fast=(--steps 1 --eval_every 0 --quiet)
# The grid against the world size (defaults dp = pp = tp = 2), before launch and inside the ranks.
expect_exit_2 grid_not_matching_world "dp 2 × pp 2 × tp 2 = 8 does not match the world size 4" -- \
  "$bin" --world_size 4 "${fast[@]}"
expect_exit_2 grid_not_matching_world_in_ranks "= 8 does not match the world size 2" -- \
  mpiexec -n 2 "$bin" --world_size 2 --model tiny "${fast[@]}"
# mini: H = 4, 4C = 512, V = 256; t = 3 divides none of them.
expect_exit_2 tp_not_dividing_heads "tensor-parallel size 3 does not divide H=4, 4C=512 and V=256" -- \
  "$bin" --dp 1 --pp 1 --tp 3 --world_size 3 "${fast[@]}"
expect_exit_2 tp_not_dividing_heads_in_ranks "tensor-parallel size 3" -- \
  mpiexec -n 3 "$bin" --dp 1 --pp 1 --tp 3 --world_size 3 "${fast[@]}"
# tiny has L = 2 layers: 4 pipeline stages cannot each hold one.
expect_exit_2 layers_not_dividing "layers 2 not divisible by p·v = 4 (p=4, v=1)" -- \
  "$bin" --model tiny --dp 1 --pp 4 --tp 1 --world_size 4 "${fast[@]}"
# Each replica's B/dp sequences are cut into m micro-batches.
expect_exit_2 batch_not_dividing "global batch 12 is not divisible by dp·m = 8 (dp=2, m=4)" -- \
  "$bin" --global_batch 12 "${fast[@]}"
expect_exit_2 micro_batches_zero "--micro_batches 0 must be at least 1" -- \
  "$bin" --micro_batches 0 "${fast[@]}"
# Sequence parallelism splits every sequence over tp.
expect_exit_2 sp_sequence_not_dividing "sequence length T=6 is not divisible by tp 4" -- \
  "$bin" --ctx 6 --sequence_parallel --dp 1 --pp 1 --tp 4 --world_size 4 "${fast[@]}"
# Interleaved 1F1B (v > 1) needs m % p == 0.
expect_exit_2 interleaved_m_not_multiple_of_p "m=3 is not divisible by pipeline stages p=2" -- \
  "$bin" --chunks 2 --layers 8 --micro_batches 3 --global_batch 12 "${fast[@]}"
expect_exit_2 partition_refused "--partition_activations is not supported by hybrid_3d" -- \
  "$bin" --recompute full --partition_activations "${fast[@]}"

finish
