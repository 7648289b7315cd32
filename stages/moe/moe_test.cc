// The mixture-of-experts stage (stages/moe/moe.h: expert parallelism × data parallelism) against
// the single-rank MoE trainer, its routing statistics, its report rows and its state. Run on 1,
// 2 and 4 ranks (mpi_test in BUILD): ep = W everywhere, and ep < W (the expert all_reduce over the
// expert-data-parallel group) where W allows it (W = 2: ep = 1; W = 4: ep = 2 and 1).
//
// The model is moe-tiny (L = 2, C = 32, T = 16, V = 256, block 1 a mixture of E = 4 experts,
// top-2, c = 1) with k, c and n varied (tests/moe_test_util.h). Its parameter counts by hand:
//   dense  Ψ_d = (V+T)·C + (12C²+13C) [block 0] + (4C²+8C+CE) [block 1 but its experts] + 2C
//             = 8704 + 12704 + 4480 + 64 = 25952
//   expert (8C²+5C) = 8192 + 160 = 8352 each, so Ψ = 25952 + 4·8352 = 59360
// and its expert capacity cap = ⌈k·T·c/E⌉ = ⌈2·16·1/4⌉ = 8 slots per expert per sequence.
//
// Glossary: W ranks, ep expert-parallel ranks, D = W/ep, B global batch, G = B/W sequences per
// rank, T sequence length, C channels, E experts, k experts per token, c capacity factor.
#include "stages/moe/moe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/tensor/memory.h"
#include "common/train/report.h"
#include "common/train/single_rank.h"
#include "stages/moe/expert_parallel_comm.h"
#include "tests/equivalence.h"
#include "tests/moe_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr double kMaxRel = 1e-5;  // the bound every stage's equivalence test uses
constexpr double kDense = 25952, kExpert = 8352;  // moe-tiny's Ψ_d and one expert (above)

/// Equivalence at `ep` with tokens dropped, and the routing statistics equal to the baseline's.
void expect_matches_baseline(const GPTConfig& c, int ep, AdamWConfig opt = {}) {
  const MoeEquivalence eq = run_moe_against_baseline(c, ep, /*steps=*/4, /*B=*/8, 1234, opt);
  expect_equivalent(eq.r, kMaxRel);
  EXPECT_GT(eq.routing.dropped, 0) << "the capacity factor should drop tokens in this test";
  expect_same_routing(eq.routing, eq.base_routing);
}

TEST(Moe, TopTwoDropsTokensAndMatchesTheBaselineAtEpEqualW) {
  AdamWConfig opt;
  opt.lr = 3e-3f;            // a stage that ignored --lr would drift from the baseline
  opt.weight_decay = 0.1f;   // ... or --weight_decay
  expect_matches_baseline(moe_tiny(/*k=*/2, /*c=*/1.0, /*every=*/2), test_world().size(), opt);
}

TEST(Moe, TopOneDropsTokensAndMatchesTheBaselineAtEpEqualW) {
  // k = 1, c = 0.75: cap = ⌈16·0.75/4⌉ = 3, 4 experts × 3 slots < 16 tokens: drops in every group.
  expect_matches_baseline(moe_tiny(1, 0.75, 2), test_world().size());
}

TEST(Moe, EveryBlockAMixtureMatchesTheBaseline) {
  expect_matches_baseline(moe_tiny(2, 1.0, /*every=*/1), test_world().size());
}

TEST(Moe, SeveralExpertsPerRankMatchTheBaseline) {
  // E = 8: E/ep = 4 experts per rank at W = 2, 2 at W = 4, so the dispatch buffer's chunks
  // (ep, E/ep, G, cap, C) are neither one expert per rank nor square (E/ep = ep): an expert→rank
  // mix-up in the all_to_all's chunking shows. cap = ⌈2·16·1/8⌉ = 4.
  expect_matches_baseline(moe_tiny(2, 1.0, 2, /*experts=*/8), test_world().size());
}

