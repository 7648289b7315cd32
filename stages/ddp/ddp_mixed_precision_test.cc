// DDP under --precision bf16 / fp16 (common/train/mixed_precision.h): against the baseline in the
// same precision, the K = 12 memory and the 2-byte traffic against the closed forms, buckets
// launched with their final 16-bit gradients, and fp16's overflow skip agreed by every rank.
// Run on 1, 2, 3 and 4 ranks (mpi_test in BUILD); the fp32 tests are in ddp_test.cc.
//
// Glossary: N ranks, Ψ parameter count, B global batch, T sequence length, K micro-steps,
// S loss scale.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "kernels/cpu/convert.h"
#include "stages/ddp/ddp.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

// As in ddp_test.cc: 0.04 MiB = 41,943 bytes. In bf16 tiny's units are 128 B (ln_f), 25,408 B (a
// block) and 17,408 B (embeddings), so the buckets are {ln_f, block 1, block 0}, {embeddings}.
constexpr double kSmallBucketMb = 0.04;

StrategyFactory ddp_on_world(DDPOptions o, MixedPrecisionConfig mp) {
  return [o, mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<DDPStrategy>(model, test_world(), opt, seed, o, mp);
  };
}

// Bounds on the largest relative differences against the baseline in the same 16-bit precision
// (10 steps of tiny, B = 12, lr 1e-3), losses and final fp32 master weights bounded apart.
//
// Why they are not bit-identical: the baseline rounds each gradient element to 16 bits once (its
// fp32 sum over the whole batch); here each rank rounds its own partial sum, and the 16-bit
// all_reduce rounds again at every pairwise addition (common/comm: each pair widened, added in
// fp32, rounded). One bf16 ulp is 2^-8 ≈ 3.9e-3 relative, one fp16 ulp 2^-11 ≈ 4.9e-4.
//
// Losses: a gradient element off by an ulp changes Adam's step m̂/(√v̂ + eps) by about that
// relative amount, i.e. a parameter by ~lr·3.9e-3 ≈ 4e-6 per step, which moves the loss by far
// less than 1e-4 relative in 10 steps; measured ≤ 1.4e-5 at N = 1..4 (bf16 and fp16, K = 1, 2).
// Dropping the all_reduce moves the losses by ~5e-3.
//
// Parameters (max |diff| / max |p|, max |p| ≈ 1, the LayerNorm gains): the worst elements are
// those whose true gradient is zero (the key part of c_attn.bias: see tests/equivalence.h). Their
// gradient is rounding noise, which Adam normalises into steps of up to ±lr in a direction the
// rounding decides, so two runs that round differently drift apart by up to 2·lr·steps = 2e-2 on
// those elements alone. Measured in bf16: ≤ 6.4e-3 (N = 3; 0 at N = 1 for naive DP, 3.5e-3 for
// DDP's K = 2, which rounds per micro-step). Bound 1e-2: above every measurement, below that
// worst-case drift and below what a missing all_reduce does (1.5e-2 in fp32). fp16 with
// eps = 1e-6 (see the fp16 test): the noise elements' |g| ≪ eps, so eps damps their steps, and
// the rest differ by fp16 ulps: measured ≤ 4.2e-4; bound 2e-3.
constexpr double kLossBound = 1e-4;
constexpr double kBf16ParamBound = 1e-2;
constexpr double kFp16ParamBound = 2e-3;

// The mixed-precision check of a run_against_baseline result: losses and parameters bounded
// apart (above), the worst tensor named.
void expect_close(const EquivalenceResult& r, double param_bound) {
  EXPECT_LE(r.max_loss_rel, kLossBound) << "losses";
  EXPECT_LE(r.max_param_rel, param_bound) << "parameters (largest |diff| in " << r.worst_param
                                          << ")";
}

// ---- Mixed precision (--precision bf16 / fp16) ----------------------------------------------

// Against the baseline in the same precision, with several buckets and with accumulation. Not
// bit-identical: the baseline rounds its gradient to 16 bits once, DDP once per rank (and per
// micro-step) and then at every pairwise addition of each bucket's 16-bit all_reduce: the bounds and their reasons are above.
TEST(DDP, MatchesBaselineInBf16) {
  EquivalenceConfig cfg;
  cfg.mp = precision_config(TrainPrecision::kBF16);
  expect_close(run_against_baseline(ddp_on_world({kSmallBucketMb, 1}, cfg.mp), test_world(), cfg),
               kBf16ParamBound);
  cfg.global_batch = 24;  // N·K divides 24 for N = 1..4, K = 2
  expect_close(run_against_baseline(ddp_on_world({kSmallBucketMb, 2}, cfg.mp), test_world(), cfg),
               kBf16ParamBound);
}

