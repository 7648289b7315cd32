// The mixture-of-experts stage in bf16 and fp16 (stages/moe/moe.h "Mixed precision"; the layer's
// 16-bit path in common/nn/moe.cc) against the single-rank MoE trainer in the same precision, its
// bf16 report rows, and fp16's overflow skip agreed by every rank. Run on 1, 2 and 4 ranks.
//
// Bounds. The stage differs from the 16-bit baseline as naive DP does (stages/naive_dp/
// naive_dp_test.cc derives the bounds used here): each rank rounds its own partial dense gradient
// (the baseline rounds the whole batch's once) and the 16-bit all_reduce rounds at every pairwise
// addition; an expert's gradient at ep = W is its rank's alone, the baseline's arithmetic. The
// experts' rows are the baseline's rows in the same order (moe.h), moved by all_to_alls that copy
// 16-bit values exactly. So at W = 1 the stage IS the baseline, to the bit (asserted).
// Measured (moe-tiny, 6 steps, lr 1e-3, W = 2 and 4, ep = W and ep < W; top-2 with c = 1, and
// top-1 with c = 0.75 in every block): losses ≤ 4.8e-5 relative in bf16 (naive DP's ≤ 1.4e-5:
// a router logit an ulp away can move a token to another expert or past the capacity, a discrete
// change the dense model does not have) and ≤ 1.4e-5 in fp16; master weights ≤ 5.3e-3 in bf16
// (c_attn.bias's key part, naive DP's noise elements) and ≤ 4.6e-4 in fp16. Bounds: naive DP's,
// 1e-4, 1e-2 and 2e-3. Without the expert all_reduce at ep < W (planted) the bf16 losses moved
// by 8.4e-4.
//
// Glossary as in moe_test.cc: W ranks, ep expert-parallel ranks, D = W/ep, G = B/W, Ψ_d, Ψ_x.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tensor/memory.h"
#include "common/train/report.h"
#include "stages/moe/moe.h"
#include "tests/equivalence.h"
#include "tests/moe_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr double kLossBound = 1e-4, kBf16ParamBound = 1e-2, kFp16ParamBound = 2e-3;
constexpr double kDense = 25952, kExpert = 8352;  // moe-tiny's Ψ_d and one expert (moe_test.cc)

void expect_matches_16_bit_baseline(TrainPrecision p, const GPTConfig& c, int ep) {
  SCOPED_TRACE(std::string(p == TrainPrecision::kBF16 ? "bf16" : "fp16") + ", ep " +
               std::to_string(ep));
  AdamWConfig opt;
  // fp16: eps near the small gradients, so that a stage stepping on S·g (never unscaled) would
  // move them by ~lr, far above the bound (naive_dp_test.cc).
  if (p == TrainPrecision::kFP16) opt.eps = 1e-6f;
  const MoeEquivalence eq =
      run_moe_against_baseline(c, ep, /*steps=*/6, /*B=*/8, 1234, opt, precision_config(p));
  EXPECT_LE(eq.r.max_loss_rel, kLossBound) << "losses";
  EXPECT_LE(eq.r.max_param_rel, p == TrainPrecision::kBF16 ? kBf16ParamBound : kFp16ParamBound)
      << "master weights (largest |diff| in " << eq.r.worst_param << ")";
  EXPECT_GT(eq.routing.dropped, 0) << "the capacity factor should drop tokens in this test";
  if (test_world().size() == 1) {
    // One rank: no all_reduce adds anything, the all_to_alls are copies: the baseline's walk.
    EXPECT_EQ(eq.r.losses, eq.r.baseline_losses) << "W = 1: the 16-bit baseline's arithmetic";
    EXPECT_EQ(eq.state, eq.base_state) << "W = 1: master weights, m and v bit for bit";
  }
}

TEST(MoeMixedPrecision, Bf16MatchesTheBf16BaselineAtEveryEp) {
  for (int ep : moe_ep_sizes(4))
    expect_matches_16_bit_baseline(TrainPrecision::kBF16, moe_tiny(2, 1.0, 2), ep);
}

TEST(MoeMixedPrecision, Fp16MatchesTheFp16BaselineAtEveryEp) {
  for (int ep : moe_ep_sizes(4))
    expect_matches_16_bit_baseline(TrainPrecision::kFP16, moe_tiny(2, 1.0, 2), ep);
}

TEST(MoeMixedPrecision, TopOneEveryBlockInBf16MatchesTheBaseline) {
  // k = 1, c = 0.75 (drops in every group), every block a mixture, E = 8 (several experts per
  // rank): the dispatch's chunking in 16 bits, with two MoE blocks' all_to_alls.
  expect_matches_16_bit_baseline(TrainPrecision::kBF16, moe_tiny(1, 0.75, 1, /*experts=*/8),
                                 test_world().size());
}

TEST(MoeMixedPrecision, Bf16ReportRowsHalveEveryByteThatMoves) {
  const GPTConfig c = moe_tiny(2, 1.0, 2);
  const int W = test_world().size(), G = 8 / W;
  for (int ep : moe_ep_sizes(c.experts)) {
    SCOPED_TRACE("ep " + std::to_string(ep));
    const int D = W / ep, held = c.experts / ep;
    const MoeStepMeasurement m = measure_moe_steps(GPT(c, TpComm::none(), DType::kBF16), ep,
                                                   precision_config(TrainPrecision::kBF16));
    for (const ReportRow& r : m.rows) {
      EXPECT_EQ(r.measured, r.formula) << r.what << " (" << r.formula_text << ")";
      EXPECT_TRUE(report_row_ok(r)) << r.what;
    }
    // Model states: 16-bit parameters and gradients, the fp32 master copy with m and v.
    const double psi_r = kDense + held * kExpert;
    EXPECT_EQ(m.params, 2 * psi_r) << "16-bit parameters";
    EXPECT_EQ(m.grads, 2 * psi_r) << "16-bit gradients";
    EXPECT_EQ(m.optimizer, 12 * psi_r) << "master, m, v";
    // Both gradient all_reduces at 2 bytes an element (the world's and the expert-data group's
    // CommStats; the clipping norm is off).
    EXPECT_EQ(m.world_sent, 2.0 * (W - 1) / W * 2 * kDense);
    EXPECT_EQ(m.edp_sent, 2.0 * (D - 1) / D * 2 * held * kExpert);
    // The tokens: 4 all_to_alls per MoE block of the (E,G,cap,C) buffer at 2 bytes an element,
    // half of fp32's (moe_test.cc: 4·(ep-1)/ep·4 B·E·G·cap·C).
    EXPECT_EQ(report_row(m.rows, "all_to_all/step").measured,
              4 * (ep - 1.0) / ep * 2 * 4 * G * 8 * 32);
    if (W == 2 && ep == 2) {
      EXPECT_EQ(report_row(m.rows, "all_to_all/step").measured, 16384.0) << "fp32's 32768 halved";
    }
  }
}

TEST(MoeMixedPrecision, Fp16OverflowOnOneRankIsSkippedByEveryRank) {
  const GPTConfig c = moe_tiny(2, 1.0, 2);
  expect_injected_overflow_skipped_by_every_rank(
      [](const GPT& model) -> std::unique_ptr<MixedPrecisionStrategy> {
        return make_moe_strategy(model, test_world().size(), AdamWConfig{}, 7,
                                 precision_config(TrainPrecision::kFP16));
      },
      [](const MixedPrecisionStrategy& s) -> const Tensor& {
        return static_cast<const ExpertParallelStrategy&>(s).params_tensor();
      },
      c);
}

}  // namespace
}  // namespace llmp
