// Tensor and sequence parallelism under --precision bf16 / fp16 (common/tp/tp_strategy.h): each
// rank's slice of the parameters and gradients in 16 bits, AdamW's fp32 master copy of the slice,
// the activations and so every message of f, g and the sequence collectives in 16 bits. Against
// the baseline in the same precision; the memory rows (2Ψ_r, 2Ψ_r, 12Ψ_r) with Ψ_r counted from
// the slice's layout; the bytes sent against the fp32 run's (every activation message half, the
// cross-entropy's fp32 row statistics not); a bit-exact resume; fp16's overflow skipped on every
// rank. Run on 2 and 4 ranks (mpi_test in BUILD), tiny with H = 4.
//
// Glossary: t tensor-parallel ranks, Ψ_r parameters of a rank's slice, B global batch, T
// sequence, L blocks, S loss scale.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/tp/tp_strategy.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"
#include "tests/tp_test_util.h"

namespace llmp {
namespace {

// Bounds against the baseline in the same 16-bit precision (10 steps of tiny, H = 4, B = 12): the
// reasoning of stages/ddp/ddp_mixed_precision_test.cc. Both sides round each gradient element to
// 16 bits once, but a rank's slice of a product sums over its own part of the hidden dimension
// and g's all_reduce then adds the t partial sums in 16 bits (each pairwise sum rounded), so the
// activations and gradients differ by 16-bit ulps; the elements whose true gradient is zero (the
// key part of c_attn.bias) drift by up to 2·lr·steps = 2e-2. Measured at t = 2 and 4 (printed):
// bf16 losses ≤ 2.9e-5, parameters ≤ 8.7e-3, every time in c_attn.bias; fp16 (eps = 1e-6) losses
// ≤ 4.9e-6, parameters ≤ 9.8e-4. The bf16 parameter bound is that worst-case drift (the
// measurement is within 15% of DDP's 1e-2, too close for a bound); the losses' 1e-4 is what
// catches a wrong slice or a missing f/g in bf16 (a missing g moves them by far more).
constexpr double kLossBound = 1e-4;
constexpr double kBf16ParamBound = 2e-2;
constexpr double kFp16ParamBound = 2e-3;

std::unique_ptr<TensorParallelStrategy> make(const GPTConfig& c, bool sp, TrainPrecision p,
                                             AdamWConfig opt = {}, uint64_t seed = 1234) {
  return std::make_unique<TensorParallelStrategy>(c, test_world(), opt, seed, sp, Device::kCPU,
                                                  precision_config(p));
}

void expect_matches_baseline(TrainPrecision p, double param_bound, AdamWConfig opt = {}) {
  for (bool sp : {false, true}) {
    EquivalenceConfig cfg;
    cfg.heads = 4;
    cfg.mp = precision_config(p);
    cfg.opt = opt;
    const EquivalenceResult r = run_against_baseline(
        [sp, p](const GPT& model, AdamWConfig o, uint64_t seed) -> std::unique_ptr<Strategy> {
          return make(model.config(), sp, p, o, seed);
        },
        test_world(), cfg);
    if (test_world().rank() == 0)
      std::printf("%s %s t=%d: losses within %.2e, parameters within %.2e (%s)\n", to_string(p),
                  sp ? "sequence_parallel" : "tensor_parallel", test_world().size(),
                  r.max_loss_rel, r.max_param_rel, r.worst_param.c_str());
    EXPECT_LE(r.max_loss_rel, kLossBound) << (sp ? "SP" : "TP") << " losses";
    EXPECT_LE(r.max_param_rel, param_bound)
        << (sp ? "SP" : "TP") << " parameters (largest |diff| in " << r.worst_param << ")";
  }
}

TEST(TensorParallelMixedPrecision, MatchesTheBaselineInBf16) {
  expect_matches_baseline(TrainPrecision::kBF16, kBf16ParamBound);
}

// eps = 1e-6: a stage that stepped on the scaled gradients S·g, or whose walk did not scale the
// loss by S, moves differently from the baseline.
TEST(TensorParallelMixedPrecision, MatchesTheBaselineInFp16WithDynamicLossScaling) {
  AdamWConfig opt;
  opt.eps = 1e-6f;
  expect_matches_baseline(TrainPrecision::kFP16, kFp16ParamBound, opt);
}

// One step of the same slice in fp32 and in bf16. Memory from the allocations against Ψ_r from
// GPTLayout(cfg, t, r); the tp group's bytes: every activation message half, the
// vocabulary-parallel cross-entropy's row statistics (2(t-1)/t·12BT, fp32) the same; SP's
// re-gather half; the replicated gradients' all_reduce half (16-bit gradients).
TEST(TensorParallelMixedPrecision, SixteenBitSlicesAndHalfTheMessages) {
  const GPTConfig c = tiny_h4();
  const int t = test_world().size(), r = test_world().rank(), B = 4;
  const double psi_r = static_cast<double>(GPTLayout(c, t, r).num_params());
  const double ce = 2.0 * (t - 1) / t * 12.0 * B * c.ctx;  // the cross-entropy's fp32 reductions
  for (bool sp : {false, true}) {
    auto f32 = make(c, sp, TrainPrecision::kFP32);
    train_steps(*f32, B, 1, 7);
    const double f32_tp = f32->last_step_tp_bytes(), f32_rg = f32->last_step_regather_bytes(),
                 f32_gs = f32->last_step_grad_sync_bytes();
    f32.reset();
    auto b16 = make(c, sp, TrainPrecision::kBF16);
    train_steps(*b16, B, 1, 7);
    const std::vector<ReportRow> rows = b16->report();
    std::printf("%s t=%d rank %d: tp group %.0f B in bf16, %.0f in fp32 (cross-entropy %.0f); "
                "re-gather %.0f / %.0f; replicated gradients %.0f / %.0f\n",
                sp ? "SP" : "TP", t, r, b16->last_step_tp_bytes(), f32_tp, ce,
                b16->last_step_regather_bytes(), f32_rg, b16->last_step_grad_sync_bytes(), f32_gs);
    EXPECT_EQ(report_row(rows, "parameters").measured, 2 * psi_r);
    EXPECT_EQ(report_row(rows, "gradients").measured, 2 * psi_r);
    EXPECT_EQ(report_row(rows, "optimizer state").measured, 12 * psi_r) << "master, m, v";
    for (const ReportRow& row : rows)
      EXPECT_EQ(row.measured, row.formula) << (sp ? "SP " : "TP ") << row.what;
    EXPECT_DOUBLE_EQ(b16->last_step_tp_bytes() - ce, (f32_tp - ce) / 2);
    EXPECT_DOUBLE_EQ(b16->last_step_regather_bytes(), f32_rg / 2);
    EXPECT_DOUBLE_EQ(b16->last_step_grad_sync_bytes(), f32_gs / 2);
    if (t > 1) {
      EXPECT_GT(f32_tp - ce, 0) << "nothing crossed";
    }
  }
}

// A checkpoint holds the fp32 master copy: a fresh strategy (another seed) given the state gives
// it back, and the next step of both is bit-identical.
TEST(TensorParallelMixedPrecision, Bf16ResumesBitExactly) {
  const GPTConfig c = tiny_h4();
  const int64_t psi = GPTLayout(c).num_params();
  for (bool sp : {false, true}) {
    auto a = make(c, sp, TrainPrecision::kBF16);
    train_steps(*a, 4, 3, 7);
    std::vector<float> sa(3 * psi), sb(3 * psi);
    a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    auto b = make(c, sp, TrainPrecision::kBF16, {}, 99);
    b->set_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b->get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    EXPECT_EQ(sb, sa) << "set_state then get_state";
    const Corpus corpus = Corpus::load("/usr/share/games/fortunes", c.ctx);
    std::vector<int32_t> tok(4 * c.ctx), tgt(4 * c.ctx);
    sample(corpus.train(), 7, 4, 0, 4, c.ctx, tok.data(), tgt.data());
    const double la = a->train_step(tok.data(), tgt.data(), 4, c.ctx, 4);
    const double lb = b->train_step(tok.data(), tgt.data(), 4, c.ctx, 4);
    a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b->get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    EXPECT_EQ(la, lb) << (sp ? "SP" : "TP");
    EXPECT_EQ(sb, sa) << (sp ? "SP" : "TP") << ": the state after one more step";
    int not_bf16 = 0;  // the master copy came back, not the 16-bit slice
    for (int64_t i = 0; i < psi; ++i) {
      uint32_t u;
      std::memcpy(&u, &sa[i], sizeof(u));
      not_bf16 += (u & 0xFFFFu) != 0;
    }
    EXPECT_GT(not_bf16, 0) << "get_state returned 16-bit values";
  }
}

// Sets the test hook `hook` = 2 on rank 0 only (mixed_precision.h) and expects every rank to skip
// step 2: S halved, the state unchanged; TP and SP.
void expect_step_two_skipped_everywhere(const char* hook) {
  setenv(hook, "2", 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", "0", 1);
  const GPTConfig c = tiny_h4();
  const int64_t psi = GPTLayout(c).num_params();
  for (bool sp : {false, true}) {
    auto s = make(c, sp, TrainPrecision::kFP16);
    std::vector<float> after1(3 * psi), after2(3 * psi);
    train_steps(*s, 4, 1, 7);
    s->get_state(after1.data(), after1.data() + psi, after1.data() + 2 * psi);
    const float scale1 = s->mixed_precision().loss_scale();
    const Corpus corpus = Corpus::load("/usr/share/games/fortunes", c.ctx);
    std::vector<int32_t> tok(4 * c.ctx), tgt(4 * c.ctx);
    sample(corpus.train(), 7, 2, 0, 4, c.ctx, tok.data(), tgt.data());
    s->train_step(tok.data(), tgt.data(), 4, c.ctx, 2);
    s->get_state(after2.data(), after2.data() + psi, after2.data() + 2 * psi);
    EXPECT_EQ(s->mixed_precision().skipped_steps(), 1) << hook << ", rank " << test_world().rank();
    EXPECT_EQ(s->mixed_precision().loss_scale(), scale1 / 2) << hook;
    EXPECT_EQ(after2, after1) << hook << ", rank " << test_world().rank()
                              << ": the skipped step moved";
    if (test_world().rank() == 0)
      std::printf("%s on rank 0, %s t=%d: step 2 skipped on every rank, S %g -> %g\n", hook,
                  sp ? "SP" : "TP", test_world().size(), scale1,
                  s->mixed_precision().loss_scale());
  }
  unsetenv(hook);
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
}

// LLMP_TEST_OVERFLOW_STEP=2 on rank 0: its share of the head's gradient overflows in fp16 and g's
// all_reduce carries the inf to every rank.
TEST(TensorParallelMixedPrecision, Fp16OverflowIsSkippedOnEveryRank) {
  expect_step_two_skipped_everywhere("LLMP_TEST_OVERFLOW_STEP");
}

// LLMP_TEST_LOCAL_OVERFLOW_STEP=2 on rank 0: an overflow only rank 0 sees. Only the agreement
// over tp makes the others skip it too.
TEST(TensorParallelMixedPrecision, Fp16OverflowOnOneRankIsSkippedByEveryRank) {
  expect_step_two_skipped_everywhere("LLMP_TEST_LOCAL_OVERFLOW_STEP");
}

}  // namespace
}  // namespace llmp
