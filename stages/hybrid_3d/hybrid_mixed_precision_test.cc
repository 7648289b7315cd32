// hybrid_3d under --precision bf16 / fp16 (hybrid_3d.h, "Mixed precision"): 16-bit parameters
// and activations, fp32 gradients, the fp32 master copy with m and v on each rank's ZeRO shard.
// Against the baseline in the same precision; every report row against its closed form and each
// group's bytes and each memory category against the fp32 run's, measured; a bit-exact resume
// from the master shards; fp16's overflow on one rank skipped by every rank of the grid. On 4
// ranks the grids with one dimension of size 1, on 8 ranks dp 2 × pp 2 × tp 2; ZeRO-1 and ZeRO-2.
//
// tiny: V = 256, ctx = T = 16, L = 2, C = 32, H = 2; B = 12. Glossary as hybrid_3d.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "stages/hybrid_3d/hybrid_3d_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

// Bounds against the baseline in the same 16-bit precision, 10 steps: the reasoning of
// tests/tp_mixed_precision_test.cc. A tp slice's partial products are summed by g's all_reduce
// in 16 bits, so activations and gradients differ from the baseline's by 16-bit ulps, and the
// elements whose true gradient is zero (c_attn.bias's key part) drift by up to 2·lr·steps = 2e-2
// in bf16. The losses' 1e-4 is what catches a wrong slice, a lost message or a skipped
// micro-batch. Measured (printed): see the README of this stage.
constexpr double kLossBound = 1e-4;
constexpr double kBf16ParamBound = 2e-2;
constexpr double kFp16ParamBound = 2e-3;

struct Case {
  GridShape grid;
  int m;
  bool sp;
  int zero;
};

/// The grids of this world size: 4 ranks, each dimension of size 1 once; 8 ranks, all three 2.
std::vector<Case> cases() {
  if (test_world().size() == 8) return {{{2, 2, 2}, 3, false, 1}, {{2, 2, 2}, 3, true, 2}};
  return {{{2, 2, 1}, 3, false, 1},
          {{1, 2, 2}, 3, true, 1},
          {{2, 1, 2}, 3, true, 2},
          {{2, 2, 1}, 3, false, 2}};
}

std::string name(const Case& c) {
  return "(" + std::to_string(c.grid.dp) + "," + std::to_string(c.grid.pp) + "," +
         std::to_string(c.grid.tp) + ") m=" + std::to_string(c.m) + (c.sp ? " SP" : "") +
         " ZeRO-" + std::to_string(c.zero);
}

HybridOptions options(const Case& c, TrainPrecision p) {
  HybridOptions o;
  o.micro_batches = c.m, o.sequence_parallel = c.sp, o.zero = c.zero;
  o.mp.precision = p;  // fp16: the dynamic scaler's defaults (S = 2^16, window 1000)
  return o;
}

void expect_matches_baseline(TrainPrecision p, double param_bound, AdamWConfig opt) {
  for (const Case& c : cases()) {
    EquivalenceConfig cfg = hybrid_equivalence_config();
    cfg.mp.precision = p;
    cfg.opt = opt;
    const EquivalenceResult r =
        run_against_baseline(hybrid_factory(c.grid, options(c, p)), test_world(), cfg);
    if (test_world().rank() == 0)
      std::printf("%s %s: losses within %.2e, parameters within %.2e (%s)\n", to_string(p),
                  name(c).c_str(), r.max_loss_rel, r.max_param_rel, r.worst_param.c_str());
    EXPECT_LE(r.max_loss_rel, kLossBound) << name(c) << " losses";
    EXPECT_LE(r.max_param_rel, param_bound)
        << name(c) << " parameters (largest |diff| in " << r.worst_param << ")";
  }
}

TEST(HybridMixedPrecision, MatchesTheBaselineInBf16) {
  expect_matches_baseline(TrainPrecision::kBF16, kBf16ParamBound, AdamWConfig{});
}