// fp16 with the dynamic loss scaler against the fp16 baseline; eps = 1e-6 so that a stage that
// stepped on the scaled gradients S·g (AdamW is scale-invariant but for eps) would fail.
TEST(DDP, MatchesBaselineInFp16WithDynamicLossScaling) {
  EquivalenceConfig cfg;
  cfg.mp = precision_config(TrainPrecision::kFP16);
  cfg.opt.eps = 1e-6f;
  expect_close(run_against_baseline(ddp_on_world({kSmallBucketMb, 1}, cfg.mp), test_world(), cfg),
               kFp16ParamBound);
}

// One step in bf16 with small buckets: 2Ψ + 2Ψ + 12Ψ to the byte, the gradient peak 2Ψ (buckets
// are views of the 16-bit buffer), --bucket_mb counted in bytes of 2-byte gradients, and the
// bytes sent: Σ over the buckets of 2(N-1)/N·2·numel(b) = 2(N-1)/N·2Ψ.
TEST(DDP, MixedPrecisionMemoryBucketsAndBytesPerStep) {
  const int N = test_world().size();
  const double cap = kSmallBucketMb * 1024 * 1024;
  const GPTLayout lay(GPTConfig::preset("tiny"));
  for (TrainPrecision p : {TrainPrecision::kBF16, TrainPrecision::kFP16}) {
    struct : OneStepMeasurement {
      std::vector<Bucket> buckets;
      std::vector<int64_t> micro_calls;
    } s;
    static_cast<OneStepMeasurement&>(s) = measure_one_step(
        ddp_on_world({kSmallBucketMb, 1}, precision_config(p)), GPTConfig::preset("tiny"), 12,
        /*seed=*/7, /*steps=*/1,
        [&s](Strategy& strategy, const GPT&) {
          const auto& ddp = dynamic_cast<const DDPStrategy&>(strategy);
          s.buckets = ddp.buckets();
          s.micro_calls = ddp.last_micro_step_calls();
        },
        storage_dtype(p));
    std::printf("%s, per rank: params %lld B, grads %lld B (peak %lld B), optimizer %lld B, "
                "Ψ = %lld; %zu buckets of >= %.0f B\n",
                to_string(p), static_cast<long long>(s.params), static_cast<long long>(s.grads),
                static_cast<long long>(s.grads_peak), static_cast<long long>(s.optimizer),
                static_cast<long long>(s.psi), s.buckets.size(), cap);
    EXPECT_EQ(s.params, 2 * s.psi);
    EXPECT_EQ(s.grads, 2 * s.psi);
    EXPECT_EQ(s.grads_peak, 2 * s.psi) << "buckets are views of the 16-bit gradients: no copies";
    EXPECT_EQ(s.optimizer, 12 * s.psi) << "fp32 master weights, m and v";
    for (const char* what : {"parameters", "gradients", "optimizer state"})
      EXPECT_EQ(report_row(s.rows, what).formula, report_row(s.rows, what).measured) << what;
    // Buckets in bytes of 2-byte elements: each but the last reaches the capacity, and only with
    // its last (lowest) unit; so bf16 buckets hold about twice the elements of fp32 ones.
    int64_t total = 0;
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      const Bucket& k = s.buckets[b];
      total += k.numel;
      if (b + 1 == s.buckets.size()) continue;
      EXPECT_GE(2.0 * k.numel, cap) << "bucket " << b << " closed below --bucket_mb in bytes";
      EXPECT_LT(2.0 * (k.numel - lay.unit_numel(k.last_unit)), cap)
          << "bucket " << b << " kept growing past --bucket_mb in bytes";
    }
    EXPECT_EQ(total, s.psi);
    const double expected = 2.0 * (N - 1) / N * 2.0 * s.psi;  // Σ_b 2(N-1)/N·2·numel(b)
    const ReportRow& sent = report_row(s.rows, "sent per step");
    std::printf("  sent %.0f B in %lld all_reduce calls, formula 2(N-1)/N·2Ψ = %.0f\n",
                sent.measured, static_cast<long long>(s.micro_calls.at(0)), expected);
    EXPECT_NEAR(sent.measured, expected, 1e-9 * expected) << "not 2 bytes per gradient element";
    EXPECT_DOUBLE_EQ(sent.formula, expected);
    EXPECT_EQ(sent.formula_text, "2(N-1)/N·2Ψ");
    EXPECT_EQ(s.micro_calls.at(0), static_cast<int64_t>(s.buckets.size()));
  }
}

