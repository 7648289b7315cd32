// ZeRO-3 with --device cuda's placement, at 2 ranks, without a GPU (tests/device_run.h: a guarded
// FakeDevice, bit for bit against ZeRO-3 on the CPU, every host <-> device byte accounted for;
// only this rank's parameter shard goes up at the start, 4·S_r bytes, not 4Ψ).
//
// Here, the staging its collectives must do per step, S_r = count(r) this rank's shard, n_f the
// final LayerNorm's elements, A_r = |unit L+1 ∩ shard r|. The walk (common/nn/unit_runner.h) is
// embed {0}, blocks {1..L}, head {L+1, 0}, blocks back {L..1}, embed back {}: a unit is freed
// after a step unless the next step reads it, so unit 0 and every block are all-gathered twice,
// ln_f once:
//   all_gather_v of each unit (shard part -> device unit)  down: this rank's part of the unit,
//       Σ = 2·S_r - A_r elements;  up: the whole unit, Σ = 2Ψ - n_f elements;
//   reduce_scatter_v of each unit's gradient (-> shard)     down: the unit's gradient, Σ = Ψ;
//       up: this rank's part of it, Σ = S_r;
// then get_state's three gathers of the sharded parameters, m and v (4·S_r down, 4Ψ up each).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/dp_util.h"
#include "stages/zero3/zero3.h"
#include "tests/device_run.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

TEST(Zero3OnDevice, EqualsZero3OnTheCpuWithEveryGatherStaged) {
  const GPTLayout layout = GPT(GPTConfig::preset("tiny")).layout();
  const int64_t psi = layout.num_params();
  const ShardLayout shards(psi, test_world().size());
  const int r = test_world().rank();
  const int64_t shard = shards.count[r];
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero3Strategy>(model, dp, opt, seed);
      },
      kSteps, /*params_up_bytes=*/4 * shard);
  const int f = layout.num_units() - 1;  // ln_f, the last unit of the flat buffer
  const int64_t n_f = layout.unit_numel(f);
  const int64_t a_r = shards.split_range(layout.unit_offset(f), psi)[r];
  const int64_t down = 4 * ((2 * shard - a_r) + psi), up = 4 * ((2 * psi - n_f) + shard);
  EXPECT_EQ(st.to_host_bytes, kSteps * down + 3 * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * up + 3 * 4 * psi);
}

// A checkpoint loaded on the device (set_state: each rank keeps its part of the full host state,
// from_host) moves exactly the three shards up, 3·4·S_r bytes, nothing down, no collective; a
// get_state then gathers back the same state bit for bit.
TEST(Zero3OnDevice, SetStateCopiesOnlyTheShardsUp) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny")).with_device(Device::kCUDA);
  const int64_t psi = model.layout().num_params();
  auto dp = test_world().duplicate();
  const int64_t shard = ShardLayout(psi, dp->size()).count[dp->rank()];
  std::vector<float> state(3 * psi), back(3 * psi);
  Zero3Strategy(model, *dp, AdamWConfig{}, 11)
      .get_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  for (int64_t i = psi; i < 3 * psi; ++i) state[i] = 1e-3f * static_cast<float>(i % 97);  // m, v
  Zero3Strategy s(model, *dp, AdamWConfig{}, 12);  // another seed: other parameters
  const int64_t up = dev.h2d_bytes(), down = dev.d2h_bytes();
  const double sent = dp->stats().total_bytes();
  s.set_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  EXPECT_EQ(dev.h2d_bytes() - up, 3 * 4 * shard) << "parameters, m and v: this rank's shards";
  EXPECT_EQ(dev.d2h_bytes(), down);
  EXPECT_EQ(dp->stats().total_bytes(), sent);
  s.get_state(back.data(), back.data() + psi, back.data() + 2 * psi);
  EXPECT_EQ(back, state);
}