TEST(Moe, ExpertDataParallelMatchesTheBaselineAtEpBelowW) {
  const int W = test_world().size();
  if (W == 1) GTEST_SKIP() << "ep < W needs two ranks";
  for (int ep : moe_ep_sizes(4)) {
    if (ep == W) continue;
    SCOPED_TRACE("ep " + std::to_string(ep));
    expect_matches_baseline(moe_tiny(2, 1.0, 2), ep);
    expect_matches_baseline(moe_tiny(1, 0.75, 1), ep);
  }
}

TEST(Moe, ReportRowsAreMeasuredAndMatchTheClosedForms) {
  const GPTConfig c = moe_tiny(2, 1.0, 2);
  const int W = test_world().size(), B = 8, T = c.ctx, G = B / W;
  for (int ep : moe_ep_sizes(c.experts)) {
    SCOPED_TRACE("ep " + std::to_string(ep));
    const int D = W / ep, held = c.experts / ep;
    const GPT model(c);
    const MoeStepMeasurement m = measure_moe_steps(model, ep);
    const std::vector<ReportRow>& rows = m.rows;
    for (const ReportRow& r : rows) {
      EXPECT_EQ(r.measured, r.formula) << r.what << " (" << r.formula_text << ")";
      EXPECT_TRUE(report_row_ok(r)) << r.what;
    }
    // Memory: the dense part and this rank's E/ep experts, 4 + 4 + 8 bytes each.
    const double psi_r = kDense + held * kExpert;
    EXPECT_EQ(psi_r, m.layout_params) << "the rank's layout";
    EXPECT_EQ(report_row(rows, "parameters").measured, 4 * psi_r);
    EXPECT_EQ(m.params, 4 * psi_r);
    EXPECT_EQ(report_row(rows, "gradients").measured, 4 * psi_r);
    EXPECT_EQ(m.grads, 4 * psi_r);
    EXPECT_EQ(report_row(rows, "optimizer state").measured, 8 * psi_r);
    EXPECT_EQ(m.optimizer, 8 * psi_r);
    // Dense gradients: all_reduce over all W ranks (the world group's CommStats).
    const ReportRow& dense = report_row(rows, "dense all_reduce/step");
    EXPECT_EQ(dense.measured, m.world_sent);
    EXPECT_EQ(dense.measured, 2.0 * (W - 1) / W * 4 * kDense);
    // Expert gradients: none at ep = W; all_reduce over the D ranks holding the same experts.
    const ReportRow& expert = report_row(rows, "expert all_reduce/step");
    EXPECT_EQ(expert.measured, m.edp_sent);
    EXPECT_EQ(expert.measured, 2.0 * (D - 1) / D * 4 * held * kExpert);
    if (ep == W) {
      EXPECT_EQ(expert.measured, 0) << "ep = W: every expert saw the whole batch";
    } else {
      EXPECT_GT(expert.measured, 0) << "ep < W: the expert all_reduce";
    }
    // all_to_all: 4 per MoE block (dispatch, combine, and both in the backward) of the
    // (E,G,cap,C) f32 buffer, each sending (ep-1)/ep of it.
    const double a2a = 4 * (ep - 1.0) / ep * 4 * 4 * G * 8 * 32;
    EXPECT_EQ(report_row(rows, "all_to_all/step").measured, a2a);
    if (W == 2 && ep == 2) {  // 4 · 1/2 · 4 B · (4·4·8·32 = 4096 floats)
      EXPECT_EQ(report_row(rows, "all_to_all/step").measured, 32768.0);
    }
    // Routing over the global batch: n·k assignments in the one MoE block.
    EXPECT_EQ(m.assignments, int64_t{B} * T * 2);
  }
}

