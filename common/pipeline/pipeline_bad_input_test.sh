#!/usr/bin/env bash
# Bad input to a pipeline stage's train binary (after tests/bad_input_test.sh's shared cases):
# each case must end every rank with a non-zero exit and exactly one line "error: ..." naming
# the offending value; a hang is a failure (timeout).
#   usage: pipeline_bad_input_test.sh path/to/train [plain|naive|interleaved]
#   plain: --micro_batches; naive: no --micro_batches (m = 1); interleaved: also --chunks.
set -u
bin=$1
kind=${2:-plain}
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)
# tiny has L = 2 layers: 4 ranks cannot hold p·v ≥ 4 equal slices.
expect layers_not_divisible "layers 2 not divisible by p·v" -- \
  "$bin" --model tiny --layers 2 --world_size 4 "${fast[@]}"
expect layers_not_divisible_in_ranks "layers 2 not divisible by p·v" -- \
  mpiexec -n 4 "$bin" --model tiny --layers 2 --world_size 4 "${fast[@]}"

if [ "$kind" != naive ]; then
  expect micro_batches_not_dividing_batch "global batch 16 is not divisible by 3 micro-batches" -- \
    "$bin" --global_batch 16 --micro_batches 3 "${fast[@]}"
  expect zero_micro_batches "--micro_batches 0 must be at least 1" -- \
    "$bin" --micro_batches 0 "${fast[@]}"
  # Inside the ranks (mpiexec directly: the launcher's checks are skipped), every rank must end.
  expect micro_batches_in_ranks "global batch 16 is not divisible by 3 micro-batches" -- \
    mpiexec -n 2 "$bin" --world_size 2 --model tiny --micro_batches 3 "${fast[@]}"
else
  expect no_micro_batches_flag "--micro_batches" -- "$bin" --micro_batches 4 "${fast[@]}"
fi

if [ "$kind" = interleaved ]; then
  # Megatron's interleaved schedule needs m % p == 0: m = 1 < p = 2 micro-batches.
  expect too_few_micro_batches "interleaved_1f1b needs m % p == 0" -- \
    "$bin" --world_size 2 --micro_batches 1 "${fast[@]}"
  expect too_few_micro_batches_in_ranks "interleaved_1f1b needs m % p == 0" -- \
    mpiexec -n 2 "$bin" --world_size 2 --micro_batches 1 "${fast[@]}"
  expect zero_chunks "--chunks 0 must be at least 1" -- "$bin" --chunks 0 "${fast[@]}"
  expect chunks_not_dividing_layers "layers 4 not divisible by p·v = 6 (p=2, v=3)" -- \
    "$bin" --world_size 2 --layers 4 --chunks 3 "${fast[@]}"
fi

finish
