// The shared checks of the long-sequence stages (cp_test_util.h).
#include "tests/cp_test_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/train/report.h"

namespace llmp {

StrategyFactory context_parallel_on_world(CoreFactory make, MixedPrecisionConfig mp) {
  return
      [make, mp](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
        return std::make_unique<ContextParallelStrategy>(model, test_world(), make, opt, seed, mp);
      };
}

GPTConfig cp_model(int T) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  c.ctx = T;
  return c;
}

void expect_cp_matches_baseline(const CoreFactory& make, int T) {
  EquivalenceConfig cfg = non_default_hyperparameters();
  cfg.heads = 4;
  cfg.ctx = T;
  cfg.T = T;
  expect_equivalent(run_against_baseline(context_parallel_on_world(make), test_world(), cfg),
                    /*max_rel=*/1e-5);
}

std::vector<ReportRow> expect_cp_report_rows_match(const CoreFactory& make, int T, int B) {
  const OneStepMeasurement m =
      measure_one_step(context_parallel_on_world(make), cp_model(T), B, /*seed=*/7, /*steps=*/2);
  EXPECT_EQ(m.params, 4 * m.psi) << "replicated parameters";
  EXPECT_EQ(m.optimizer, 8 * m.psi);
  for (const char* what : {"gradient all_reduce/step", "peak attention scores",
                           "activations kept per block", "attention fwd FLOPs/step"})
    EXPECT_NO_THROW(report_row(m.rows, what)) << what;
  bool attention_row = false;
  for (const ReportRow& r : m.rows) {
    EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                  << r.formula << " (" << r.formula_text << ")";
    if (r.what == "attention sent/step") attention_row = true;
  }
  EXPECT_TRUE(attention_row) << "no 'attention sent/step' row";
  return m.rows;
}

void expect_cp_state_round_trip(const CoreFactory& make) {
  const GPT model(cp_model(16));
  const int64_t psi = model.layout().num_params();
  const int B = 6, T = 16;
  ContextParallelStrategy a(model, test_world(), make, AdamWConfig{}, 11);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int s = 1; s <= 3; ++s) {
    sample(corpus.train(), 5, s, 0, B, T, tok.data(), tgt.data());
    a.train_step(tok.data(), tgt.data(), B, T, s);
  }
  std::vector<float> p(psi), m(psi), v(psi), p2(psi), m2(psi), v2(psi);
  a.get_state(p.data(), m.data(), v.data());
  ContextParallelStrategy b(model, test_world(), make, AdamWConfig{}, 999);  // another init
  b.set_state(p.data(), m.data(), v.data());
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  sample(corpus.train(), 5, 4, 0, B, T, tok.data(), tgt.data());
  EXPECT_EQ(a.train_step(tok.data(), tgt.data(), B, T, 4),
            b.train_step(tok.data(), tgt.data(), B, T, 4));
}

