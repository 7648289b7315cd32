// The memory estimate that refuses runs before launch (common/train/resources.h) against what a
// run really allocates: DDP's model states on every rank (MemoryTracker, after two steps) and the
// peak of its activations during a step. The estimate must be the model states exactly (DDP
// keeps the whole model on every rank: 16Ψ, not the 16Ψ/N of a shard) and a lower bound of the
// activations within a factor 2 (it leaves out transient buffers), so a refused run truly cannot
// fit and an accepted small one is not wildly off. Also: the oversubscription rule, the message
// of a refused run, and /proc/meminfo. Run on 1 and 2 ranks (mpi_test in BUILD). Under
// --precision bf16 / fp16 the same against the baseline trained in bf16: (2 + 2 + 12)Ψ of model
// states exactly, 2-byte activations within the same factor.
//
// Glossary: Ψ parameter count, N ranks, B global batch, L layers, T sequence length.
#include "common/train/resources.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <vector>
#include <memory>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"
#include "stages/baseline/baseline.h"
#include "stages/ddp/ddp.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

StrategyFactory ddp_on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<DDPStrategy>(model, test_world(), opt, seed, DDPOptions{});
  };
}

// mini with 3 blocks (a non-default L) and B = 3 sequences per rank.
GPTConfig model() {
  GPTConfig c = GPTConfig::preset("mini");
  c.layers = 3;
  return c;
}

// A mixture of experts: the estimate's parameters are the layout's, on one rank and on a rank of
// the moe stage's expert-parallel group (in the grid's tp slot: experts split, the rest whole).
TEST(Resources, MixtureOfExpertsParametersAreTheLayouts) {
  for (const char* preset : {"moe-tiny", "moe-mini"})
    for (const int ep : {1, 2, 4}) {
      const GPTConfig mc = GPTConfig::preset(preset);
      TrainConfig cfg;
      cfg.world_size = ep;
      cfg.global_batch = 4;
      const RankMemoryEstimate e =
          estimate_rank_memory(mc, cfg, {1, 1, ep}, DPStage::kBaseline);
      EXPECT_DOUBLE_EQ(e.params_per_rank, double(GPTLayout(mc, 1, 0, ep, 0).num_params()))
          << preset << " ep=" << ep;
    }
}

TEST(Resources, EstimateIsWhatDdpAllocatesAndALowerBoundOfItsActivations) {
  const int N = test_world().size(), B = 3 * N;
  TrainConfig cfg;
  cfg.world_size = N;
  cfg.global_batch = B;
  const RankMemoryEstimate e = estimate_rank_memory(model(), cfg, {N, 1, 1}, dp_stage_of("ddp"));

  auto& mt = MemoryTracker::instance();
  const int64_t a0 = mt.current(MemCategory::kActivations);
  const OneStepMeasurement m = measure_one_step(ddp_on_world(), model(), B, /*seed=*/7, 2);
  const double states = double(m.params + m.grads + m.optimizer);
  const double activations = double(mt.peak(MemCategory::kActivations) - a0);  // the last step's

  std::printf("model states: estimate %.0f, measured %.0f bytes; activations: estimate %.0f, "
              "measured peak %.0f bytes\n", e.model_states, states, e.activations, activations);
  EXPECT_DOUBLE_EQ(e.params_per_rank, double(m.psi));
  EXPECT_DOUBLE_EQ(e.model_states, states) << "DDP holds params, grads, m and v of all Ψ";
  EXPECT_GT(activations, 0);
  EXPECT_LE(e.activations, activations) << "the estimate must not exceed what a step keeps";
  EXPECT_GE(e.activations, 0.5 * activations) << "the estimate misses most of the activations";
}

