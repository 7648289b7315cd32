#!/usr/bin/env bash
# Bad input to the tp_3d stage's train binary: each case must end every rank with exit 2 and
# exactly one line "error: ..." naming the offending values; a hang is a failure (timeout).
#   usage: tp3d_bad_input_test.sh path/to/train
set -u
bin=$1
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)
# P must be q³.
expect_exit_2 p_not_a_cube "tp_3d needs P = q×q×q ranks: world size 6 is not a cube" -- \
  "$bin" --world_size 6 "${fast[@]}"
# Inside the ranks (mpiexec directly: the launcher's checks are skipped), every rank must end.
expect_exit_2 p_not_a_cube_in_ranks "world size 2 is not a cube" -- \
  mpiexec -n 2 "$bin" --world_size 2 --model tiny "${fast[@]}"
# q = 2 needs whole heads: tiny with H = 1.
expect_exit_2 q_not_dividing_heads "needs q | H, q² | C and q² | V: H=1 C=32 V=256" -- \
  "$bin" --model tiny --heads 1 --world_size 8 "${fast[@]}"
# gpt2 at q = 2: q² = 4 does not divide V = 50257.
expect_exit_2 q2_not_dividing_vocab "H=12 C=768 V=50257" -- \
  "$bin" --model gpt2 --world_size 8 "${fast[@]}"
# The batch is split into q² = 4 sub-blocks of sequences.
expect_exit_2 batch_not_divisible "global batch 6 is not divisible by q² = 4" -- \
  "$bin" --model tiny --world_size 8 --global_batch 6 "${fast[@]}"
expect_exit_2 batch_not_divisible_in_ranks "global batch 6 is not divisible by q² = 4" -- \
  mpiexec -n 8 "$bin" --model tiny --world_size 8 --global_batch 6 "${fast[@]}"
# The walk recomputes (selective, full), but has no ZeRO-R Pa: refused, not ignored.
expect_exit_2 partition_refused "--partition_activations: tp_3d's checkpoints are already split" \
  -- "$bin" --model tiny --world_size 8 --recompute full --partition_activations "${fast[@]}"

finish
