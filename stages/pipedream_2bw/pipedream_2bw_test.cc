// PipeDream-2BW on 2 and 4 ranks (mpi_test in BUILD): the update rule against a single-rank
// trainer that applies it (delayed_update_reference.h), the staleness against the baseline, no
// idle rank in the steady state (against 1F1B's flush), two weight versions in memory, bytes
// per step (a hand-worked case), and validation with the newest version.
//
// The model and batches are the pipeline tests' (pipeline_test_util.h: tiny, C = 32, V = 256,
// L = 8, B = 16, T = 16, the equivalence harness's sampler). Glossary: p ranks (stages), m
// micro-batches, b = B/m, W(t) weight version t, Ψ_r parameters held by rank r.
#include "stages/pipedream_2bw/pipedream_2bw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/pipeline/schedule.h"
#include "common/tensor/memory.h"
#include "common/train/single_rank.h"
#include "stages/pipedream_2bw/delayed_update_reference.h"
#include "tests/pipeline_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

using testing::pipeline_world;

/// The pipeline tests' model, data and batches, with the stage built for `steps` steps.
struct Fixture {
  EquivalenceConfig cfg = testing::pipeline_equivalence_config();
  GPT model{equivalence_model(cfg)};
  Corpus corpus = Corpus::load(cfg.data, cfg.T);
  int B = cfg.global_batch, T = cfg.T;
  std::vector<int32_t> tok = std::vector<int32_t>(B * T), tgt = std::vector<int32_t>(B * T);

  std::unique_ptr<PipeDream2BWStrategy> make(int m, int64_t steps) {
    return make_pipedream_2bw(model, pipeline_world(), cfg.opt, cfg.seed, m, steps);
  }
  /// Step `step`'s batch (1-based), the same for every rank and for the reference.
  void batch(int step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
  }
};

double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

TEST(PipeDream2BW, MatchesDelayedUpdateReference) {
  Fixture f;
  const int p = pipeline_world().size();
  const int64_t psi = f.model.layout().num_params();
  for (int m : {p, 2 * p}) {
    testing::DelayedUpdateReference ref(f.model, f.cfg.opt, f.cfg.seed);
    std::unique_ptr<PipeDream2BWStrategy> s = f.make(m, /*steps=*/10);
    double worst_loss = 0;
    for (int step = 1; step <= 10; ++step) {
      f.batch(step);
      const double want = ref.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
      const double got = s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
      worst_loss = std::max(worst_loss, rel(got, want));
      EXPECT_LE(rel(got, want), 1e-5) << "p=" << p << " m=" << m << " step " << step;
    }
    std::vector<float> params(psi), mo(psi), v(psi);
    s->get_state(params.data(), mo.data(), v.data());
    const double worst_param = max_rel_diff(params.data(), ref.newest().data(), psi);
    if (pipeline_world().rank() == 0)
      std::printf("pipedream_2bw p=%d m=%d, 10 steps against the delayed-update reference: "
                  "largest relative difference losses %.2e, parameters %.2e\n",
                  p, m, worst_loss, worst_param);
    EXPECT_LE(worst_param, 1e-5) << "p=" << p << " m=" << m;
  }
}

// --clip_grad: each update clips g(t), taken at W(t-1), by its own global norm. Over pp that
// norm is the sum of each rank's owned segments' squares (the last stage's wte copy not counted
// twice), so a rank that skipped the all_reduce or counted the copy would clip by another norm;
// the stage must end where the clipping reference does, and the unclipped reference elsewhere.
TEST(PipeDream2BW, ClipsEachUpdateByTheGlobalNormOfItsGradient) {
  Fixture f;
  const int p = pipeline_world().size();
  const int64_t psi = f.model.layout().num_params();
  AdamWConfig opt = f.cfg.opt;
  opt.clip_grad = 0.2;  // below every step's norm here: the coefficient changes each step
  testing::DelayedUpdateReference ref(f.model, opt, f.cfg.seed);
  testing::DelayedUpdateReference unclipped(f.model, f.cfg.opt, f.cfg.seed);
  std::unique_ptr<PipeDream2BWStrategy> s =
      make_pipedream_2bw(f.model, pipeline_world(), opt, f.cfg.seed, p, /*steps=*/6);
  for (int step = 1; step <= 6; ++step) {
    f.batch(step);
    const double want = ref.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    unclipped.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    const double got = s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    EXPECT_LE(rel(got, want), 1e-5) << "p=" << p << " step " << step;
    EXPECT_GT(ref.last_norm(), opt.clip_grad) << "step " << step << " did not clip";
  }
  std::vector<float> params(psi), mo(psi), v(psi);
  s->get_state(params.data(), mo.data(), v.data());
  const double worst = max_rel_diff(params.data(), ref.newest().data(), psi);
  const double control = max_rel_diff(unclipped.newest().data(), ref.newest().data(), psi);
  if (pipeline_world().rank() == 0)
    std::printf("pipedream_2bw p=%d --clip_grad %.1f, 6 steps: parameters %.2e from the clipping "
                "reference (the unclipped reference: %.2e); last norm %.5f, stage's note '%s'\n",
                p, opt.clip_grad, worst, control, ref.last_norm(), s->step_note().c_str());
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(control, 1e-4) << "clipping must change the run beyond the bound";
  // The progress line's norm (every rank's: the all-reduced one) is the last update's ‖g(5)‖.
  const std::string note = s->step_note();
  const size_t at = note.find("grad norm ");
  ASSERT_NE(at, std::string::npos) << "no norm in the progress note '" << note << "'";
  EXPECT_LE(rel(std::stod(note.substr(at + 10)), ref.last_norm()), 1e-5) << note;
}