// What each bucket held when its all_reduce was issued (DDPStrategy::last_launch_sums) against
// the same rank's gradients computed again here, without DDP: a plain walk of the same
// parameters on the same micro-batches into a 16-bit buffer, each unit rounded once when final.
// Equal bit for bit only if every unit of the bucket had been rounded into the 16-bit buffer
// BEFORE the launch (FlatGrads::ready rounds, then calls the hook). With K = 2 the launch must
// also come after the second micro-step's rounding. One step, before any all_reduce has summed
// anything into the buffer.
TEST(DDP, Bf16BucketsLaunchWithTheirFinalRoundedGradients) {
  const GPTConfig config = GPTConfig::preset("tiny");
  const GPT model(config, TpComm::none(), DType::kBF16);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", config.ctx);
  const int T = config.ctx, B = 24;
  const MixedPrecisionConfig mp = precision_config(TrainPrecision::kBF16);
  for (int K : {1, 2}) {
    DDPStrategy ddp(model, test_world(), AdamWConfig{}, /*seed=*/7, {0.02, K}, mp);
    ASSERT_GE(ddp.buckets().size(), 3u);
    Tensor params = Tensor::empty({model.layout().num_params()}, DType::kBF16, MemCategory::kOther);
    params.copy_from(ddp.params_tensor());  // the step-1 parameters
    const BatchSlice sl = ddp.batch_slice(B);
    std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
    sample(corpus.train(), 7, 1, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    ddp.train_step(tok.data(), tgt.data(), B, T, /*step=*/1);

    // The same gradients, recomputed: K walks of B/(N·K) sequences, loss scale 1/(B·T).
    Tensor grads = Tensor::zeros({model.layout().num_params()}, DType::kBF16, MemCategory::kOther);
    const int micro = sl.num_seqs / K;
    for (int k = 0; k < K; ++k) {
      FlatParams fp(model.layout(), params);
      FlatGrads fg(model.layout(), grads);
      UnitRunner(model, fp, &fg).forward_backward(tok.data() + k * micro * T,
                                                  tgt.data() + k * micro * T, micro, T,
                                                  1.0f / (static_cast<float>(B) * T));
    }
    const std::vector<double>& launched = ddp.last_launch_sums();
    ASSERT_EQ(launched.size(), ddp.buckets().size());
    for (size_t b = 0; b < launched.size(); ++b) {
      const Bucket& k = ddp.buckets()[b];
      std::vector<float> g(k.numel);
      cpu::widen(grads.narrow(k.offset, k.numel).raw(), DType::kBF16, g.data(), k.numel);
      double expected = 0;
      for (float x : g) expected += x;
      if (test_world().rank() == 0)
        std::printf("K = %d, bucket %zu (units %d..%d): sum at launch %.9g, recomputed %.9g\n", K,
                    b, k.first_unit, k.last_unit, launched[b], expected);
      EXPECT_NE(expected, 0.0);
      EXPECT_EQ(launched[b], expected)
          << "K " << K << ": bucket " << b << " was launched before its 16-bit gradients were final";
    }
  }
}

// fp16's skip, agreed: an overflow injected on the last rank only at step 2 is skipped by every
// rank with the state bit-identical, and step 3 trains (tests/stage_test_util.h).
TEST(DDP, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_injected_overflow_skipped_by_every_rank(
      [](const GPT& model) -> std::unique_ptr<MixedPrecisionStrategy> {
        return std::make_unique<DDPStrategy>(model, test_world(), AdamWConfig{}, /*seed=*/7,
                                             DDPOptions{kSmallBucketMb, 1},
                                             precision_config(TrainPrecision::kFP16));
      },
      [](const MixedPrecisionStrategy& s) -> const Tensor& {
        return static_cast<const DDPStrategy&>(s).params_tensor();
      });
}

}  // namespace
}  // namespace llmp
