#!/usr/bin/env bash
# Bad input to a pipeline stage's train binary (after tests/bad_input_test.sh's shared cases):
# each case must end every rank with a non-zero exit and exactly one line "error: ..." naming
# the offending value; a hang is a failure (timeout).
#   usage: pipeline_bad_input_test.sh path/to/train [plain|naive|interleaved|chimera]
#   plain: --micro_batches; naive: no --micro_batches (m = 1); interleaved: also --chunks;
#   chimera: the model is cut into p stages (not p·v), p must be even and m % p == 0, and every
#   refusal exits 2 (bad input), before the launch and inside the ranks alike.
set -u
bin=$1
kind=${2:-plain}
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)
# tiny has L = 2 layers: 4 ranks cannot hold p·v ≥ 4 equal slices (Chimera: p = 4 stages).
layers_msg="layers 2 not divisible by p·v"
[ "$kind" = chimera ] && layers_msg="layers 2 not divisible by p = 4 stages per pipeline (chimera)"
expect layers_not_divisible "$layers_msg" -- \
  "$bin" --model tiny --layers 2 --world_size 4 "${fast[@]}"
expect layers_not_divisible_in_ranks "$layers_msg" -- \
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

if [ "$kind" = chimera ]; then
  # expect_exit_2: exit status 2 (bad input) from the launcher and from every rank alike.
  odd=(--model tiny --layers 6 --world_size 3 --micro_batches 6 --global_batch 12 "${fast[@]}")
  expect_exit_2 odd_pipeline_stages "got m=6, p=3" -- "$bin" "${odd[@]}"
  expect_exit_2 odd_pipeline_stages_in_ranks "got m=6, p=3" -- mpiexec -n 3 "$bin" "${odd[@]}"
  # m = 6 divides the global batch 12 but not into units of p = 4.
  unit=(--model tiny --layers 4 --world_size 4 --micro_batches 6 --global_batch 12 "${fast[@]}")
  expect_exit_2 micro_batches_not_multiple_of_p "m % p == 0 (units of p micro-batches, half per direction); got m=6, p=4" -- \
    "$bin" "${unit[@]}"
  expect_exit_2 micro_batches_not_multiple_of_p_in_ranks "got m=6, p=4" -- \
    mpiexec -n 4 "$bin" "${unit[@]}"
  layers=(--model tiny --layers 6 --world_size 4 "${fast[@]}")
  expect_exit_2 layers_not_divisible_by_p "layers 6 not divisible by p = 4 stages per pipeline (chimera)" -- \
    "$bin" "${layers[@]}"
  expect_exit_2 layers_not_divisible_by_p_in_ranks "layers 6 not divisible by p = 4" -- \
    mpiexec -n 4 "$bin" "${layers[@]}"
fi

finish
