#!/usr/bin/env bash
# Bad input to a stage's train binary: each case must end every rank with a non-zero exit and
# print exactly one line "error: ..." that names the offending value. A hang is a failure
# (timeout). Usage: bad_input_test.sh path/to/train [--skip=CASE ...] [--fp32_only]
#   [--save_world_size=N]
# --skip names a case that does not apply to the stage (naive_pp takes any global batch: m = 1).
# --fp32_only: the stage does not take --precision bf16 / fp16 (StageSpec::supports_precision),
# so --precision bf16 must be refused by name; without it that case is skipped.
# --save_world_size: ranks of the run that writes the checkpoint the checkpoint cases load (1
# unless the stage cannot run on one rank: Chimera needs an even number of pipeline stages).
set -u
bin=$1
shift
skip=" "
fp32_only=0
save_world_size=1
for a in "$@"; do
  case "$a" in
    --skip=*) skip+="${a#--skip=} " ;;
    --fp32_only) fp32_only=1 ;;
    --save_world_size=*) save_world_size=${a#--save_world_size=} ;;
    *) echo "unknown argument $a"; exit 2 ;;
  esac
done
[ "$fp32_only" -eq 1 ] || skip+="precision_refused "
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish
tmp=$expect_tmp

fast=(--steps 1 --eval_every 0 --quiet)
mkdir "$tmp/empty_dir"
: >"$tmp/empty.txt"
head -c 100 /dev/urandom >"$tmp/corrupt.safetensors"

expect unknown_flag "--no_such_flag" -- "$bin" --no_such_flag 3
expect bad_value "abc" -- "$bin" --steps abc
expect missing_data "/no/such/corpus" -- "$bin" --data /no/such/corpus
expect empty_data_dir "$tmp/empty_dir" -- "$bin" --data "$tmp/empty_dir"
expect empty_data_file "$tmp/empty.txt" -- "$bin" --data "$tmp/empty.txt"
# Data parallel: "... by data-parallel size 4"; pipelines: "... by micro-batches m=8".
expect indivisible_batch "global batch 30 is not divisible by" -- \
  "$bin" --global_batch 30 --world_size 4
expect unknown_preset "gpt5" -- "$bin" --model gpt5
expect corrupt_checkpoint "$tmp/corrupt.safetensors" -- "$bin" --load "$tmp/corrupt.safetensors"

# Refused before any rank starts: expect's one line, and exit status 2 (user_error).
# Mixed precision (common/tensor/precision.h): the precision, the loss scale, the stage.
expect_exit_2 unknown_precision "unknown precision 'fp8'" -- "$bin" --precision fp8
expect_exit_2 negative_loss_scale "loss scale -1" -- \
  "$bin" --precision fp16 --loss_scale -1
expect_exit_2 loss_scale_without_fp16 "--loss_scale 128" -- \
  "$bin" --precision bf16 --loss_scale 128
expect_exit_2 precision_refused "--precision bf16" -- "$bin" --precision bf16
# Gradient clipping (common/optim/grad_clip.h): a norm bound is a finite number >= 0, on every
# stage (the stages that do not clip refuse a valid one: tests/clip_grad_test.sh).
expect_exit_2 negative_clip_grad "--clip_grad -1" -- "$bin" --clip_grad -1
# Activation recomputation (common/nn/recompute.h): the policy, k, and ZeRO-R's Pa, which only a
# stage with a tensor-parallel group takes (those skip partition_refused).
expect_exit_2 unknown_recompute "unknown recompute 'partial'" -- "$bin" --recompute partial
expect_exit_2 recompute_every_zero "recompute_every 0" -- \
  "$bin" --recompute full --recompute_every 0
expect_exit_2 recompute_every_without_full "--recompute_every 3 needs --recompute full" -- \
  "$bin" --recompute selective --recompute_every 3
expect_exit_2 partition_without_full "--partition_activations needs --recompute full" -- \
  "$bin" --partition_activations
expect_exit_2 partition_refused "has no tensor-parallel group" -- \
  "$bin" --recompute full --partition_activations
# Flash attention (common/nn/flash_attention.h): the method, the recomputation it makes moot, and
# the two causal chunks of T/2 its kernels take.
expect_exit_2 unknown_attention "unknown attention 'sparse'" -- "$bin" --attention sparse
expect_exit_2 flash_with_selective "--recompute selective makes again the probabilities" -- \
  "$bin" --attention flash --recompute selective
expect_exit_2 flash_odd_ctx "--attention flash: T=15 is odd" -- \
  "$bin" --attention flash --ctx 15 "${fast[@]}"
# ZeRO-R's Pa+cpu: the checkpoints of full recomputation, off a GPU.
expect_exit_2 cpu_checkpointing_without_full "--cpu_checkpointing needs --recompute full" -- \
  "$bin" --cpu_checkpointing
expect_exit_2 cpu_checkpointing_on_cpu "--cpu_checkpointing moves activation checkpoints off a GPU" -- \
  "$bin" --recompute full --cpu_checkpointing
# A padded vocabulary pads to a multiple of at least 1.
expect_exit_2 vocab_multiple_zero "--make_vocab_size_divisible_by: must be an integer of at least 1" -- \
  "$bin" --make_vocab_size_divisible_by 0
# --heads and --ctx override the preset: H must divide C (mini: C = 128), T must be positive.
expect_exit_2 heads_not_dividing_c "--heads 5 does not divide C=128" -- "$bin" --heads 5
expect_exit_2 negative_ctx_shared "ctx -1 must not be negative" -- "$bin" --ctx -1
# The arena (common/tensor/arena.h): its size, and --defrag without one.
expect_exit_2 negative_arena "arena_bytes -1 " -- "$bin" --arena_bytes -1
expect_exit_2 tiny_arena "arena_bytes 4096 " -- "$bin" --arena_bytes 4096
expect_exit_2 defrag_without_arena "--defrag needs --arena_bytes" -- "$bin" --defrag

# A real checkpoint of the tiny model, then loaded into mini: mismatched.
if timeout 120 "$bin" --model tiny --world_size "$save_world_size" "${fast[@]}" --save "$tmp/tiny.safetensors" \
    >/dev/null 2>"$tmp/save_err"; then
  expect mismatched_checkpoint "tiny" -- "$bin" --model mini --load "$tmp/tiny.safetensors"
  # The same file truncated: the header promises more bytes than the file has.
  head -c 2000 "$tmp/tiny.safetensors" >"$tmp/truncated.safetensors"
  expect truncated_checkpoint "$tmp/truncated.safetensors" -- \
    "$bin" --model tiny --load "$tmp/truncated.safetensors"
  # Inside the ranks (started by mpiexec directly, so the launcher's checks are skipped): every
  # rank must still end, with one message.
  expect corrupt_checkpoint_in_ranks "$tmp/corrupt.safetensors" -- \
    mpiexec -n 2 "$bin" --world_size 2 --model tiny "${fast[@]}" --load "$tmp/corrupt.safetensors"
  expect missing_data_in_ranks "/no/such/corpus" -- \
    mpiexec -n 2 "$bin" --world_size 2 --model tiny "${fast[@]}" --data /no/such/corpus
else
  echo "FAIL could not write a checkpoint to test with:"; cat "$tmp/save_err"; fails=$((fails + 1))
fi

finish
