#!/usr/bin/env bash
# --offload on a ZeRO stage's train binary (zero2, zero3): refused by name before any rank starts
# (exit 2, one line) where ZeRO-Offload cannot run. Usage: offload_flag_test.sh TRAIN EXPECT_ERROR_SH
#   offload_unknown   --offload gradients          CLI11 names the value and the choices
#   offload_on_cpu    --offload optimizer          "the optimizer state is already on the host"
#   offload_mixed     --device cuda --offload optimizer --precision bf16   "fp32 only so far"
# (On a GPU machine the run itself trains; the stages' *_device_test check the strategies.)
set -u
bin=$1
source "$2"  # expect, expect_exit_2, finish
fast=(--steps 1 --eval_every 0 --quiet --model tiny --world_size 2)

expect_exit_2 offload_unknown "--offload: gradients not in {none,optimizer}" -- \
  "$bin" --offload gradients "${fast[@]}"
expect_exit_2 offload_on_cpu "--offload optimizer with --device cpu: the optimizer state is already" \
  -- "$bin" --offload optimizer "${fast[@]}"
expect_exit_2 offload_mixed "fp32 only so far" -- \
  "$bin" --device cuda --offload optimizer --precision bf16 "${fast[@]}"
finish