// --precision bf16: two 16-bit versions, fp32 gradients, AdamW's master copy. Against the
// reference in bf16 (its master stepped, the new version rounded from it): the same losses and
// master weights. Both walk 16-bit weights with fp32 gradient sums in another order (the
// stages' micro-batches and the pipeline's message boundaries), so they differ by bf16 rounding
// noise, as the pipelines' bf16 runs differ from the baseline's (tests/
// pipeline_mixed_precision_test.cc: losses within 1e-4, parameters 5e-3). Then the memory: the
// two versions 2·2Ψ_r, the gradients 2·4Ψ_r, the master with m and v 12Ψ_r; every message half
// of the fp32 run's (the tied wte's all_reduce the same, fp32 gradients).
TEST(PipeDream2BW, MatchesTheDelayedUpdateReferenceInBf16) {
  EquivalenceConfig cfg = testing::pipeline_equivalence_config(TrainPrecision::kBF16);
  const GPT model(equivalence_model(cfg), TpComm::none(), DType::kBF16);
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  const int p = pipeline_world().size(), B = cfg.global_batch, T = cfg.T;
  const int64_t psi = model.layout().num_params();
  std::vector<int32_t> tok(B * T), tgt(B * T);
  auto ref = std::make_unique<testing::DelayedUpdateReference>(model, cfg.opt, cfg.seed,
                                                               TrainPrecision::kBF16);
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  std::unique_ptr<PipeDream2BWStrategy> s =
      make_pipedream_2bw(model, pipeline_world(), cfg.opt, cfg.seed, p, /*steps=*/10, "", mp);
  double worst_loss = 0;
  for (int step = 1; step <= 10; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    const double want = ref->train_step(tok.data(), tgt.data(), B, T, step);
    const double got = s->train_step(tok.data(), tgt.data(), B, T, step);
    worst_loss = std::max(worst_loss, rel(got, want));
  }
  std::vector<float> params(psi), mo(psi), v(psi);
  s->get_state(params.data(), mo.data(), v.data());
  const double worst_param = max_rel_diff(params.data(), ref->master().data(), psi);
  ref.reset();  // its AdamW's m and v are tracked tensors too: the memory below is the stage's
  if (pipeline_world().rank() == 0)
    std::printf("pipedream_2bw bf16 p=%d m=%d, 10 steps against the bf16 delayed-update "
                "reference: losses within %.2e, master weights within %.2e\n",
                p, p, worst_loss, worst_param);
  EXPECT_LE(worst_loss, 1e-4);
  EXPECT_LE(worst_param, 5e-3);
  // The memory and the bytes, measured on this rank against the fp32 run's.
  const std::vector<ReportRow> rows = s->report();
  const double n = static_cast<double>(s->partition().local_numel(pipeline_world().rank()));
  EXPECT_EQ(report_row(rows, "parameters").measured, 2 * 2 * n) << "two 16-bit versions";
  EXPECT_EQ(report_row(rows, "gradients").measured, 2 * 4 * n) << "two fp32 buffers";
  EXPECT_EQ(report_row(rows, "optimizer state").measured, 12 * n) << "master, m, v";
  EXPECT_EQ(s->weight_version_bytes(), int64_t(2 * 2 * n));
  for (const ReportRow& r : rows) EXPECT_EQ(r.measured, r.formula) << r.what;
}

// fp16 is refused by name: its loss scale may change between a batch's two segments.
TEST(PipeDream2BW, Fp16IsRefusedByName) {
  EXPECT_EQ(pipedream_2bw_precision_check(TrainPrecision::kBF16), "");
  EXPECT_NE(pipedream_2bw_precision_check(TrainPrecision::kFP16).find("not fp16"),
            std::string::npos);
}