// --clip_grad 0.5 clips every step of tiny (its norm starts near 1.5): the norm is summed over
// the world from the owned elements of each master shard's gradient, or the run leaves the
// clipped baseline.
TEST(HybridMixedPrecision, MatchesTheClippedBaselineInBf16) {
  AdamWConfig opt;
  opt.clip_grad = 0.5;
  expect_matches_baseline(TrainPrecision::kBF16, kBf16ParamBound, opt);
}

// eps = 1e-6: a rank that stepped on the scaled gradients S·g, or whose walk did not scale the
// loss by S, moves differently from the baseline.
TEST(HybridMixedPrecision, MatchesTheBaselineInFp16WithDynamicLossScaling) {
  AdamWConfig opt;
  opt.eps = 1e-6f;
  expect_matches_baseline(TrainPrecision::kFP16, kFp16ParamBound, opt);
}

/// Trains steps [first, last] of B sequences (this rank's slice of each global batch); returns
/// the last step's loss.
double train(HybridStrategy& s, int B, int first, int last, uint64_t seed = 3) {
  const int T = 16;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  const BatchSlice sl = s.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  double loss = 0;
  for (int k = first; k <= last; ++k) {
    sample(corpus.train(), seed, k, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    loss = s.train_step(tok.data(), tgt.data(), B, T, k);
  }
  return loss;
}

// One step of each grid in fp32 and in bf16, each group's bytes and each memory category
// measured in both: the parameters and every activation message (tp, SP's re-gather, pp) half,
// the gradients and what carries them (the wte pair, SP's replicated gradients, the dp
// reduce_scatters) the same, the optimizer state 12/8 of fp32's, and the dp group 2 bytes an
// element less for the parameters' all_gather. The cross-entropy's row statistics stay fp32 on
// the last stage: m·2(t-1)/t·4·3bT. And in bf16 every report row equals its closed form.
TEST(HybridMixedPrecision, SixteenBitParametersAndMessagesFp32Gradients) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  const int B = 12, T = 16;
  for (const Case& c : cases()) {
    ProcessGrid& grid = hybrid_test_grid(c.grid);
    HybridMeasured f, h;
    {
      HybridStrategy s(cfg, grid, AdamWConfig{}, 7, options(c, TrainPrecision::kFP32));
      train(s, B, 1, 1);
      f = s.last_measured();
    }
    HybridStrategy s(cfg, grid, AdamWConfig{}, 7, options(c, TrainPrecision::kBF16));
    train(s, B, 1, 1);
    h = s.last_measured();
    const double t = c.grid.tp, dp = c.grid.dp, b = double(B) / dp / c.m;
    const bool last = grid.pp_rank() == c.grid.pp - 1;
    const double ce = last ? c.m * 2 * (t - 1) / t * 4 * 3 * b * T : 0;
    const double psi_r = f.params / 4;
    SCOPED_TRACE(name(c) + " world rank " + std::to_string(grid.world().rank()));
    std::printf("%s rank %d: params %.0f/%.0f grads %.0f/%.0f optimizer %.0f/%.0f tp %.0f/%.0f "
                "pp %.0f/%.0f wte %.0f/%.0f dp %.0f/%.0f (bf16/fp32 bytes)\n",
                name(c).c_str(), grid.world().rank(), h.params, f.params, h.grads, f.grads,
                h.optimizer, f.optimizer, h.tp, f.tp, h.pp, f.pp, h.emb, f.emb, h.dp, f.dp);
    EXPECT_EQ(h.params, f.params / 2);
    EXPECT_EQ(h.grads, f.grads) << "fp32 gradients: the micro-batches add into them";
    EXPECT_EQ(h.optimizer, f.optimizer * 12 / 8) << "master, m, v on the shard";
    EXPECT_EQ(h.tp - ce, (f.tp - ce) / 2);
    EXPECT_EQ(h.regather, f.regather / 2);
    EXPECT_EQ(h.repl_grads, f.repl_grads);
    EXPECT_EQ(h.pp, f.pp / 2);
    EXPECT_EQ(h.emb, f.emb);
    EXPECT_EQ(f.dp - h.dp, (dp - 1) / dp * 2 * psi_r) << "the all_gather in 2 bytes";
    if (c.grid.tp > 1) {
      EXPECT_GT(f.tp - ce, 0) << "nothing crossed the tp group";
    }
    if (c.grid.pp > 1) {
      EXPECT_GT(f.pp, 0) << "nothing crossed the pp group";
    }
    for (const ReportRow& r : s.report())
      EXPECT_EQ(r.measured, r.formula) << r.what << " (" << r.formula_text << ")";
  }
}

