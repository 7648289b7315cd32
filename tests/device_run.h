// A data-parallel stage with --device cuda's placement against the same stage on the CPU, at the
// ranks of test_world(), without a GPU: the device run's model, states and activations on a
// guarded FakeDevice (common/testing/fake_device.h) with the CPU kernels as the device's, its
// collectives given device tensors, which the MPI backend stages through host buffers
// (common/comm/process_group_staging.h). Shared by the *_device_test of stages/naive_dp, ddp,
// zero1, zero2 and zero3; each then checks the staging its collectives must do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/tensor/precision.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// Builds the stage's strategy over `dp`.
using DpStrategyFactory = std::function<std::unique_ptr<Strategy>(
    const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed)>;

/// Trains tiny for `steps` steps (global batch 4, lr 3e-3, weight decay 0.1) on the CPU and on a
/// guarded FakeDevice, each over its own duplicate of test_world(), evaluates the last batch
/// once, then get_state. gtest EXPECTs: losses, the evaluation loss and the final state (params,
/// m, v) bit for bit, the same CommStats bytes, no staging on the CPU run, and every byte that
/// crossed host <-> device accounted for: the initial parameters, each step's ids (tokens twice,
/// targets once) and the evaluation's (each once) up, get_state's 3Ψ floats down, plus the
/// staging. `params_up_bytes`: the bytes of the initial parameters a rank copies up (-1: 4Ψ, the
/// replicated parameters; ZeRO-3 copies only its shard, 4·count(r)). Returns the device group's
/// StagingStats of the training steps and get_state, the evaluation's left out (collective over
/// the world).
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          int64_t params_up_bytes = -1);

/// Copies a stage makes itself between host and device, besides the staging and the ids:
/// `params_up` the initial parameters' bytes (-1: 4Ψ), `up` bytes more up (ZeRO-Offload's
/// updated shards), and `down` bytes down in place of get_state's 3Ψ floats (-1: those;
/// offloaded state is already on the host).
struct DirectCopies {
  int64_t params_up = -1;
  int64_t up = 0;
  int64_t down = -1;
};

/// The same, for a stage whose own copies are `copies`.
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies);

/// Builds the stage over `dp` for the tiny model on a device, with ZeRO-Offload or without.
using OffloadFactory =
    std::function<std::unique_ptr<Strategy>(const GPT& model, ProcessGroup& dp, bool offload)>;

/// Model-state bytes (parameters + gradients + optimizer state) per device, as the MemoryTracker
/// counts them, after one step: [0] without offload, [1] with.
struct OffloadBytes {
  int64_t device[2] = {0, 0};
  int64_t host[2] = {0, 0};
};

/// On a guarded FakeDevice, one training step of tiny (2 sequences per rank) without and then
/// with ZeRO-Offload, each measured by the tracker per device; gtest EXPECTs every report row of
/// the offloaded stage to agree with its formula (report_row_ok). `precision`: the model's
/// activations in storage_dtype(precision); the factory must build the stage in that precision.
/// Collective over test_world().
OffloadBytes measure_offload(const OffloadFactory& make,
                             TrainPrecision precision = TrainPrecision::kFP32);

/// A checkpoint resumed into an offloaded stage (set_state) must restore the host's master shard
/// (fp32: refreshed from the device; 16-bit: AdamW's, written on the host): on a guarded
/// FakeDevice, stage A trains a step and saves (get_state), a fresh B loads it, both train the
/// same next step; gtest EXPECTs their states bit-identical. `precision` as measure_offload.
void expect_offload_resumes_exactly(const OffloadFactory& make,
                                    TrainPrecision precision = TrainPrecision::kFP32);
/// The same in mixed precision (--precision bf16 / fp16): the model's activations in
/// storage_dtype(precision), the factory building the stage with that precision. The initial
/// parameters cross rounded to 16 bits (2Ψ, not 4Ψ); `copies.up` must hold the stage's fp32
/// master copy going up once (4Ψ replicated, 4·S_r for a shard). get_state's 12Ψ down are the
/// master copy, m and v. fp32 is the overload above.
StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies, TrainPrecision precision);

/// MixedPrecision's overflow hook for the object's lifetime: step `step`'s loss scale times 2^64
/// on the data-parallel ranks listed in `ranks` ("0", "0,2"), so fp16 gradients overflow there
/// (common/train/mixed_precision.h, LLMP_TEST_OVERFLOW_STEP / _RANKS). The stage must be built
/// while it lives (the hook is read at construction).
class InjectedOverflow {
 public:
  InjectedOverflow(int step, const char* ranks);
  ~InjectedOverflow();
  InjectedOverflow(const InjectedOverflow&) = delete;
  InjectedOverflow& operator=(const InjectedOverflow&) = delete;
};

/// Builds ZeRO-1 or ZeRO-2 over `dp` in mixed precision `mp` (fp32: mp.precision kFP32).
using ShardedFactory = std::function<std::unique_ptr<Strategy>(
    const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
    const MixedPrecisionConfig& mp)>;

/// ZeRO-1 and ZeRO-2, whose collectives stage the same bytes: per step the reduce-scatter reads
/// the Ψ-element gradient (e·Ψ down) and writes this rank's shard (e·S_r up), the in-place
/// all_gather reads the shard (e·S_r down) and writes the Ψ parameters (e·Ψ up), e the element's
/// bytes (4 in fp32, 2 in bf16/fp16); get_state gathers the sharded m and v, and in 16 bits the
/// master shard too (4·S_r down, 4Ψ up each). In 16 bits the fp32 master shard also goes up once
/// (4·S_r). expect_device_run_equals_cpu's checks in `precision` (loss scale 1024 for fp16), plus
/// those staging totals, gtest EXPECTs. S_r = ShardLayout(Ψ, N).count[r], tiny's Ψ.
void expect_sharded_run_equals_cpu(const ShardedFactory& make, int steps,
                                   TrainPrecision precision);

}  // namespace llmp
