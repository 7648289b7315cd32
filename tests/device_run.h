// A data-parallel stage with --device cuda's placement against the same stage on the CPU, at the
// ranks of test_world(), without a GPU: the device run's model, states and activations on a
// guarded FakeDevice (common/testing/fake_device.h) with the CPU kernels as the device's, its
// collectives given device tensors, which the MPI backend stages through host buffers
// (common/comm/process_group_staging.h). Shared by stages/naive_dp and stages/zero2's
// *_device_test; each then checks the staging its collectives must do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/tensor/precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// Builds the stage's strategy over `dp`.
using DpStrategyFactory = std::function<std::unique_ptr<Strategy>(
    const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed)>;

/// Trains tiny for `steps` steps (global batch 4, lr 3e-3, weight decay 0.1) on the CPU and on a
/// guarded FakeDevice, each over its own duplicate of test_world(), then get_state. gtest
/// EXPECTs: losses and final state (params, m, v) bit for bit, the same CommStats bytes, no
/// staging on the CPU run, and every byte that crossed host <-> device accounted for: the
/// initial parameters and each step's ids (tokens twice, targets once) up, get_state's 3Ψ floats
/// down, plus the staging. Returns the device group's StagingStats (collective over the world).
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps);

/// Copies a stage makes itself between host and device, besides the staging, the initial
/// parameters and the ids: `up` bytes more up (ZeRO-Offload's updated shards), and `down` bytes
/// down in place of get_state's 3Ψ floats (-1: those; offloaded state is already on the host).
struct DirectCopies {
  int64_t up = 0;
  int64_t down = -1;
};

/// The same, for a stage whose own copies are `copies`.
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies);

/// The same in mixed precision (--precision bf16 / fp16): the model's activations in
/// storage_dtype(precision), the factory building the stage with that precision. The initial
/// parameters cross rounded to 16 bits (2Ψ, not 4Ψ); `copies.up` must hold the stage's fp32
/// master copy going up once (4Ψ replicated, 4·S_r for a shard). get_state's 12Ψ down are the
/// master copy, m and v. fp32 is the overload above.
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies, TrainPrecision precision);

}  // namespace llmp
