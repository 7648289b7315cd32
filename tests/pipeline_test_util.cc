// Test helpers of the pipeline stages (see pipeline_test_util.h).
#include "tests/pipeline_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/testing/max_or_nan.h"
#include "stages/baseline/baseline.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace testing {

ProcessGroup& pipeline_world() {
  static std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

EquivalenceConfig pipeline_equivalence_config(TrainPrecision precision) {
  EquivalenceConfig cfg;
  cfg.layers = 8;
  cfg.global_batch = 16;
  cfg.T = 16;
  cfg.steps = 10;
  cfg.mp.precision = precision;
  return cfg;
}

namespace {
/// The harness's model in the config's precision (16-bit activations under bf16 / fp16).
GPT pipeline_model(const EquivalenceConfig& cfg) {
  return GPT(equivalence_model(cfg), TpComm::none(), storage_dtype(cfg.mp.precision));
}
}  // namespace

EquivalenceResult pipeline_equivalence(const PipelineFactory& make, int m,
                                       TrainPrecision precision) {
  ProcessGroup& pp = pipeline_world();
  if (pp.rank() == 0)
    std::printf("---- p = %d, m = %d: 10 steps against the baseline ----\n", pp.size(), m);
  return run_against_baseline(
      [&](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
        return make(model, pp, opt, seed, m);
      },
      pp, pipeline_equivalence_config(precision));
}

void expect_matches_baseline(const PipelineFactory& make, std::initializer_list<int> ms,
                             double max_rel) {
  for (int m : ms) {
    const EquivalenceResult r = pipeline_equivalence(make, m);
    EXPECT_LE(r.max_loss_rel, max_rel) << "m = " << m;
    EXPECT_LE(r.max_param_rel, max_rel) << "m = " << m << ", worst tensor " << r.worst_param;
  }
}

double state_and_eval_check(const PipelineFactory& make, int m, int steps) {
  const EquivalenceConfig cfg = pipeline_equivalence_config();
  const GPT model(equivalence_model(cfg));
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  const int B = cfg.global_batch, T = cfg.T;
  const int64_t psi = model.layout().num_params();
  std::vector<int32_t> tok(B * T), tgt(B * T);
  std::unique_ptr<PipelineStrategy> a = make(model, pp, cfg.opt, cfg.seed, m);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    a->train_step(tok.data(), tgt.data(), B, T, step);
  }
  std::vector<float> p(psi), mo(psi), v(psi), p2(psi), mo2(psi), v2(psi);
  a->get_state(p.data(), mo.data(), v.data());

  // (1) set_state then get_state on a differently initialised stage.
  std::unique_ptr<PipelineStrategy> b = make(model, pp, cfg.opt, cfg.seed + 99, m);
  b->set_state(p.data(), mo.data(), v.data());
  b->get_state(p2.data(), mo2.data(), v2.data());
  double worst = max_or_nan(max_rel_diff(p2.data(), p.data(), psi),
                            max_or_nan(max_rel_diff(mo2.data(), mo.data(), psi),
                                       max_rel_diff(v2.data(), v.data(), psi)));
  // (2) the next step from the same state.
  sample(corpus.train(), cfg.seed, steps + 1, 0, B, T, tok.data(), tgt.data());
  const double la = a->train_step(tok.data(), tgt.data(), B, T, steps + 1);
  const double lb = b->train_step(tok.data(), tgt.data(), B, T, steps + 1);
  worst = max_or_nan(worst, std::fabs(la - lb) / std::fabs(la));
  // (3) validation loss against the baseline's forward with the same parameters.
  a->get_state(p.data(), mo.data(), v.data());
  sample(corpus.val(), cfg.seed, 0, 0, B, T, tok.data(), tgt.data());
  const double eval = a->eval_loss(tok.data(), tgt.data(), B, T);
  const double ref = forward_loss(model, p.data(), tok.data(), tgt.data(), B, T);
  worst = max_or_nan(worst, std::fabs(eval - ref) / std::fabs(ref));
  if (pp.rank() == 0)
    std::printf("p=%d m=%d: state round trip, next-step losses %.6f / %.6f, eval %.6f vs "
                "baseline forward %.6f: largest relative difference %.2e\n",
                pp.size(), m, la, lb, eval, ref, worst);
  return worst;
}

ProbeResult probe(const PipelineFactory& make, int m, int steps, TrainPrecision precision) {
  const EquivalenceConfig cfg = pipeline_equivalence_config(precision);
  const GPT model = pipeline_model(cfg);
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  std::unique_ptr<PipelineStrategy> s = make(model, pp, cfg.opt, cfg.seed, m);
  const int B = cfg.global_batch, T = cfg.T;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  s->finish();  // rank 0 prints the last step's measured timeline
  ProbeResult r;
  r.sim = s->simulated();
  r.stats = s->last_stats();
  r.measured_bubble = s->measured_bubble_fraction();
  r.executed_bubble = s->executed_bubble_fraction();
  r.executed_makespan = s->executed_makespan();
  r.bytes = s->last_step_bytes();
  r.expected_bytes = s->expected_bytes_per_step(B, T);
  r.expected_stored = s->expected_activation_bytes(B, T);
  r.rank = pp.rank(), r.p = pp.size(), r.m = m, r.v = s->schedule().v;
  return r;
}

