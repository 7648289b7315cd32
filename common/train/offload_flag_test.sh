#!/usr/bin/env bash
# --offload on a ZeRO stage's train binary (zero2, zero3): refused by name before any rank starts
# (exit 2, one line) where ZeRO-Offload cannot run. Usage: offload_flag_test.sh TRAIN EXPECT_ERROR_SH
#   offload_unknown   --offload gradients          CLI11 names the value and the choices
#   offload_on_cpu    --offload optimizer          "the optimizer state is already on the host"
#                     (also with --precision bf16: the refusal is the device's absence)
#   offload_bf16      --device cuda --offload optimizer --precision bf16 (and fp16): accepted.
#                     With a GPU it trains one step (exit 0, a final loss line); without one the
#                     only refusal is the device's ("--device cuda: no ..."), never ZeRO-Offload's.
# (The stages' *_device_test check the strategies on a FakeDevice.)
set -u
bin=$1
source "$2"  # expect, expect_exit_2, finish
fast=(--steps 1 --eval_every 0 --quiet --model tiny --world_size 2)

expect_exit_2 offload_unknown "--offload: gradients not in {none,optimizer}" -- \
  "$bin" --offload gradients "${fast[@]}"
expect_exit_2 offload_on_cpu "--offload optimizer with --device cpu: the optimizer state is already" \
  -- "$bin" --offload optimizer "${fast[@]}"
expect_exit_2 offload_on_cpu_bf16 "--offload optimizer with --device cpu" \
  -- "$bin" --offload optimizer --precision bf16 "${fast[@]}"
out="$expect_tmp/gpu_out"
for p in bf16 fp16; do
  if timeout 300 "$bin" --device cuda --offload optimizer --precision $p "${fast[@]}" \
      >"$out" 2>&1; then
    echo "ok   offload_$p: a GPU is present; --offload optimizer --precision $p trained one step:"
    tail -3 "$out"
  else
    expect_exit_2 "offload_$p" "--device cuda: no " -- \
      "$bin" --device cuda --offload optimizer --precision $p "${fast[@]}"
  fi
done
finish
