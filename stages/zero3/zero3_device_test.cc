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
// In bf16/fp16 the same at 2 bytes per element; with ZeRO-Offload the reduce-scatters write the
// host shard (nothing up) and the updated shard is copied up (4·S_r, or 2·S_r in 16 bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/dp_util.h"
#include "common/train/offload.h"
#include "kernels/cpu/convert.h"
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

// Mixed precision on the device: the 16-bit parameter and gradient shards, every gathered 16-bit
// unit and its fp32 widening, the fp32 master shard, m and v on the FakeDevice; the unit
// gradients rounded, the update and fp16's overflow check through the device's kernels.
// Bit-identical to the same precision on the CPU. Its own copies: the 16-bit parameter shard up
// (2·S_r) and the master shard up (4·S_r), once. The staging is the fp32 one at 2 bytes per
// element (the units gathered and the gradients reduce-scattered in 16 bits); get_state
// gathers the fp32 master shard, m and v (4·S_r down, 4Ψ up each).
void expect_mixed_zero3_equals_cpu(TrainPrecision precision) {
  const GPTLayout layout = GPT(GPTConfig::preset("tiny")).layout();
  const int64_t psi = layout.num_params();
  const ShardLayout shards(psi, test_world().size());
  const int r = test_world().rank();
  const int64_t shard = shards.count[r];
  DirectCopies copies;
  copies.params_up = 2 * shard;
  copies.up = 4 * shard;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const StagingStats st = expect_device_run_equals_cpu(
      [mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero3Strategy>(model, dp, opt, seed, mp);
      },
      kSteps, copies, precision);
  const int f = layout.num_units() - 1;
  const int64_t n_f = layout.unit_numel(f);
  const int64_t a_r = shards.split_range(layout.unit_offset(f), psi)[r];
  const int64_t down = 2 * ((2 * shard - a_r) + psi), up = 2 * ((2 * psi - n_f) + shard);
  EXPECT_EQ(st.to_host_bytes, kSteps * down + 3 * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, kSteps * up + 3 * 4 * psi);
}

TEST(Zero3OnDevice, Bf16EqualsZero3Bf16OnTheCpu) {
  expect_mixed_zero3_equals_cpu(TrainPrecision::kBF16);
}

// fp16 with an overflow injected at step 2 on rank 0 only: skipped on every rank, on the device as
// on the CPU. (The reduce-scatter sums rank 0's inf into rank 1's shard too, so this does not
// isolate the agreement over the ranks: Zero3Offload.Fp16InfInOneRanksHostShardSkipsOnEveryRank.)
TEST(Zero3OnDevice, Fp16SkipsAnOverflowOnOneRankOnEveryRankAsOnTheCpu) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_mixed_zero3_equals_cpu(TrainPrecision::kFP16);
}

// A checkpoint loaded on the device (set_state: each rank keeps its part of the full host state,
// from_host) moves exactly the three shards up, 3·4·S_r bytes in fp32, nothing down, no
// collective; a get_state then gathers back the same state bit for bit. Mixed precision: the
// fp32 master shard, m and v (3·4·S_r) and the 16-bit parameter shard rounded from the master on
// the host (2·S_r): 14·S_r.
void expect_set_state_copies_only_the_shards_up(TrainPrecision precision) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(precision))
                        .with_device(Device::kCUDA);
  const int64_t psi = model.layout().num_params();
  auto dp = test_world().duplicate();
  const int64_t shard = ShardLayout(psi, dp->size()).count[dp->rank()];
  MixedPrecisionConfig mp;
  mp.precision = precision;
  std::vector<float> state(3 * psi), back(3 * psi);
  Zero3Strategy(model, *dp, AdamWConfig{}, 11, mp)
      .get_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  for (int64_t i = psi; i < 3 * psi; ++i) state[i] = 1e-3f * static_cast<float>(i % 97);  // m, v
  Zero3Strategy s(model, *dp, AdamWConfig{}, 12, mp);  // another seed: other parameters
  const int64_t up = dev.h2d_bytes(), down = dev.d2h_bytes();
  const double sent = dp->stats().total_bytes();
  s.set_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  const int64_t param_bytes = is_mixed(precision) ? 4 + 2 : 4;  // master + 16-bit, or fp32
  EXPECT_EQ(dev.h2d_bytes() - up, (param_bytes + 2 * 4) * shard) << "this rank's shards only";
  EXPECT_EQ(dev.d2h_bytes(), down);
  EXPECT_EQ(dp->stats().total_bytes(), sent);
  s.get_state(back.data(), back.data() + psi, back.data() + 2 * psi);
  EXPECT_EQ(back, state);
}