ProbeResult expect_executed_bubble(const PipelineFactory& make, const std::string& stage, int m,
                                   double formula, const std::string& formula_text,
                                   double makespan) {
  const ProbeResult r = probe(make, m);
  if (r.rank != 0) return r;  // rank 0 holds the gathered timeline
  std::printf("%s p=%d m=%d v=%d: executed bubble %.4f, formula %s = %.4f; executed makespan %g "
              "units, formula %g (simulator with F = B = 1, B-input = W = 1/2: %.4f; wall "
              "clock %.4f: neither asserted)\n",
              stage.c_str(), r.p, m, r.v, r.executed_bubble, formula_text.c_str(), formula,
              r.executed_makespan, makespan, r.sim.bubble_fraction, r.measured_bubble);
  EXPECT_NEAR(r.executed_bubble, formula, 1e-12) << stage << " p=" << r.p << " m=" << m;
  EXPECT_NEAR(r.executed_makespan, makespan, 1e-12) << stage << " p=" << r.p << " m=" << m;
  return r;
}

void expect_memory_rows_match_partition(const PipelineFactory& make, const std::string& stage,
                                        int m, TrainPrecision precision) {
  const EquivalenceConfig cfg = pipeline_equivalence_config(precision);
  const GPT model = pipeline_model(cfg);
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  std::unique_ptr<PipelineStrategy> s = make(model, pp, cfg.opt, cfg.seed, m);
  const int B = cfg.global_batch, T = cfg.T;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  sample(corpus.train(), cfg.seed, 1, 0, B, T, tok.data(), tgt.data());
  s->train_step(tok.data(), tgt.data(), B, T, 1);

  // Ψ_r, this rank's share, from what each of its virtual stages computes.
  const GPTPartition& part = s->partition();
  const GPTLayout& layout = model.layout();
  const int r = pp.rank(), L = model.config().layers;
  int64_t psi_r = 0;
  if (s->schedule().pipelines == 2) {
    // Chimera (two pipelines): rank r holds stage r of the down pipeline and stage p-1-r of the
    // up one, k = L/p blocks each; stage 0 carries the embeddings (wte, wpe), stage p-1 the
    // final LayerNorm. Ranks 0 and p-1 hold both ends, so the tied head reads wte from unit 0:
    // no copy. Counted from p and r alone, not from the partition.
    const int p = pp.size(), k = L / p;
    for (int st : {r, p - 1 - r}) {
      if (st == 0) psi_r += layout.unit_numel(0);  // wte, wpe
      for (int l = st * k; l < (st + 1) * k; ++l) psi_r += layout.unit_numel(1 + l);
      if (st == p - 1) psi_r += layout.unit_numel(L + 1);  // ln_f
    }
  }
  for (int c = 0; c < part.v() && s->schedule().pipelines == 1; ++c) {
    const VirtualStage vs = part.stage(r, c);
    if (vs.first) psi_r += layout.unit_numel(0);  // wte, wpe
    for (int l = vs.first_block; l < vs.first_block + vs.num_blocks; ++l)
      psi_r += layout.unit_numel(1 + l);
    if (vs.last) {
      psi_r += layout.unit_numel(L + 1);                     // ln_f
      if (r != 0) psi_r += layout.find("wte.weight").numel;  // the tied head's copy of wte
    }
  }
  // Mixed precision: 16-bit parameters, fp32 gradients, the master copy beside m and v.
  const bool mixed = precision != TrainPrecision::kFP32;
  const std::vector<std::pair<std::string, double>> want = {
      {"parameters", (mixed ? 2.0 : 4.0) * psi_r},
      {"gradients", 4.0 * psi_r},
      {"optimizer state", (mixed ? 12.0 : 8.0) * psi_r}};
  const std::vector<ReportRow> rows = s->report();
  for (const auto& [what, bytes] : want) {
    const ReportRow* row = &report_row(rows, what);  // throws (the test fails) when missing
    std::printf("%s p=%d m=%d rank %d: %-16s measured %10.0f B, formula %10.0f B (%s), "
                "Ψ_r = %lld of Ψ = %lld -> %10.0f B\n",
                stage.c_str(), pp.size(), m, r, what.c_str(), row->measured, row->formula,
                row->formula_text.c_str(), static_cast<long long>(psi_r),
                static_cast<long long>(layout.num_params()), bytes);
    EXPECT_EQ(row->measured, bytes) << stage << " rank " << r << " " << what;
    EXPECT_EQ(row->formula, bytes) << stage << " rank " << r << " " << what;
  }
}

void expect_bytes_match_schedule(const PipelineFactory& make, const std::string& stage, int m) {
  const ProbeResult r = probe(make, m);
  std::printf("%s rank %d sent %.0f bytes in one step, formula %.0f\n", stage.c_str(), r.rank,
              r.bytes, r.expected_bytes);
  EXPECT_DOUBLE_EQ(r.bytes, r.expected_bytes);
}

}  // namespace testing
}  // namespace llmp