TEST(Moe, AllToAllBytesCountedOnTheExpertParallelGroup) {
  // The MoE layer alone, over an expert-parallel group this test holds (the stage's is private):
  // one forward and backward of this rank's G sequences, its CommStats read directly.
  const GPTConfig c = moe_tiny(2, 1.0, 2);
  const int W = test_world().size(), B = 8, T = c.ctx, G = B / W;
  ProcessGroup& group = moe_grid(W).tp_group();
  ExpertParallelComm comm(group);
  const GPT whole(c);
  const GPT model = whole.with_expert_comm(&comm);
  const int64_t n = model.layout().num_params();
  std::vector<float> params(n), grads(n, 0.0f);
  model.init_params(params.data(), 3);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(G * T), tgt(G * T);
  sample(corpus.train(), 3, 1, G * test_world().rank(), G, T, tok.data(), tgt.data());
  const auto count = [&group] {  // (bytes, calls) of all_to_all on the group so far
    const CommStats& st = group.stats();
    const auto b = st.bytes.find("all_to_all");
    const auto n = st.calls.find("all_to_all");
    return std::pair<double, int64_t>{b == st.bytes.end() ? 0.0 : b->second,
                                      n == st.calls.end() ? 0 : n->second};
  };
  const auto [bytes0, calls0] = count();
  forward_backward(model, params.data(), grads.data(), tok.data(), tgt.data(), G, T,
                   1.0f / (B * T));
  const double sent = count().first - bytes0;
  const int64_t calls = count().second - calls0;
  std::printf("W = ep = %d: all_to_all sent %.0f bytes in %lld calls\n", W, sent,
              static_cast<long long>(calls));
  if (W > 1) {
    EXPECT_EQ(calls, 4) << "dispatch and combine, forward and backward";
  }
  EXPECT_EQ(sent, 4 * (W - 1.0) / W * 4 * 4 * G * 8 * 32);
  if (W == 2) {
    EXPECT_EQ(sent, 32768.0);  // B = 8: G = 4, 4096 floats of 4 bytes, half sent, ×4
  } else if (W == 4) {
    EXPECT_EQ(sent, 24576.0);  // G = 2: 2048 floats, 3/4 sent, ×4
  }
  // The stage's report says the same for the same step shape.
  auto s = make_moe_strategy(whole, W, AdamWConfig{}, 3);
  s->train_step(tok.data(), tgt.data(), B, T, 1);
  EXPECT_EQ(report_row(s->report(), "all_to_all/step").measured, sent);
}

TEST(Moe, StateMatchesTheBaselineAndMovesBetweenEpSizes) {
  const GPTConfig c = moe_tiny(2, 1.0, 2);
  const int W = test_world().size(), E = c.experts;
  const MoeEquivalence eq = run_moe_against_baseline(c, W, /*steps=*/3);
  const int64_t psi = GPT(c).layout().num_params();
  const char* part[] = {"parameters", "exp_avg", "exp_avg_sq"};
  for (int i = 0; i < 3; ++i)
    EXPECT_LE(max_rel_diff(eq.state.data() + i * psi, eq.base_state.data() + i * psi, psi),
              kMaxRel)
        << part[i] << " of get_state at ep = W against the baseline's";
  const float* p = eq.base_state.data();
  for (int ep : moe_ep_sizes(E)) {
    SCOPED_TRACE("ep " + std::to_string(ep));
    const GPT model(c);
    auto s = make_moe_strategy(model, ep, AdamWConfig{}, /*another init*/ 999);
    s->set_state(p, p + psi, p + 2 * psi);
    std::vector<float> back(3 * psi);
    s->get_state(back.data(), back.data() + psi, back.data() + 2 * psi);
    EXPECT_EQ(back, eq.base_state) << "set_state then get_state";
    // Expert e lives on rank e / (E/ep) of the expert-parallel group, and only there.
    const int ep_rank = moe_grid(ep).tp_rank();
    const GPTLayout& lay = s->model().layout();
    const GPTLayout full(c);
    for (int e = 0; e < E; ++e) {
      const std::string name = "h.1.mlp.experts." + std::to_string(e) + ".c_fc.weight";
      if (e / (E / ep) == ep_rank) {
        const ParamSpec& spec = lay.find(name);
        EXPECT_EQ(spec.global_offset, full.find(name).offset) << name;
        EXPECT_EQ(spec.numel, c.d * 4 * c.d) << name;
      } else {
        EXPECT_THROW(lay.find(name), std::out_of_range) << name << " on ep rank " << ep_rank;
      }
    }
    // One more step from the moved state: the baseline's loss from the same state.
    const GPT base_model(c);
    SingleRankStrategy base(base_model, AdamWConfig{}, 5);
    base.set_state(p, p + psi, p + 2 * psi);
    const int B = 8, T = c.ctx;
    const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
    std::vector<int32_t> tok(B * T), tgt(B * T);
    sample(corpus.train(), 1234, 4, 0, B, T, tok.data(), tgt.data());
    const double want = base.train_step(tok.data(), tgt.data(), B, T, 4);
    const BatchSlice sl = s->batch_slice(B);
    const double got = s->train_step(tok.data() + sl.first_seq * T, tgt.data() + sl.first_seq * T,
                                     B, T, 4);
    EXPECT_NEAR(got, want, kMaxRel * want);
  }
}

