// The pipeline schedules under --precision bf16 / fp16 (common/pipeline/pipeline_strategy.h):
// 16-bit parameters, activations and p2p messages, the micro-batches' gradients accumulated in
// fp32 (Megatron-LM's main_grad), AdamW's fp32 master copy. Every schedule of PipelineStrategy
// (naive, GPipe, 1F1B, interleaved 1F1B, ZB-H1, Chimera) against the baseline in the same
// precision; the memory rows (2Ψ_r, 4Ψ_r, 12Ψ_r) from the allocations against the partition;
// the bytes sent against the fp32 run's (half of every message, the same fp32 all_reduce of the
// tied wte); a bit-exact resume from get_state / set_state; fp16's overflow skipped on every
// stage. Run on 2 and 4 ranks (mpi_test in BUILD).
//
// Glossary: p pipeline stages (= ranks), m micro-batches, v chunks, Ψ_r parameters on rank r,
// B global batch, b = B/m, T sequence, C channels, V vocabulary, S loss scale.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "tests/pipeline_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

using testing::pipeline_world;

// Bounds against the baseline in the same 16-bit precision (10 steps of tiny with L = 8, B = 16),
// the reasoning of stages/ddp/ddp_mixed_precision_test.cc: the runs differ by rounding, not by
// math. The baseline rounds each gradient element to 16 bits once (its fp32 sum over the batch);
// a pipeline adds m micro-batches' fp32 gradients and never rounds them (the master update reads
// fp32), and its head and blocks see b = B/m sequences at a time, so its 16-bit activations are
// the same values computed in another order. Losses: an ulp of a gradient moves Adam's step by
// about that relative amount, far below 1e-4 in 10 steps. Parameters (max |diff| / max |p|): the
// elements whose true gradient is zero (the key part of c_attn.bias) take ±lr steps in a
// direction rounding decides, up to 2·lr·steps = 2e-2 apart. Measured at p = 2 and 4 (each test
// prints its figures): bf16 losses ≤ 7.8e-6, parameters ≤ 2.0e-3 (c_attn.bias); fp16 (eps = 1e-6,
// below) losses ≤ 1.3e-6, parameters ≤ 2.4e-5. The bounds sit 2.5× and 8× above: a schedule that
// drops a micro-batch's gradient, the tied wte's all_reduce or fp16's loss scale is far outside.
constexpr double kLossBound = 1e-4;
constexpr double kBf16ParamBound = 5e-3;
constexpr double kFp16ParamBound = 2e-4;

MixedPrecisionConfig precision(TrainPrecision p) {
  MixedPrecisionConfig mp;
  mp.precision = p;  // fp16: the dynamic scaler's defaults (S = 2^16, window 1000)
  return mp;
}

/// A PipelineStrategy over make_schedule(name, p, m, v) in `p`'s precision.
testing::PipelineFactory pipeline(const std::string& name, int v, TrainPrecision p) {
  return [name, v, p](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed, int m) {
    return std::make_unique<PipelineStrategy>(model, pp, opt, seed,
                                              make_schedule(name, pp.size(), m, v), "",
                                              LogicalCosts{}, precision(p));
  };
}

struct Case {
  const char* schedule;
  int v, m;
};

/// Chimera needs an even p: it is left out on odd worlds.
std::vector<Case> cases() {
  std::vector<Case> c = {{"naive", 1, 1},         {"gpipe", 1, 4}, {"1f1b", 1, 4},
                         {"interleaved_1f1b", 2, 4}, {"zb_h1", 1, 4}};
  if (pipeline_world().size() % 2 == 0) c.push_back({"chimera", 1, 4});
  return c;
}

void expect_matches_baseline(TrainPrecision p, double param_bound, AdamWConfig opt = {}) {
  for (const Case& c : cases()) {
    EquivalenceConfig cfg = testing::pipeline_equivalence_config(p);
    cfg.opt = opt;
    ProcessGroup& pp = pipeline_world();
    const testing::PipelineFactory make = pipeline(c.schedule, c.v, p);
    const EquivalenceResult r = run_against_baseline(
        [&](const GPT& model, AdamWConfig o, uint64_t seed) -> std::unique_ptr<Strategy> {
          return make(model, pp, o, seed, c.m);
        },
        pp, cfg);
    if (pp.rank() == 0)
      std::printf("%s %s p=%d m=%d v=%d: losses within %.2e, parameters within %.2e (%s)\n",
                  to_string(p), c.schedule, pp.size(), c.m, c.v, r.max_loss_rel,
                  r.max_param_rel, r.worst_param.c_str());
    EXPECT_LE(r.max_loss_rel, kLossBound) << c.schedule << " losses";
    EXPECT_LE(r.max_param_rel, param_bound)
        << c.schedule << " parameters (largest |diff| in " << r.worst_param << ")";
  }
}