// Mixed precision: the baseline in bf16 (one rank's whole model, as every rank of DDP) holds
// 2Ψ + 2Ψ + 12Ψ, measured by MemoryTracker; its activations are stored in 2 bytes, so the
// estimate falls to about half of fp32's and stays a lower bound within a factor 2.
TEST(Resources, Bf16EstimateIsWhatTheBaselineAllocates) {
  const int B = 3;
  TrainConfig cfg;
  cfg.global_batch = B;
  cfg.precision = "bf16";
  const RankMemoryEstimate e = estimate_rank_memory(model(), cfg, {1, 1, 1}, DPStage::kBaseline);
  cfg.precision = "fp32";
  const RankMemoryEstimate e32 = estimate_rank_memory(model(), cfg, {1, 1, 1}, DPStage::kBaseline);

  auto& mt = MemoryTracker::instance();
  const GPT gpt(model(), TpComm::none(), DType::kBF16);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", gpt.config().ctx);
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  BaselineStrategy s(gpt, AdamWConfig{}, 7, mp);
  const int T = gpt.config().ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  const int64_t a0 = mt.current(MemCategory::kActivations);
  for (int step = 1; step <= 2; ++step) {
    sample(corpus.train(), 7, step, 0, B, T, tok.data(), tgt.data());
    if (step == 2) mt.reset_peak();
    s.train_step(tok.data(), tgt.data(), B, T, step);
  }
  const double psi = double(gpt.layout().num_params());
  const double states = double(mt.current(MemCategory::kParameters) - p0 +
                               mt.current(MemCategory::kGradients) - g0 +
                               mt.current(MemCategory::kOptimizerState) - o0);
  const double activations = double(mt.peak(MemCategory::kActivations) - a0);
  std::printf("bf16 model states: estimate %.0f, measured %.0f bytes (16Ψ = %.0f); activations: "
              "estimate %.0f (fp32 %.0f), measured peak %.0f bytes\n",
              e.model_states, states, 16 * psi, e.activations, e32.activations, activations);
  EXPECT_DOUBLE_EQ(e.params_per_rank, psi);
  EXPECT_DOUBLE_EQ(e.model_states, states) << "(2 + 2 + 12)Ψ";
  EXPECT_DOUBLE_EQ(e.model_states, 16 * psi);
  EXPECT_DOUBLE_EQ(e.batch, e32.batch) << "token ids do not change with the precision";
  EXPECT_LT(e.activations, 0.6 * e32.activations) << "2-byte activations";
  EXPECT_GT(activations, 0);
  EXPECT_LE(e.activations, activations) << "the estimate must not exceed what a step keeps";
  EXPECT_GE(e.activations, 0.5 * activations) << "the estimate misses most of the activations";
}

// --attention flash at T = 256: the estimate drops P (4·a·T² bytes per block and sequence) for
// lse (4·a·T), exactly, and is still a lower bound of what the flash baseline's step keeps within
// the same factor 2. A run that fits only with flash must not be refused for P.
TEST(Resources, FlashEstimateDropsTheProbabilities) {
  const int B = 2, T = 256;
  GPTConfig mc = model();
  mc.ctx = T;
  TrainConfig cfg;
  cfg.global_batch = B;
  const RankMemoryEstimate mat = estimate_rank_memory(mc, cfg, {1, 1, 1}, DPStage::kBaseline);
  mc.attention = AttentionMethod::kFlash;
  const RankMemoryEstimate e = estimate_rank_memory(mc, cfg, {1, 1, 1}, DPStage::kBaseline);
  const double a = mc.heads, L = mc.layers;
  EXPECT_DOUBLE_EQ(mat.activations - e.activations, L * B * (4 * a * T * T - 4 * a * T));

  auto& mt = MemoryTracker::instance();
  const int64_t a0 = mt.current(MemCategory::kActivations);
  const StrategyFactory baseline = [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<BaselineStrategy>(model, opt, seed);
  };
  measure_one_step(baseline, mc, B, /*seed=*/7, /*steps=*/2);
  const double activations = double(mt.peak(MemCategory::kActivations) - a0);  // the last step's
  std::printf("flash, T=%d: activations estimate %.0f (materialized %.0f), measured peak %.0f\n",
              T, e.activations, mat.activations, activations);
  EXPECT_LE(e.activations, activations) << "the estimate must not exceed what a step keeps";
  EXPECT_GE(e.activations, 0.5 * activations) << "the estimate misses most of the activations";
  EXPECT_GT(mat.activations, 1.2 * activations) << "the materialized estimate would over-refuse";
}

