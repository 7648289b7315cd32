#!/usr/bin/env bash
# --device: refused by name where it cannot run, before any rank starts (exit 2, one line).
# Usage: device_flag_test.sh BASELINE_TRAIN MOE_TRAIN EXPECT_ERROR_SH
#   unknown_device        --device tpu                         "unknown device 'tpu'"
#   device_unsupported    moe --device cuda                    "moe runs on the CPU only"
#   device_mixed          baseline --device cuda --precision bf16   "fp32 only so far"
#   device_unavailable    baseline --device cuda on a machine without a GPU (or a binary built
#                         without CUDA): "--device cuda: no CUDA device (...)" / "no kernels for
#                         device cuda (...)". With a GPU the same command trains one step, and
#                         the case checks that instead (exit 0 and a final loss line).
set -u
baseline=$1 moe=$2
source "$3"  # expect, expect_exit_2, finish
fast=(--steps 1 --eval_every 0 --quiet --model tiny)

expect_exit_2 unknown_device "unknown device 'tpu'" -- "$baseline" --device tpu "${fast[@]}"
expect_exit_2 device_unsupported "--device cuda: moe runs on the CPU only" -- \
  "$moe" --device cuda --world_size 2 "${fast[@]}"
expect_exit_2 device_mixed "the GPU path trains in fp32 only so far" -- \
  "$baseline" --device cuda --precision bf16 "${fast[@]}"

out="$expect_tmp/gpu_out"
if timeout 300 "$baseline" --device cuda "${fast[@]}" >"$out" 2>&1; then
  echo "ok   device_unavailable: a GPU is present; --device cuda trained one step:"
  tail -3 "$out"
else
  expect_exit_2 device_unavailable "--device cuda: " -- "$baseline" --device cuda "${fast[@]}"
fi
finish