void expect_cp_full_recomputation_bit_identical(const CoreFactory& make,
                                                TrainPrecision precision) {
  GPTConfig c = cp_model(16);
  c.layers = 4;
  const MixedPrecisionConfig mp = precision_config(precision);
  const int B = 6, T = 16, L = c.layers;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  struct Run {
    std::vector<double> losses;
    std::vector<float> state;
    std::vector<ReportRow> rows;
    int64_t recomputed = 0, calls = 0, calls_formula = 0;
  };
  const auto train = [&](const GPTConfig& config) {
    const GPT model(config, TpComm::none(), storage_dtype(precision));
    const int64_t psi = model.layout().num_params();
    ContextParallelStrategy s(model, test_world(), make, AdamWConfig{}, 11, mp);
    std::vector<int32_t> tok(B * T), tgt(B * T);
    Run r;
    for (int step = 1; step <= 3; ++step) {
      sample(corpus.train(), 5, step, 0, B, T, tok.data(), tgt.data());
      r.losses.push_back(s.train_step(tok.data(), tgt.data(), B, T, step));
    }
    r.state.resize(3 * psi);
    s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
    r.rows = s.report();
    r.recomputed = s.last_recomputed_blocks();
    r.calls = s.last_attention_calls();
    const bool full = config.recompute == Recompute::kFull;
    r.calls_formula = L * (s.core().calls_per_block() +
                           (full ? s.core().forward_calls_per_block() : 0));
    return r;
  };
  const Run none = train(c);
  EXPECT_EQ(none.recomputed, 0);
  EXPECT_EQ(none.calls, none.calls_formula) << "the core's sends and collectives in a step";
  {  // Selective recomputation would drop nothing a core keeps: refused, not ignored.
    GPTConfig cs = c;
    cs.recompute = Recompute::kSelective;
    const GPT model(cs, TpComm::none(), storage_dtype(precision));
    EXPECT_THROW(ContextParallelStrategy(model, test_world(), make, AdamWConfig{}, 11, mp),
                 std::invalid_argument);
  }
  for (int k : {1, 2, 3}) {
    SCOPED_TRACE("--recompute full --recompute_every " + std::to_string(k));
    GPTConfig cf = c;
    cf.recompute = Recompute::kFull;
    cf.recompute_every = k;
    const Run full = train(cf);
    EXPECT_EQ(full.losses, none.losses) << "recomputation changed a loss";
    EXPECT_TRUE(full.state == none.state) << "recomputation changed the state";
    EXPECT_EQ(full.recomputed, L) << "block forwards run again in one step";
    EXPECT_EQ(full.calls, full.calls_formula) << "L·(calls + the forward's again)";
    for (const ReportRow& r : full.rows)
      EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                    << r.formula << " (" << r.formula_text << ")";
    EXPECT_GT(report_row(full.rows, "recomputed forward FLOPs per step").measured, 0);
    if (test_world().size() > 1) {  // p = 1 sends nothing either way
      EXPECT_GT(report_row(full.rows, "attention sent/step").measured,
                report_row(none.rows, "attention sent/step").measured)
          << "the recomputed forwards' communication";
    }
    const std::string kept = "activations kept per block (full" +
                             (k > 1 ? ", every " + std::to_string(k) : std::string()) + ")";
    EXPECT_LT(report_row(full.rows, kept).measured,
              report_row(none.rows, "activations kept per block").measured);
    EXPECT_LE(report_row(full.rows, "peak attention scores").measured,
              report_row(none.rows, "peak attention scores").measured);
  }
}

// ---- Mixed precision ----
//
// The bounds are naive DP's (stages/naive_dp/naive_dp_test.cc derives them): context parallelism
// is a replica per rank whose gradients are summed by a 16-bit all_reduce, and it differs from
// the 16-bit baseline the same ways: each rank rounds its own partial gradient (the baseline
// rounds the whole batch's once) and the all_reduce rounds at every pairwise addition; the core
// adds its own (Ulysses: none, it runs the baseline's kernel on the same 16-bit values, per head
// group; the ring cores: fp32 math inside, so out and dqkv are rounded from a differently ordered
// fp32 sum). Measured at p = 1, 2, 4 (T = 16, 10 steps): losses ≤ 1.5e-5; master weights in bf16
// ≤ 8.7e-3 (ring attention at p = 1; Ulysses ≤ 6.5e-3, and 0 at p = 1: the baseline's very
// arithmetic), every time on c_attn.bias's key part (the noise elements, naive_dp_test.cc); in
// fp16 ≤ 8.1e-4 (ring self-attention at p = 2, on wte).
namespace {
constexpr double kLossBound = 1e-4, kBf16ParamBound = 1e-2, kFp16ParamBound = 2e-3;
}  // namespace