// ZeRO-Offload: bit-identical to ZeRO-3 on the CPU. Its own copies: this rank's parameter shard
// up at the start (4·S_r), the master shard down (4·S_r), each step's updated shard up (4·S_r),
// get_state's parameters down (4Ψ; m and v are gathered on the host). The staging: the gathers
// as without offload; the reduce-scatters read each device unit gradient (Ψ down) and write the
// HOST shard (nothing up); get_state gathers only the device parameter shard (4·S_r down, 4Ψ up).
TEST(Zero3Offload, EqualsZero3OnTheCpuWithTheOptimizerOnTheHost) {
  const GPTLayout layout = GPT(GPTConfig::preset("tiny")).layout();
  const int64_t psi = layout.num_params();
  const ShardLayout shards(psi, test_world().size());
  const int r = test_world().rank();
  const int64_t shard = shards.count[r];
  DirectCopies copies;
  copies.params_up = 4 * shard;
  copies.up = kSteps * 4 * shard;
  copies.down = 4 * shard + 4 * psi;
  const StagingStats st = expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        // The CPU reference is plain ZeRO-3; the device run offloads its optimizer.
        return std::make_unique<Zero3Strategy>(model, dp, opt, seed, MixedPrecisionConfig{}, 0.0,
                                               1, model.device() != Device::kCPU);
      },
      kSteps, copies);
  const int f = layout.num_units() - 1;
  const int64_t n_f = layout.unit_numel(f);
  const int64_t a_r = shards.split_range(layout.unit_offset(f), psi)[r];
  const int64_t down = 4 * ((2 * shard - a_r) + psi), up = 4 * (2 * psi - n_f);
  EXPECT_EQ(st.to_host_bytes, kSteps * down + 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * up + 4 * psi);
}

// The device keeps only the 4⌈Ψ/N⌉ parameter shard: 16⌈Ψ/N⌉ -> 4⌈Ψ/N⌉, measured per device after
// one step, the host holding the other 12⌈Ψ/N⌉ and the master shard; the report's rows agree.
TEST(Zero3Offload, DeviceBytesDropByTheClosedForm) {
  const OffloadBytes b = measure_offload([](const GPT& model, ProcessGroup& dp, bool offload) {
    return std::make_unique<Zero3Strategy>(model, dp, AdamWConfig{}, 5, MixedPrecisionConfig{},
                                           0.0, 1, offload);
  });
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const int64_t S = ShardLayout(psi, test_world().size()).padded;
  EXPECT_EQ(b.device[0], 16 * S) << "ZeRO-3 on the device: 4 + 4 + 8 bytes per shard element";
  EXPECT_EQ(b.device[1], 4 * S) << "offloaded: the parameter shard only";
  EXPECT_EQ(b.host[0], 0);
  EXPECT_EQ(b.host[1], 16 * S) << "master, gradient, m and v shards";
}

// Resuming an offloaded stage from a checkpoint refreshes the host's master shard.
TEST(Zero3Offload, ResumesExactly) {
  expect_offload_resumes_exactly([](const GPT& model, ProcessGroup& dp, bool offload) {
    return std::make_unique<Zero3Strategy>(model, dp, AdamWConfig{}, 5, MixedPrecisionConfig{},
                                           0.0, 1, offload);
  });
}

// What runs only on the host is refused by name on a device, before any training.
void expect_refused(double constant_buffer_mb, int tile_factor, const std::string& why) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny")).with_device(Device::kCUDA);
  auto dp = test_world().duplicate();
  try {
    Zero3Strategy s(model, *dp, AdamWConfig{}, 11, MixedPrecisionConfig{}, constant_buffer_mb,
                    tile_factor);
    FAIL() << "accepted on a device: " << why;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(e.what(), why);
  }
}

TEST(Zero3OnDevice, RefusesTheConstantBufferAndWeightTiles) {
  expect_refused(0.25, 1,
                 "Zero3Strategy: the constant buffer is host memory; --device cuda runs without "
                 "--constant_buffer_mb");
  expect_refused(0, 2,
                 "Zero3Strategy: weight tiles are host memory; --device cuda runs without "
                 "--tile_factor");
}

}  // namespace
}  // namespace llmp