TEST(PipelineMixedPrecision, EveryScheduleMatchesTheBaselineInBf16) {
  expect_matches_baseline(TrainPrecision::kBF16, kBf16ParamBound);
}

// eps = 1e-6: a stage that stepped on the scaled gradients S·g (Adam is scale-invariant but for
// eps), or whose walk did not scale the loss by S at all, moves differently from the baseline.
TEST(PipelineMixedPrecision, EveryScheduleMatchesTheBaselineInFp16WithDynamicLossScaling) {
  AdamWConfig opt;
  opt.eps = 1e-6f;
  expect_matches_baseline(TrainPrecision::kFP16, kFp16ParamBound, opt);
}

// The allocations: 2Ψ_r of 16-bit parameters, 4Ψ_r of fp32 gradients, 12Ψ_r of master weights,
// m and v, with Ψ_r counted from the partition (the wte copy on the last stage included).
TEST(PipelineMixedPrecision, MemoryRowsAreSixteenBitParametersAndFp32Gradients) {
  for (const Case& c : cases())
    testing::expect_memory_rows_match_partition(pipeline(c.schedule, c.v, TrainPrecision::kBF16),
                                                c.schedule, c.m, TrainPrecision::kBF16);
}

// The same step in fp32 and in bf16: every p2p message is half as many bytes; the tied wte's
// all_reduce (4VC on the embedding ranks) and Chimera's replica all_reduce (4Ψ_r) carry fp32
// gradients in both. Measured from the groups' CommStats; also against the closed form.
TEST(PipelineMixedPrecision, MessagesAreHalfTheBytesAllReducesAreNot) {
  const GPTConfig c = equivalence_model(testing::pipeline_equivalence_config());
  for (const Case& k : cases()) {
    const testing::ProbeResult f32 =
        testing::probe(pipeline(k.schedule, k.v, TrainPrecision::kFP32), k.m, 1);
    const testing::ProbeResult b16 = testing::probe(
        pipeline(k.schedule, k.v, TrainPrecision::kBF16), k.m, 1, TrainPrecision::kBF16);
    const int p = pipeline_world().size(), r = pipeline_world().rank();
    const bool chimera = std::string(k.schedule) == "chimera";
    // What is not a p2p message: Chimera's replica all_reduce of the pair's 4Ψ_r (2(N-1)/N·4Ψ_r,
    // N = 2; Ψ_r from the partition), or wte's 4VC on the embedding ranks {0, p-1}.
    double reduce = 0;
    if (chimera && p > 1) {
      const GPTLayout layout(c);
      const GPTPartition part(layout, c.layers, p, /*v=*/2, /*pipelines=*/2);
      reduce = 4.0 * part.local_numel(r);
    } else if (p > 1 && (r == 0 || r == p - 1)) {
      reduce = 4.0 * c.vocab * c.d;
    }
    std::printf("%s p=%d rank %d: sent %.0f B in fp32, %.0f B in bf16 (formula %.0f), of which "
                "all_reduce %.0f B\n",
                k.schedule, p, r, f32.bytes, b16.bytes, b16.expected_bytes, reduce);
    EXPECT_DOUBLE_EQ(b16.bytes, b16.expected_bytes) << k.schedule << " rank " << r;
    EXPECT_DOUBLE_EQ(b16.bytes - reduce, (f32.bytes - reduce) / 2) << k.schedule << " rank " << r;
    EXPECT_GT(f32.bytes, b16.bytes) << k.schedule << ": no message got smaller";
  }
}

