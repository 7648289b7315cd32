#!/usr/bin/env bash
# Bad input to a tensor-parallel stage's train binary (after tests/bad_input_test.sh's shared
# cases): each case must end every rank with a non-zero exit and exactly one line "error: ..."
# naming the offending values; a hang is a failure (timeout).
#   usage: tp_bad_input_test.sh path/to/train
set -u
bin=$1
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)
# mini: H = 4 heads, 4C = 512, V = 256. t = 3 divides none of them.
expect t_not_dividing_heads "tensor-parallel size 3 (rank 0) does not divide H=4, 4C=512 and V=256" -- \
  "$bin" --world_size 3 "${fast[@]}"
# Inside the ranks (mpiexec directly: the launcher's checks are skipped), every rank must end.
expect t_not_dividing_heads_in_ranks "tensor-parallel size 3" -- \
  mpiexec -n 3 "$bin" --world_size 3 "${fast[@]}"
# tiny has H = 2 heads: 4 ranks cannot each hold whole heads.
expect t_not_dividing_tiny_heads "does not divide H=2" -- \
  "$bin" --model tiny --world_size 4 "${fast[@]}"
# gpt2: t = 3 divides H = 12 and 4C = 3072 but not V = 50257.
expect t_not_dividing_vocab "V=50257" -- "$bin" --model gpt2 --world_size 3 "${fast[@]}"
expect grid_not_matching_world "dp 1 × pp 1 × tp 2 = 2 does not match the world size 4" -- \
  "$bin" --tp 2 --world_size 4 "${fast[@]}"
expect grid_not_matching_world_in_ranks "dp 1 × pp 1 × tp 4 = 4 does not match the world size 2" -- \
  mpiexec -n 2 "$bin" --tp 4 --world_size 2 --model tiny "${fast[@]}"

finish