// A checkpoint holds the fp32 master copy, gathered from the dp shards: a fresh strategy (another
// seed) given the state gives it back, and the next step of both is bit-identical.
TEST(HybridMixedPrecision, Bf16ResumesBitExactly) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  const int64_t psi = GPTLayout(cfg).num_params();
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    ProcessGrid& grid = hybrid_test_grid(c.grid);
    HybridStrategy a(cfg, grid, AdamWConfig{}, 7, options(c, TrainPrecision::kBF16));
    train(a, 12, 1, 3);
    std::vector<float> sa(3 * psi), sb(3 * psi);
    a.get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    HybridStrategy b(cfg, grid, AdamWConfig{}, 99, options(c, TrainPrecision::kBF16));
    b.set_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b.get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    EXPECT_EQ(sb, sa) << "set_state then get_state";
    const double la = train(a, 12, 4, 4), lb = train(b, 12, 4, 4);
    a.get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b.get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    if (grid.world().rank() == 0)
      std::printf("%s: step 4 after the round trip %.9f, uninterrupted %.9f\n", name(c).c_str(),
                  lb, la);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(sb, sa) << "the state after one more step";
    // The master copy came back, not the 16-bit parameters: some element is not a bf16 value.
    int not_bf16 = 0;
    for (int64_t i = 0; i < psi; ++i) {
      uint32_t u;
      std::memcpy(&u, &sa[i], sizeof(u));
      not_bf16 += (u & 0xFFFFu) != 0;
    }
    EXPECT_GT(not_bf16, 0) << "get_state returned 16-bit values";
  }
}

// LLMP_TEST_LOCAL_OVERFLOW_STEP=2 on the last world rank only (mixed_precision.h): an overflow
// no other rank sees, as one starting in one tp rank's slice of one stage of one replica would
// be. Only the agreement over the whole world makes the ranks of every other dimension skip it
// too: S halves, the state after step 2 is the state after step 1, step 3 is clean.
TEST(HybridMixedPrecision, Fp16OverflowOnOneRankIsSkippedByEveryRank) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  const int64_t psi = GPTLayout(cfg).num_params();
  setenv("LLMP_TEST_LOCAL_OVERFLOW_STEP", "2", 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", std::to_string(test_world().size() - 1).c_str(), 1);
  for (const Case& c : cases()) {
    ProcessGrid& grid = hybrid_test_grid(c.grid);
    SCOPED_TRACE(name(c) + " world rank " + std::to_string(grid.world().rank()));
    HybridStrategy s(cfg, grid, AdamWConfig{}, 7, options(c, TrainPrecision::kFP16));
    std::vector<float> after1(3 * psi), after2(3 * psi);
    train(s, 12, 1, 1);
    s.get_state(after1.data(), after1.data() + psi, after1.data() + 2 * psi);
    const float scale1 = s.mixed_precision().loss_scale();
    train(s, 12, 2, 2);
    s.get_state(after2.data(), after2.data() + psi, after2.data() + 2 * psi);
    EXPECT_EQ(s.mixed_precision().skipped_steps(), 1);
    EXPECT_EQ(s.mixed_precision().loss_scale(), scale1 / 2);
    EXPECT_EQ(after2, after1) << "the skipped step changed the state";
    train(s, 12, 3, 3);
    EXPECT_EQ(s.mixed_precision().skipped_steps(), 1) << "step 3 is clean";
    if (grid.world().rank() == 0)
      std::printf("%s: step 2 skipped on every rank, S %g -> %g\n", name(c).c_str(), scale1,
                  s.mixed_precision().loss_scale());
  }
  unsetenv("LLMP_TEST_LOCAL_OVERFLOW_STEP");
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
}

}  // namespace
}  // namespace llmp
