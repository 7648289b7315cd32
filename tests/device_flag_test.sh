#!/usr/bin/env bash
# --device: refused by name where it cannot run, before any rank starts (exit 2, one line).
# Usage: device_flag_test.sh BASELINE_TRAIN TP_2D_TRAIN EXPECT_ERROR_SH ZERO3_TRAIN
#   unknown_device        --device tpu                         "unknown device 'tpu'"
#   device_unsupported    tp_2d --device cuda                  "tp_2d runs on the CPU only"
#   device_mixed          baseline --device cuda --precision bf16   "fp32 only so far"
#   device_unavailable    baseline --device cuda on a machine without a GPU (or a binary built
#                         without CUDA): "--device cuda: no CUDA device (...)" / "no kernels for
#                         device cuda (...)". With a GPU the same command trains one step, and
#                         the case checks that instead (exit 0 and a final loss line).
#   device_host_only      (with a GPU only) zero3 --device cuda --tile_factor 2 and
#                         --constant_buffer_mb 0.25: "host memory" (without a GPU the "no CUDA
#                         device" refusal comes first, and these two cases are reported skipped)
set -u
baseline=$1 tp_2d=$2 zero3=$4
source "$3"  # expect, expect_exit_2, finish
fast=(--steps 1 --eval_every 0 --quiet --model tiny)

expect_exit_2 unknown_device "unknown device 'tpu'" -- "$baseline" --device tpu "${fast[@]}"
expect_exit_2 device_unsupported "--device cuda: tp_2d runs on the CPU only" -- \
  "$tp_2d" --device cuda --world_size 4 "${fast[@]}"
expect_exit_2 device_mixed "the GPU path trains in fp32 only so far" -- \
  "$baseline" --device cuda --precision bf16 "${fast[@]}"

out="$expect_tmp/gpu_out"
if timeout 300 "$baseline" --device cuda "${fast[@]}" >"$out" 2>&1; then
  echo "ok   device_unavailable: a GPU is present; --device cuda trained one step:"
  tail -3 "$out"
  expect_exit_2 device_host_only "--tile_factor 2 with --device cuda: weight tiles are host memory" \
    -- "$zero3" --device cuda --world_size 2 --tile_factor 2 "${fast[@]}"
  expect_exit_2 device_host_only "--constant_buffer_mb with --device cuda: the constant buffer" \
    -- "$zero3" --device cuda --world_size 2 --constant_buffer_mb 0.25 "${fast[@]}"
else
  expect_exit_2 device_unavailable "--device cuda: " -- "$baseline" --device cuda "${fast[@]}"
  echo "skip device_host_only: no GPU, so --device cuda stops at \"no CUDA device\" first"
fi
finish