EquivalenceResult expect_cp_matches_baseline_in(const CoreFactory& make,
                                                TrainPrecision precision) {
  // The default lr 1e-3 (naive DP's bounds assume it: the noise elements' drift is 2·lr·steps).
  EquivalenceConfig cfg;
  cfg.heads = 4;
  cfg.ctx = cfg.T = 16;
  cfg.mp = precision_config(precision);
  // fp16: eps near the small gradients, so that a stage stepping on S·g (never unscaled) would
  // move them by ~lr, far above the bound (naive_dp_test.cc).
  if (precision == TrainPrecision::kFP16) cfg.opt.eps = 1e-6f;
  const EquivalenceResult r =
      run_against_baseline(context_parallel_on_world(make, cfg.mp), test_world(), cfg);
  EXPECT_LE(r.max_loss_rel, kLossBound) << "losses";
  EXPECT_LE(r.max_param_rel,
            precision == TrainPrecision::kBF16 ? kBf16ParamBound : kFp16ParamBound)
      << "master weights (largest |diff| in " << r.worst_param << ")";
  return r;
}

std::vector<ReportRow> expect_cp_bf16_report_rows_match(const CoreFactory& make, int T, int B) {
  const OneStepMeasurement m =
      measure_one_step(context_parallel_on_world(make, precision_config(TrainPrecision::kBF16)),
                       cp_model(T), B, /*seed=*/7, /*steps=*/2, {}, DType::kBF16);
  EXPECT_EQ(m.params, 2 * m.psi) << "16-bit replica of the parameters";
  EXPECT_EQ(m.grads, 2 * m.psi) << "16-bit gradients";
  EXPECT_EQ(m.optimizer, 12 * m.psi) << "fp32 master copy, m and v";
  const int p = test_world().size();
  const ReportRow& ar = report_row(m.rows, "gradient all_reduce/step");
  EXPECT_EQ(ar.measured, 2.0 * (p - 1) / p * 2.0 * m.psi) << "not 2 bytes per gradient element";
  for (const ReportRow& r : m.rows)
    EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                  << r.formula << " (" << r.formula_text << ")";
  return m.rows;
}

void expect_cp_fp16_overflow_skipped_by_every_rank(const CoreFactory& make) {
  const GPTConfig config = cp_model(16);
  expect_injected_overflow_skipped_by_every_rank(
      [make](const GPT& model) -> std::unique_ptr<MixedPrecisionStrategy> {
        return std::make_unique<ContextParallelStrategy>(
            model, test_world(), make, AdamWConfig{}, /*seed=*/7,
            precision_config(TrainPrecision::kFP16));
      },
      [](const MixedPrecisionStrategy& s) -> const Tensor& {
        return static_cast<const ContextParallelStrategy&>(s).params_tensor();
      },
      config);
}

void expect_cp_runs_bit_identical(const CoreFactory& a, const CoreFactory& b,
                                  TrainPrecision precision) {
  const GPT model(cp_model(16), TpComm::none(), storage_dtype(precision));
  const int64_t psi = model.layout().num_params();
  const int B = 6, T = 16;
  const MixedPrecisionConfig mp = precision_config(precision);
  ContextParallelStrategy sa(model, test_world(), a, AdamWConfig{}, 11, mp);
  ContextParallelStrategy sb(model, test_world(), b, AdamWConfig{}, 11, mp);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int s = 1; s <= 3; ++s) {
    sample(corpus.train(), 5, s, 0, B, T, tok.data(), tgt.data());
    EXPECT_EQ(sa.train_step(tok.data(), tgt.data(), B, T, s),
              sb.train_step(tok.data(), tgt.data(), B, T, s))
        << "step " << s;
  }
  std::vector<float> pa(psi), ma(psi), va(psi), pb(psi), mb(psi), vb(psi);
  sa.get_state(pa.data(), ma.data(), va.data());
  sb.get_state(pb.data(), mb.data(), vb.data());
  EXPECT_TRUE(pa == pb && ma == mb && va == vb) << "the master weights, m or v differ";
}

}  // namespace llmp
