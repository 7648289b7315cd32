// Activation recomputation (recompute.h) on one rank: every policy gives the gradients of no
// recomputation bit for bit; the bytes kept per block, measured by the MemoryTracker, equal the
// closed forms of common/plan/recompute_formulas.h in fp32 and bf16; the FLOPs recomputed,
// measured by the kernels' counter, equal the formula. (How the peak grows with L under each
// policy: stages/recompute.)
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/recompute.h"
#include "common/nn/unit_runner.h"
#include "common/plan/recompute_formulas.h"
#include "common/tensor/memory.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace {

struct Policy {
  Recompute mode;
  int every;
};

/// One forward_backward of the tiny model with L blocks under `p`: its gradients (as fp32
/// values), what it measured, and the activation peak above what was live before.
struct Walked {
  std::vector<float> grads;
  double loss = 0;
  int64_t block_bytes = 0, peak = 0, meter_blocks = 0, meter_probs = 0, meter_flops = 0;
  int recomputed = 0;
};

Walked walk(int L, Policy p, DType dtype = DType::kF32, int B = 2, int T = 16) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = L;
  cfg.recompute = p.mode;
  cfg.recompute_every = p.every;
  const GPT model(cfg, TpComm::none(), dtype);
  const int64_t n = model.layout().num_params();
  std::vector<float> init(n);
  model.init_params(init.data(), 7);
  Tensor params = Tensor::empty({n}, dtype, MemCategory::kParameters);
  cpu::round_to(init.data(), params.raw(), dtype, n);
  Tensor grads = Tensor::zeros({n}, dtype, MemCategory::kGradients);
  const auto tok = random_ids(B * T, 1, cfg.vocab), tgt = random_ids(B * T, 2, cfg.vocab);

  Walked w;
  MemoryTracker& mt = MemoryTracker::instance();
  RecomputeMeter& meter = RecomputeMeter::instance();
  meter.reset();
  {
    FlatParams fp(model.layout(), params);
    FlatGrads fg(model.layout(), grads);
    UnitRunner runner(model, fp, &fg);
    const int64_t before = mt.current(MemCategory::kActivations);
    mt.reset_peak();
    w.loss = runner.forward_backward(tok.data(), tgt.data(), B, T, 1.0f / (B * T));
    w.peak = mt.peak(MemCategory::kActivations) - before;
    w.block_bytes = runner.stats().block_stored_bytes;
    w.recomputed = runner.stats().recomputed_blocks;
  }
  w.meter_blocks = meter.recomputed_blocks, w.meter_probs = meter.recomputed_probs;
  w.meter_flops = meter.recomputed_flops;
  w.grads.resize(n);
  cpu::widen(grads.raw(), dtype, w.grads.data(), n);
  return w;
}

const std::vector<Policy> kPolicies = {{Recompute::kFull, 1}, {Recompute::kFull, 2},
                                        {Recompute::kFull, 3}, {Recompute::kSelective, 1}};

TEST(Recompute, EveryPolicyGivesTheSameGradientsBitForBit) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const Walked none = walk(5, {Recompute::kNone, 1}, dt);
    EXPECT_EQ(none.recomputed, 0);
    for (const Policy& p : kPolicies) {
      const Walked w = walk(5, p, dt);
      EXPECT_EQ(w.loss, none.loss);
      EXPECT_EQ(w.grads, none.grads) << to_string(p.mode) << " every " << p.every << " "
                                     << to_string(dt);
    }
  }
}

TEST(Recompute, BytesKeptPerBlockMatchTheClosedForms) {
  const int L = 6, B = 2, T = 16;
  const GPTConfig tiny = GPTConfig::preset("tiny");
  const RecomputeDims d{B, T, tiny.d, tiny.heads, L};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int e = static_cast<int>(dtype_size(dt));
    for (const Policy& p : std::vector<Policy>{{Recompute::kNone, 1}, {Recompute::kSelective, 1},
                                               {Recompute::kFull, 1}, {Recompute::kFull, 3},
                                               {Recompute::kFull, 4}}) {
      const Walked w = walk(L, p, dt, B, T);
      const double formula = activation_bytes_per_block(d, p.mode, p.every, e);
      std::printf("%-9s every %d %-4s: %lld bytes per block measured, %s = %.1f\n",
                  to_string(p.mode), p.every, to_string(dt), static_cast<long long>(w.block_bytes),
                  activation_formula_text(p.mode, p.every, e), formula);
      // Averages over L blocks are integers only when L divides the total: compare totals.
      EXPECT_NEAR(static_cast<double>(w.block_bytes) * L, formula * L, L)
          << to_string(p.mode) << " every " << p.every << " " << to_string(dt);
    }
  }
}

TEST(Recompute, RecomputedFlopsAreMeasuredAndMatchTheFormula) {
  const int L = 4, B = 2, T = 16;
  const GPTConfig tiny = GPTConfig::preset("tiny");
  const RecomputeDims d{B, T, tiny.d, tiny.heads, L};
  for (const Policy& p : std::vector<Policy>{{Recompute::kNone, 1}, {Recompute::kFull, 1},
                                             {Recompute::kFull, 2}, {Recompute::kSelective, 1}}) {
    const Walked w = walk(L, p, DType::kF32, B, T);
    std::printf("%-9s every %d: %lld FLOPs recomputed, formula %.0f\n", to_string(p.mode),
                p.every, static_cast<long long>(w.meter_flops),
                recomputed_flops_per_walk(d, p.mode));
    EXPECT_EQ(static_cast<double>(w.meter_flops), recomputed_flops_per_walk(d, p.mode));
    EXPECT_EQ(w.meter_blocks, p.mode == Recompute::kFull ? L : 0) << "each block once";
    EXPECT_EQ(w.meter_probs, p.mode == Recompute::kSelective ? L : 0);
  }
}

TEST(Recompute, BadPolicyIsRefusedByName) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.recompute = Recompute::kSelective;
  cfg.recompute_every = 2;
  EXPECT_THROW(GPT{cfg}, std::invalid_argument);
  cfg.recompute = Recompute::kFull;
  cfg.recompute_every = 0;
  EXPECT_THROW(GPT{cfg}, std::invalid_argument);
  EXPECT_THROW(parse_recompute("partial"), std::invalid_argument);
  EXPECT_EQ(parse_recompute("selective"), Recompute::kSelective);
}

}  // namespace
}  // namespace llmp