TEST(Zero3OnDevice, SetStateCopiesOnlyTheShardsUp) {
  expect_set_state_copies_only_the_shards_up(TrainPrecision::kFP32);
}

TEST(Zero3OnDevice, Bf16SetStateRoundsOnTheHostAndCopiesOnlyTheShardsUp) {
  expect_set_state_copies_only_the_shards_up(TrainPrecision::kBF16);
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

// ZeRO-Offload in 16 bits (the paper's setting, common/train/offload.h): bit-identical to ZeRO-3
// in the same precision on the CPU. Its own copies: this rank's 16-bit parameter shard up at the
// start (2·S_r), each applied step's updated shard rounded on the host and copied up in 16 bits
// (2·S_r), nothing down (the master is initialised on the host; get_state gathers the host's
// master, m and v). The staging: the 16-bit gathers as without offload; the reduce-scatters read
// the device's 16-bit unit gradients (2Ψ down) into the HOST shard (nothing up).
void expect_mixed_offload_equals_zero3_on_the_cpu(TrainPrecision precision, int applied) {
  const GPTLayout layout = GPT(GPTConfig::preset("tiny")).layout();
  const int64_t psi = layout.num_params();
  const ShardLayout shards(psi, test_world().size());
  const int r = test_world().rank();
  const int64_t shard = shards.count[r];
  DirectCopies copies;
  copies.params_up = 2 * shard;
  copies.up = applied * 2 * shard;
  copies.down = 0;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const StagingStats st = expect_device_run_equals_cpu(
      [mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed) {
        return std::make_unique<Zero3Strategy>(model, dp, opt, seed, mp, 0.0, 1,
                                               model.device() != Device::kCPU);
      },
      kSteps, copies, precision);
  const int f = layout.num_units() - 1;
  const int64_t n_f = layout.unit_numel(f);
  const int64_t a_r = shards.split_range(layout.unit_offset(f), psi)[r];
  EXPECT_EQ(st.to_host_bytes, kSteps * 2 * ((2 * shard - a_r) + psi));
  EXPECT_EQ(st.to_device_bytes, kSteps * 2 * (2 * psi - n_f));
}

TEST(Zero3Offload, Bf16EqualsZero3Bf16OnTheCpuWith16BitCopies) {
  expect_mixed_offload_equals_zero3_on_the_cpu(TrainPrecision::kBF16, kSteps);
}

// fp16, an overflow injected at step 2 on rank 0 only: skipped on both ranks, nothing copied up.
TEST(Zero3Offload, Fp16SkipsAnOverflowOnOneRankOnEveryRank) {
  const InjectedOverflow overflow(/*step=*/2, /*ranks=*/"0");
  expect_mixed_offload_equals_zero3_on_the_cpu(TrainPrecision::kFP16, kSteps - 1);
}

// fp16's overflow check on the HOST gradient shard, agreed over the ranks (OffloadedShard::step):
// an inf in rank 0's shard only skips the step on every rank, copies nothing up and leaves the
// master unchanged; S halves on both; the next, clean step applies on both (2·n bytes up). Set
// by hand: through the walk an overflow on one rank reaches every rank's shard (the
// reduce-scatter sums it in), so the test above cannot tell a local check from an agreed one.
TEST(Zero3Offload, Fp16InfInOneRanksHostShardSkipsOnEveryRank) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny"), TpComm::none(), DType::kF16)
                        .with_device(Device::kCUDA);
  auto dp = test_world().duplicate();
  MixedPrecisionConfig cfg;
  cfg.precision = TrainPrecision::kFP16;
  cfg.scaler.scale = 1024.0f;
  MixedPrecision mp(model, cfg, dp.get());
  const int64_t n = 1000;
  AdamW opt(n, AdamWConfig{}, {{0, n}}, DType::kF16, Device::kCPU);  // master, m, v on the host
  for (int64_t i = 0; i < n; ++i) opt.master().f32()[i] = 0.01f * static_cast<float>(i % 7);
  const Tensor shard = Tensor::zeros({n}, DType::kF16, MemCategory::kParameters, Device::kCUDA);
  round_from_host(shard, opt.master().f32());
  OffloadedShard offloaded(shard, n);
  Tensor grads = Tensor::zeros({n}, DType::kF16, MemCategory::kGradients);  // the host shard
  std::vector<float> g(n, 0.5f);
  if (dp->rank() == 0) g[n - 1] = INFINITY;
  cpu::round_to(g.data(), grads.raw(), DType::kF16, n);
  const std::vector<float> master(opt.master().f32(), opt.master().f32() + n);
  const int64_t up = dev.h2d_bytes();
  EXPECT_FALSE(offloaded.step(mp, opt, grads, 1)) << "rank " << dp->rank() << " applied it";
  EXPECT_EQ(dev.h2d_bytes(), up) << "a skipped step copies nothing up";
  EXPECT_EQ(std::vector<float>(opt.master().f32(), opt.master().f32() + n), master);
  EXPECT_EQ(mp.skipped_steps(), 1);
  EXPECT_EQ(mp.loss_scale(), 512.0f);
  std::fill(g.begin(), g.end(), 0.5f);
  cpu::round_to(g.data(), grads.raw(), DType::kF16, n);
  EXPECT_TRUE(offloaded.step(mp, opt, grads, 2));
  EXPECT_EQ(dev.h2d_bytes(), up + 2 * n) << "the updated shard, 2 bytes per element";
}

