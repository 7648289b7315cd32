#!/usr/bin/env bash
# Bad input to a long-sequence (context-parallel) stage's train binary, after
# tests/bad_input_test.sh's shared cases: each case must end every rank with a non-zero exit and
# exactly one line "error: ..." naming the offending values; a hang is a failure (timeout).
#   usage: cp_bad_input_test.sh path/to/train STAGE    (STAGE: ulysses, ring_attention,
#                                                       ring_self_attention)
set -u
bin=$1
stage=$2
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet --model tiny)
expect recompute_selective_refused "--recompute selective: $stage recomputes whole blocks only" \
  -- "$bin" --world_size 2 --recompute selective "${fast[@]}"
expect partition_refused "--partition_activations: $stage splits the sequence" -- \
  "$bin" --world_size 2 --recompute full --partition_activations "${fast[@]}"
expect attention_refused "--attention flash: $stage attends through its own core" -- \
  "$bin" --world_size 2 --attention flash "${fast[@]}"
case "$stage" in
  ulysses)  # T = 16 over 3 ranks; then tiny's H = 2 heads over 4 ranks
    expect t_not_divisible "T=16 is not divisible by p=3" -- "$bin" --world_size 3 "${fast[@]}"
    expect h_not_divisible "p=4 does not divide H=2" -- "$bin" --world_size 4 "${fast[@]}"
    expect h_not_divisible_in_ranks "p=4 does not divide H=2" -- \
      mpiexec -n 4 "$bin" --world_size 4 "${fast[@]}"
    ;;
  ring_attention)  # the balanced split cuts T into 2p chunks: 2p = 6 does not divide 16
    expect t_not_divisible "T=16 is not divisible by 2p=6" -- "$bin" --world_size 3 "${fast[@]}"
    expect t_not_divisible_in_ranks "T=16 is not divisible by 2p=6" -- \
      mpiexec -n 3 "$bin" --world_size 3 "${fast[@]}"
    expect ctx_not_divisible "T=20 is not divisible by 2p=8" -- \
      "$bin" --world_size 4 --ctx 20 "${fast[@]}"
    ;;
  ring_self_attention)
    expect t_not_divisible "T=16 is not divisible by p=3" -- "$bin" --world_size 3 "${fast[@]}"
    # --device cuda is the device's to refuse now (no GPU, or no CUDA in the binary), never the
    # stage's; with a GPU the same command trains one step.
    if ! timeout 300 "$bin" --world_size 2 --device cuda "${fast[@]}" >/dev/null 2>&1; then
      expect device_is_the_devices_to_refuse "--device cuda: no " -- \
        "$bin" --world_size 2 --device cuda "${fast[@]}"
    fi
    expect t_not_divisible_in_ranks "T=16 is not divisible by p=3" -- \
      mpiexec -n 3 "$bin" --world_size 3 "${fast[@]}"
    ;;
  *) echo "FAIL unknown stage '$stage'"; fails=$((fails + 1)) ;;
esac
expect negative_ctx "ctx -5 must not be negative" -- "$bin" --ctx -5 "${fast[@]}"

finish