TEST(PipeDream2BW, StaleByOneStep) {
  // Step 1 uses W(0) in both; step 2 uses W(0) again here, W(1) in the baseline.
  Fixture f;
  const int p = pipeline_world().size();
  SingleRankStrategy base(f.model, f.cfg.opt, f.cfg.seed);
  std::unique_ptr<PipeDream2BWStrategy> s = f.make(p, /*steps=*/2);
  double base_loss[2], loss[2];
  for (int step = 1; step <= 2; ++step) {
    f.batch(step);
    base_loss[step - 1] = base.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    loss[step - 1] = s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
  }
  if (pipeline_world().rank() == 0)
    std::printf("p=%d m=%d: step 1 loss %.7f (baseline %.7f), step 2 loss %.7f (baseline %.7f, "
                "relative difference %.2e)\n",
                p, p, loss[0], base_loss[0], loss[1], base_loss[1], rel(loss[1], base_loss[1]));
  EXPECT_LE(rel(loss[0], base_loss[0]), 1e-6);
  EXPECT_GT(rel(loss[1], base_loss[1]), 1e-4) << "step 2 must use W(0), not the baseline's W(1)";
}

/// Rank 0: each rank's idle logical time in the last step of a flushed 1F1B run: the step's
/// makespan minus the rank's forward and backward time.
std::vector<double> one_f_one_b_idle(Fixture& f, int m) {
  ProcessGroup& pp = pipeline_world();
  const int p = pp.size();
  PipelineStrategy s(f.model, pp, f.cfg.opt, f.cfg.seed, one_f_one_b(p, m));
  for (int step = 1; step <= 2; ++step) {
    f.batch(step);
    s.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
  }
  std::vector<double> idle(p, 0.0), busy(p, 0.0);
  double makespan = 0;
  for (const Span& sp : s.last_logical_spans()) {
    makespan = std::max(makespan, sp.end);
    if (sp.category == "forward" || sp.category == "backward") busy[sp.rank] += sp.end - sp.start;
  }
  for (int q = 0; q < p; ++q) idle[q] = makespan - busy[q];
  return idle;
}

TEST(PipeDream2BW, SteadyStateHasNoIdleRank) {
  Fixture f;
  const int p = pipeline_world().size(), rank = pipeline_world().rank();
  for (int m : {p, 2 * p}) {
    std::unique_ptr<PipeDream2BWStrategy> s = f.make(m, /*steps=*/5);
    std::vector<double> fill;
    for (int step = 1; step <= 5; ++step) {
      f.batch(step);
      s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
      if (step == 1) fill = s->segment_idle();
    }
    const std::vector<double> flushed = one_f_one_b_idle(f, m);
    if (rank != 0) continue;
    ASSERT_EQ(static_cast<int>(s->steady_idle().size()), p);
    ASSERT_EQ(static_cast<int>(fill.size()), p);
    for (int q = 0; q < p; ++q) {
      std::printf("p=%d m=%d rank %d: 2BW idle in a steady step %g, in the first (fill) %g; "
                  "1F1B idle per step %g, (p-1)(F+B) = %d\n",
                  p, m, q, s->steady_idle()[q], fill[q], flushed[q], 3 * (p - 1));
      EXPECT_EQ(s->steady_idle()[q], 0.0) << "rank " << q << " m=" << m;
      if (q > 0) {
        EXPECT_GT(fill[q], 0.0) << "rank " << q << " waits for the pipe to fill";
      }
      EXPECT_EQ(flushed[q], 3.0 * (p - 1)) << "1F1B rank " << q << " m=" << m;
    }
  }
}

/// Ψ_r counted from the partition's stage (v = 1) and the layout's units, as
/// pipeline_test_util's memory check does: embeddings on stage 0, k blocks, ln_f on the last
/// stage with its copy of wte there.
int64_t psi_of_rank(const PipelineStrategy& s, const GPT& model, int r) {
  const VirtualStage vs = s.partition().stage(r, 0);
  const GPTLayout& layout = model.layout();
  const int L = model.config().layers;
  int64_t psi_r = 0;
  if (vs.first) psi_r += layout.unit_numel(0);
  for (int l = vs.first_block; l < vs.first_block + vs.num_blocks; ++l)
    psi_r += layout.unit_numel(1 + l);
  if (vs.last) {
    psi_r += layout.unit_numel(L + 1);
    if (r != 0) psi_r += layout.find("wte.weight").numel;
  }
  return psi_r;
}