// In bf16 the device keeps only the 2⌈Ψ/N⌉ parameter shard: 16⌈Ψ/N⌉ -> 2⌈Ψ/N⌉, the host
// 2⌈Ψ/N⌉ of 16-bit gradients and 12⌈Ψ/N⌉ of fp32 master, m and v; the report's rows agree.
TEST(Zero3Offload, Bf16DeviceBytesDropByTheClosedForm) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  const OffloadBytes b = measure_offload(
      [mp](const GPT& model, ProcessGroup& dp, bool offload) {
        return std::make_unique<Zero3Strategy>(model, dp, AdamWConfig{}, 5, mp, 0.0, 1, offload);
      },
      TrainPrecision::kBF16);
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const int64_t S = ShardLayout(psi, test_world().size()).padded;
  EXPECT_EQ(b.device[0], 16 * S) << "ZeRO-3 bf16 on the device: 2 + 2 + 12 bytes per element";
  EXPECT_EQ(b.device[1], 2 * S) << "offloaded: the 16-bit parameter shard only";
  EXPECT_EQ(b.host[0], 0);
  EXPECT_EQ(b.host[1], 14 * S) << "16-bit gradient shard; fp32 master, m and v";
}

TEST(Zero3Offload, Bf16ResumesExactly) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  expect_offload_resumes_exactly(
      [mp](const GPT& model, ProcessGroup& dp, bool offload) {
        return std::make_unique<Zero3Strategy>(model, dp, AdamWConfig{}, 5, mp, 0.0, 1, offload);
      },
      TrainPrecision::kBF16);
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