// A checkpoint holds the fp32 master weights: a fresh stage (another seed) given A's state gives
// it back, and the next step of both is bit-identical (the 16-bit parameters rounded from the
// same master copy).
TEST(PipelineMixedPrecision, Bf16ResumesBitExactly) {
  const EquivalenceConfig cfg = testing::pipeline_equivalence_config(TrainPrecision::kBF16);
  const GPT model(equivalence_model(cfg), TpComm::none(), DType::kBF16);
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  const int B = cfg.global_batch, T = cfg.T;
  const int64_t psi = model.layout().num_params();
  for (const Case& c : cases()) {
    const testing::PipelineFactory make = pipeline(c.schedule, c.v, TrainPrecision::kBF16);
    std::unique_ptr<PipelineStrategy> a = make(model, pp, cfg.opt, cfg.seed, c.m);
    std::vector<int32_t> tok(B * T), tgt(B * T);
    for (int step = 1; step <= 3; ++step) {
      sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
      a->train_step(tok.data(), tgt.data(), B, T, step);
    }
    std::vector<float> sa(3 * psi), sb(3 * psi);
    a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    std::unique_ptr<PipelineStrategy> b = make(model, pp, cfg.opt, cfg.seed + 99, c.m);
    b->set_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b->get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    EXPECT_EQ(sb, sa) << c.schedule << ": set_state then get_state";
    sample(corpus.train(), cfg.seed, 4, 0, B, T, tok.data(), tgt.data());
    const double la = a->train_step(tok.data(), tgt.data(), B, T, 4);
    const double lb = b->train_step(tok.data(), tgt.data(), B, T, 4);
    a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
    b->get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
    if (pp.rank() == 0)
      std::printf("%s p=%d: step 4 after the round trip %.9f, uninterrupted %.9f\n", c.schedule,
                  pp.size(), lb, la);
    EXPECT_EQ(la, lb) << c.schedule;
    EXPECT_EQ(sb, sa) << c.schedule << ": the state after one more step";
    // The master copy is what came back, not the 16-bit parameters: some element of it is not
    // a bf16 value (an fp32 with nonzero low 16 bits).
    int not_bf16 = 0;
    for (int64_t i = 0; i < psi; ++i) {
      uint32_t u;
      std::memcpy(&u, &sa[i], sizeof(u));
      not_bf16 += (u & 0xFFFFu) != 0;
    }
    EXPECT_GT(not_bf16, 0) << c.schedule << ": get_state returned 16-bit values";
  }
}

// Sets the test hook `hook` = 2 on `ranks` (mixed_precision.h), trains 3 fp16 steps of every
// schedule and expects step 2 skipped on every rank: S halved, the state after step 2
// bit-identical to the state after step 1, step 3 clean.
void expect_step_two_skipped_everywhere(const char* hook, const std::string& ranks) {
  ProcessGroup& pp = pipeline_world();
  setenv(hook, "2", 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", ranks.c_str(), 1);
  const EquivalenceConfig cfg = testing::pipeline_equivalence_config(TrainPrecision::kFP16);
  const GPT model(equivalence_model(cfg), TpComm::none(), DType::kF16);
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  const int B = cfg.global_batch, T = cfg.T;
  const int64_t psi = model.layout().num_params();
  for (const Case& c : cases()) {
    std::unique_ptr<PipelineStrategy> s =
        pipeline(c.schedule, c.v, TrainPrecision::kFP16)(model, pp, cfg.opt, cfg.seed, c.m);
    std::vector<int32_t> tok(B * T), tgt(B * T);
    std::vector<float> after1(3 * psi), after2(3 * psi);
    float scale1 = 0;
    for (int step = 1; step <= 3; ++step) {
      sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
      s->train_step(tok.data(), tgt.data(), B, T, step);
      std::vector<float>& st = step == 1 ? after1 : after2;
      if (step <= 2) s->get_state(st.data(), st.data() + psi, st.data() + 2 * psi);
      if (step == 1) scale1 = s->mixed_precision().loss_scale();
      if (step == 2) {
        EXPECT_EQ(s->mixed_precision().skipped_steps(), 1) << c.schedule << " rank " << pp.rank();
        EXPECT_EQ(s->mixed_precision().loss_scale(), scale1 / 2) << c.schedule;
        EXPECT_EQ(after2, after1) << c.schedule << " rank " << pp.rank()
                                  << ": the skipped step changed the state";
      }
    }
    EXPECT_EQ(s->mixed_precision().skipped_steps(), 1) << c.schedule << ": step 3 is clean";
    if (pp.rank() == 0)
      std::printf("%s on rank(s) %s, %s p=%d: step 2 skipped on every rank, S %g -> %g\n", hook,
                  ranks.c_str(), c.schedule, pp.size(), scale1,
                  s->mixed_precision().loss_scale());
  }
  unsetenv(hook);
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
}

// LLMP_TEST_OVERFLOW_STEP=2 multiplies step 2's loss scale by 2^64 on the last rank only (the
// rank whose head starts the backward): the fp16 gradients overflow there and the inf flows back
// through every stage's messages, so every rank sees it in its own gradient.
TEST(PipelineMixedPrecision, Fp16OverflowIsSkippedOnEveryStage) {
  expect_step_two_skipped_everywhere("LLMP_TEST_OVERFLOW_STEP",
                                     std::to_string(pipeline_world().size() - 1));
}

// LLMP_TEST_LOCAL_OVERFLOW_STEP=2 on rank 0 only: an overflow no other stage sees (as one that
// starts inside rank 0's blocks, after the messages from later stages have left them). Only the
// agreement over pp makes the other stages skip it too.
TEST(PipelineMixedPrecision, Fp16OverflowOnOneStageIsSkippedByEveryStage) {
  expect_step_two_skipped_everywhere("LLMP_TEST_LOCAL_OVERFLOW_STEP", "0");
}

}  // namespace
}  // namespace llmp