TEST(PipeDream2BW, TwoWeightVersions) {
  Fixture f;
  const int p = pipeline_world().size(), r = pipeline_world().rank();
  MemoryTracker& mem = MemoryTracker::instance();
  const int64_t before = mem.current(MemCategory::kParameters);
  std::unique_ptr<PipeDream2BWStrategy> s = f.make(p, /*steps=*/5);
  const int64_t want = 2 * 4 * psi_of_rank(*s, f.model, r);
  mem.reset_peak();
  for (int step = 1; step <= 5; ++step) {
    f.batch(step);
    s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    EXPECT_EQ(mem.current(MemCategory::kParameters) - before, want) << "rank " << r << " step " << step;
  }
  const int64_t peak = mem.peak(MemCategory::kParameters) - before;
  std::printf("p=%d rank %d: parameters %lld B (peak %lld B) = 2·4Ψ_r = %lld B; "
              "weight_version_bytes %lld\n",
              p, r, static_cast<long long>(mem.current(MemCategory::kParameters) - before),
              static_cast<long long>(peak), static_cast<long long>(want),
              static_cast<long long>(s->weight_version_bytes()));
  EXPECT_LE(peak, want) << "rank " << r;
  EXPECT_EQ(s->weight_version_bytes(), want) << "rank " << r;
}

TEST(PipeDream2BW, BytesPerStep) {
  Fixture f;
  const int p = pipeline_world().size(), r = pipeline_world().rank();
  // Hand-worked, p = 2, m = 2: b = 8, one activation message 4·b·T·C = 4·8·16·32 = 16384 B, the
  // wte all_reduce over {0, 1} 2(N-1)/N·4VC = 4·256·32 = 32768 B. Each segment has 2 forwards
  // and 2 backwards: rank 0 sends 2 send_forwards, rank 1 2 send_backwards. Step 1 applies no
  // update (32768 B), a steady step one (65536 B), the last step the drain and two (98304 B).
  const double hand[3] = {32768, 65536, 98304};
  // Every p and m, counted from the segment's definition (pipedream_2bw.h: segment t =
  // F(t·m+i) B(t·m+i-w), w = p-r-1): a rank sends its forwards unless last, its backwards
  // unless first. Step 1 has m forwards and m-w backwards (batch 0's first), a steady step m
  // of each, the last step also the drain's w backwards; updates 0, 1, 2 (4VC on ranks 0, p-1).
  const int C = f.model.config().d, V = f.model.config().vocab, w = p - r - 1;
  const bool fwd_sends = r < p - 1, bwd_sends = r > 0, emb = r == 0 || r == p - 1;
  for (int m : {p, 2 * p}) {
    const double msg = 4.0 * (f.B / m) * f.T * C, upd = emb ? 4.0 * V * C : 0.0;
    const double sends[3] = {double(fwd_sends * m + bwd_sends * (m - w)),
                             double((fwd_sends + bwd_sends) * m),
                             double((fwd_sends + bwd_sends) * m + bwd_sends * w)};
    const double closed[3] = {sends[0] * msg, sends[1] * msg + upd, sends[2] * msg + 2 * upd};
    std::unique_ptr<PipeDream2BWStrategy> s = f.make(m, /*steps=*/3);
    for (int step = 1; step <= 3; ++step) {
      f.batch(step);
      s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
      const std::vector<ReportRow> rows = s->report();
      const ReportRow& row = report_row(rows, "sent per step");
      std::printf("p=%d m=%d rank %d step %d: sent %.0f B, formula %.0f B (%s)\n", p, m, r,
                  step, row.measured, row.formula, row.formula_text.c_str());
      EXPECT_EQ(row.measured, row.formula) << "rank " << r << " m=" << m << " step " << step;
      EXPECT_EQ(row.measured, closed[step - 1]) << "rank " << r << " m=" << m << " step " << step;
      if (p == 2 && m == 2) {
        EXPECT_EQ(row.measured, hand[step - 1]) << "rank " << r << " step " << step;
      }
    }
  }
}

TEST(PipeDream2BW, EvalUsesNewestVersion) {
  Fixture f;
  const int p = pipeline_world().size();
  testing::DelayedUpdateReference ref(f.model, f.cfg.opt, f.cfg.seed);
  std::unique_ptr<PipeDream2BWStrategy> s = f.make(p, /*steps=*/4);
  for (int step = 1; step <= 4; ++step) {
    f.batch(step);
    ref.train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
    s->train_step(f.tok.data(), f.tgt.data(), f.B, f.T, step);
  }
  sample(f.corpus.val(), f.cfg.seed, 0, 0, f.B, f.T, f.tok.data(), f.tgt.data());
  const double eval = s->eval_loss(f.tok.data(), f.tgt.data(), f.B, f.T);
  const double newest = forward_loss(f.model, ref.newest().data(), f.tok.data(), f.tgt.data(), f.B, f.T);
  const double older = forward_loss(f.model, ref.older().data(), f.tok.data(), f.tgt.data(), f.B, f.T);
  if (pipeline_world().rank() == 0)
    std::printf("p=%d: eval %.7f, reference W(4) %.7f, W(3) %.7f\n", p, eval, newest, older);
  EXPECT_LE(rel(eval, newest), 1e-5);
}

}  // namespace
}  // namespace llmp