// --recompute full: each MoE block's forward runs again before its backward, its routing and its
// two all_to_alls with it. The result is the run without, to the bit; the routing statistics
// count each forward once; the report's rows (the all_to_alls at 6 per MoE block, the kept inputs,
// the recomputed FLOPs of dense and MoE blocks) equal their closed forms.
TEST(Moe, FullRecomputationIsBitIdenticalAndRoutesOnce) {
  const int W = test_world().size(), B = 8;
  GPTConfig c = moe_tiny(2, 1.0, 2);
  c.layers = 4;  // blocks 1 and 3 are mixtures
  const int T = c.ctx, G = B / W, ep = W;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  struct Run {
    std::vector<double> losses;
    std::vector<float> state;
    MoeStats routing;
    std::vector<ReportRow> rows;
  };
  const auto train = [&](const GPTConfig& config) {
    const GPT model(config);
    auto s = make_moe_strategy(model, ep, AdamWConfig{}, 5);
    const BatchSlice sl = s->batch_slice(B);
    std::vector<int32_t> tok(G * T), tgt(G * T);
    Run r;
    for (int step = 1; step <= 3; ++step) {
      sample(corpus.train(), 5, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
      r.losses.push_back(s->train_step(tok.data(), tgt.data(), B, T, step));
    }
    const int64_t psi = GPTLayout(config).num_params();
    r.state.resize(3 * psi);
    s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
    r.routing = s->last_routing();
    r.rows = s->report();
    return r;
  };
  const Run none = train(c);
  for (int k : {1, 2}) {
    SCOPED_TRACE("--recompute full --recompute_every " + std::to_string(k));
    GPTConfig cf = c;
    cf.recompute = Recompute::kFull;
    cf.recompute_every = k;
    const Run full = train(cf);
    EXPECT_EQ(full.losses, none.losses);
    EXPECT_TRUE(full.state == none.state) << "recomputation changed the state";
    EXPECT_EQ(full.routing.assignments, none.routing.assignments) << "a recomputed forward counted";
    EXPECT_EQ(full.routing.forwards, none.routing.forwards);
    EXPECT_EQ(full.routing.routed, none.routing.routed);
    EXPECT_EQ(full.routing.dropped, none.routing.dropped);
    EXPECT_EQ(full.routing.aux_sum, none.routing.aux_sum);
    for (const ReportRow& r : full.rows)
      EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                    << r.formula << " (" << r.formula_text << ")";
    EXPECT_GT(report_row(full.rows, "recomputed forward FLOPs per step").measured, 0);
    EXPECT_EQ(report_row(full.rows, "all_to_all/step").measured,
              1.5 * report_row(none.rows, "all_to_all/step").measured)
        << "the dispatch and the return of each recomputed MoE block's forward";
  }
}

}  // namespace
}  // namespace llmp