// ZeRO-3 in bf16: (2 + 2 + 12)Ψ/N (the estimate is unpadded), not fp32's (4 + 4 + 8); ZeRO-1 keeps 2Ψ + 2Ψ whole and
// shards the 12Ψ: the K = 12 rows, where fp32's K = 8 rows differ.
TEST(Resources, MixedPrecisionUsesTheKEquals12Rows) {
  TrainConfig cfg;
  cfg.global_batch = 4;
  const GridShape grid{4, 1, 1};
  const double psi = estimate_rank_memory(model(), cfg, grid, DPStage::kZeRO1).params_per_rank;
  const double shard = psi / 4;
  const double z1_32 = estimate_rank_memory(model(), cfg, grid, DPStage::kZeRO1).model_states;
  for (const char* p : {"bf16", "fp16"}) {
    cfg.precision = p;
    EXPECT_DOUBLE_EQ(estimate_rank_memory(model(), cfg, grid, DPStage::kZeRO3).model_states,
                     16 * shard) << p;
    EXPECT_DOUBLE_EQ(estimate_rank_memory(model(), cfg, grid, DPStage::kZeRO1).model_states,
                     4 * psi + 12 * shard) << p;
  }
  EXPECT_DOUBLE_EQ(z1_32, 8 * psi + 8 * shard);
  cfg.precision = "fp8";
  EXPECT_THROW(estimate_rank_memory(model(), cfg, grid, DPStage::kZeRO1), std::invalid_argument);
}

TEST(Resources, ZeroStagesUseTheirShardedRows) {
  TrainConfig cfg;
  cfg.global_batch = 4;
  const GridShape grid{4, 1, 1};
  const double full = estimate_rank_memory(model(), cfg, grid, dp_stage_of("ddp")).model_states;
  const double z3 = estimate_rank_memory(model(), cfg, grid, dp_stage_of("zero3")).model_states;
  EXPECT_EQ(dp_stage_of("zero3"), DPStage::kZeRO3);
  EXPECT_EQ(dp_stage_of("gpipe"), DPStage::kBaseline);
  EXPECT_NEAR(z3, full / 4, 16.0);  // 16⌈Ψ/4⌉ vs 16Ψ/4
}

TEST(Resources, AHugeRunIsRefusedWithOneLineNamingBothNumbers) {
  TrainConfig cfg;
  cfg.world_size = 4;
  cfg.global_batch = 2147483644;
  const RankMemoryEstimate e = estimate_rank_memory(model(), cfg, {4, 1, 1}, DPStage::kDDP);
  EXPECT_GT(e.total(), 1e12);  // B/4 · T · 8 bytes of tokens alone is 275 GB
  const std::string msg = memory_error(e, int64_t(16) << 30, 4, "--global_batch 2147483644");
  EXPECT_NE(msg.find("--global_batch 2147483644"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4.00 GiB is available per rank (MemAvailable 16.00 GiB / 4 ranks)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_EQ(memory_error(e, -1, 4, "x"), "") << "unknown available memory: no verdict";
}

TEST(Resources, TokensPerRankMustFitAnInt) {
  TrainConfig cfg;
  cfg.global_batch = 2147483644;
  EXPECT_NE(token_count_error(cfg, 64, {1, 1, 1}).find("--global_batch 2147483644"),
            std::string::npos);
  EXPECT_EQ(token_count_error(cfg, 1, {4, 1, 1}), "");  // 536870911 tokens per rank
  cfg.global_batch = 33554431;                           // 33554431 · 64 = 2^31 - 64
  EXPECT_EQ(token_count_error(cfg, 64, {1, 1, 1}), "");
  cfg.global_batch = 33554432;                           // 2^25 · 64 = 2^31
  EXPECT_NE(token_count_error(cfg, 64, {1, 1, 1}), "");
}

TEST(Resources, OversubscriptionAboveFourRanksPerCore) {
  EXPECT_EQ(oversubscription_error(8, 2, false), "");
  EXPECT_NE(oversubscription_error(9, 2, false).find("--oversubscribe"), std::string::npos);
  EXPECT_EQ(oversubscription_error(9, 2, true), "");
  EXPECT_GE(usable_cores(), 1);
  EXPECT_GT(mem_available_bytes(), 0);
}

}  // namespace
}  // namespace llmp
