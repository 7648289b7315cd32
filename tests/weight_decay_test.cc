// Weight decay as GPT-2 applies it (tensors with ≥ 2 dims; common/optim/decay_mask.h) is the same
// mask element for element in every stage: each stage with a large λ against the single-rank
// baseline with the same λ. Whoever holds part of the buffer (a ZeRO shard, a pipeline
// partition, a tensor-parallel slice) must decay exactly the baseline's elements of it; a mask
// that forgets the shard start or decays a LayerNorm diverges by about lr·λ per step, far above
// the bound. Run on 2, 3 and 4 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, λ weight decay, V vocab (257 pads the ZeRO shards), L layers, m micro-batches.
#include <gtest/gtest.h>

#include <memory>

#include "common/tp/tp_strategy.h"
#include "stages/1f1b/1f1b.h"
#include "stages/ddp/ddp.h"
#include "stages/interleaved_1f1b/interleaved_1f1b.h"
#include "stages/naive_dp/naive_dp.h"
#include "stages/zero1/zero1.h"
#include "stages/zero2/zero2.h"
#include "stages/zero3/zero3.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr double kMaxRel = 1e-5;

// λ = 0.5 at the default lr = 1e-3: a wrongly decayed LayerNorm gain (1.0) loses 5e-4 a step,
// fifty times the bound. (A larger lr would also amplify the rounding noise of c_attn's key bias,
// whose true gradient is zero: see equivalence.h.)
EquivalenceConfig decay_config(DecayRule rule = DecayRule::kMatrices) {
  EquivalenceConfig cfg;
  cfg.vocab = 257;  // Ψ not divisible by 2, 3 or 4: the ZeRO shards are padded and cut tensors
  cfg.steps = 6;
  cfg.opt.weight_decay = 0.5f;
  cfg.opt.decay = rule;
  return cfg;
}

template <class S>
StrategyFactory on_world() {
  return [](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<S>(model, test_world(), opt, seed);
  };
}

TEST(WeightDecay, DataParallelStagesMatchBaseline) {
  const EquivalenceConfig cfg = decay_config();
  expect_equivalent(run_against_baseline(on_world<NaiveDPStrategy>(), test_world(), cfg), kMaxRel);
  expect_equivalent(run_against_baseline(on_world<DDPStrategy>(), test_world(), cfg), kMaxRel);
}

TEST(WeightDecay, ZeroShardsMatchBaseline) {
  const EquivalenceConfig cfg = decay_config();
  expect_equivalent(run_against_baseline(on_world<Zero1Strategy>(), test_world(), cfg), kMaxRel);
  expect_equivalent(run_against_baseline(on_world<Zero2Strategy>(), test_world(), cfg), kMaxRel);
  expect_equivalent(run_against_baseline(on_world<Zero3Strategy>(), test_world(), cfg), kMaxRel);
}

TEST(WeightDecay, DecayAllStillMatchesBaselineInAShardedStage) {
  const EquivalenceConfig cfg = decay_config(DecayRule::kAll);
  expect_equivalent(run_against_baseline(on_world<Zero2Strategy>(), test_world(), cfg), kMaxRel);
}

TEST(WeightDecay, PipelinePartitionsMatchBaseline) {
  EquivalenceConfig cfg = decay_config();
  const int N = test_world().size();
  cfg.layers = 2 * N;        // divisible by p = N and by p·v = 2N
  cfg.global_batch = 24;     // divisible by m = 2N (interleaving needs m % p == 0)
  expect_equivalent(run_against_baseline(
                        [N](const GPT& model, AdamWConfig opt, uint64_t seed) {
                          return make_one_f_one_b(model, test_world(), opt, seed, /*m=*/2 * N);
                        },
                        test_world(), cfg),
                    kMaxRel);
  expect_equivalent(run_against_baseline(
                        [N](const GPT& model, AdamWConfig opt, uint64_t seed) {
                          return make_interleaved_1f1b(model, test_world(), opt, seed, /*m=*/2 * N,
                                                       /*v=*/2);
                        },
                        test_world(), cfg),
                    kMaxRel);
}

TEST(WeightDecay, TensorParallelSlicesMatchBaseline) {
  const int t = test_world().size();
  if (32 % t != 0) GTEST_SKIP() << "t = " << t << " does not divide C = 32";
  EquivalenceConfig cfg = decay_config();
  cfg.vocab = 256;  // t must divide V
  cfg.heads = t;
  for (bool sp : {false, true})
    expect_equivalent(run_against_baseline(
                          [sp](const GPT& model, AdamWConfig opt, uint64_t seed) {
                            return std::make_unique<TensorParallelStrategy>(
                                model.config(), test_world(), opt, seed, sp);
                          },
                          test_world(), cfg),
                      kMaxRel);
}

}  // namespace
}  // namespace llmp
