#!/usr/bin/env bash
# --device: refused by name where it cannot run, before any rank starts (exit 2, one line).
# Usage: device_flag_test.sh BASELINE_TRAIN CPU_ONLY_STAGE FP32_ONLY_TRAIN EXPECT_ERROR_SH ZERO3_TRAIN
#   unknown_device        --device tpu                         "unknown device 'tpu'"
#   device_unsupported    cpu_only_stage --device cuda         "cpu_only_stage runs on the CPU
#                         only" (tests:cpu_only_stage, tensor_parallel's spec without
#                         supports_device: every real stage takes --device since tp_3d does)
#   device_mixed          tp_2d --device cuda --precision bf16 "--precision bf16: tp_2d trains
#                         in fp32 only" (FP32_ONLY_TRAIN: a stage that takes --device
#                         but not --precision, named by its folder): a stage without a 16-bit path
#                         says so, not that its GPU path lacks one (every stage that trains
#                         bf16/fp16 on the CPU does on a GPU)
#   device_host_only      zero3 --device cuda --tile_factor 2 and --constant_buffer_mb 0.25:
#                         "host memory" (the stage's own checks run before the device's)
#   device_unavailable    baseline --device cuda on a machine without a GPU (or a binary built
#                         without CUDA): "--device cuda: no CUDA device (...)" / "no kernels for
#                         device cuda (...)". With a GPU the same command trains one step, and
#                         the case checks that instead (exit 0 and a final loss line); the
#                         same for baseline --device cuda --precision bf16 (accepted: the
#                         refusal, if any, is the device's, never "fp32 only").
set -u
baseline=$1 cpu_only_stage=$2 fp32_only=$3 zero3=$5
fp32_only_name=$(basename "$(dirname "$fp32_only")")
source "$4"  # expect, expect_exit_2, finish
fast=(--steps 1 --eval_every 0 --quiet --model tiny)

expect_exit_2 unknown_device "unknown device 'tpu'" -- "$baseline" --device tpu "${fast[@]}"
expect_exit_2 device_unsupported "--device cuda: cpu_only_stage runs on the CPU only" -- \
  "$cpu_only_stage" --device cuda --world_size 2 "${fast[@]}"
expect_exit_2 device_mixed \
  "--precision bf16: $fp32_only_name trains in fp32 only (mixed precision:" -- \
  "$fp32_only" --device cuda --precision bf16 --world_size 4 "${fast[@]}"
expect_exit_2 device_host_only "--tile_factor 2 with --device cuda: weight tiles are host memory" \
  -- "$zero3" --device cuda --world_size 2 --tile_factor 2 "${fast[@]}"
expect_exit_2 device_host_only "--constant_buffer_mb with --device cuda: the constant buffer" \
  -- "$zero3" --device cuda --world_size 2 --constant_buffer_mb 0.25 "${fast[@]}"

out="$expect_tmp/gpu_out"
if timeout 300 "$baseline" --device cuda "${fast[@]}" >"$out" 2>&1; then
  echo "ok   device_unavailable: a GPU is present; --device cuda trained one step:"
  tail -3 "$out"
else
  expect_exit_2 device_unavailable "--device cuda: " -- "$baseline" --device cuda "${fast[@]}"
fi
if timeout 300 "$baseline" --device cuda --precision bf16 "${fast[@]}" >"$out" 2>&1; then
  echo "ok   device_bf16: a GPU is present; --device cuda --precision bf16 trained one step:"
  tail -3 "$out"
else
  expect_exit_2 device_bf16 "--device cuda: no " -- \
    "$baseline" --device cuda --precision bf16 "${fast[@]}"
fi
finish
