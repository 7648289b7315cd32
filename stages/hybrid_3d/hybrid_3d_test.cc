// The hybrid_3d stage on 8 ranks, dp 2 × pp 2 × tp 2, the tiny model: against the single-rank
// baseline (plain, and with sequence parallelism and interleaving), every report row against
// numbers worked by hand here (not by the closed forms' code), and the state round trip through
// the whole model's GPT-2 names.
//
// tiny: V = 256, ctx = T = 16, L = 2, C = 32, H = 2. Glossary as hybrid_3d.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "stages/hybrid_3d/hybrid_3d_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr GridShape k222{2, 2, 2};

/// Trains `steps` steps of B sequences (this rank's slice of each global batch).
void train(HybridStrategy& s, int B, int steps, uint64_t seed) {
  const int T = 16;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  const BatchSlice sl = s.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  for (int k = 1; k <= steps; ++k) {
    sample(corpus.train(), seed, k, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    s.train_step(tok.data(), tgt.data(), B, T, k);
  }
}

TEST(Hybrid3D, MatchesBaselineAt222) {
  HybridOptions o;
  o.micro_batches = 3;  // B/dp = 6 sequences in 3 micro-batches of 2
  expect_equivalent(run_against_baseline(hybrid_factory(k222, o), test_world(),
                                         non_default_hyperparameters(hybrid_equivalence_config())),
                    1e-5);
}

TEST(Hybrid3D, MatchesBaselineWithSequenceParallelismAndInterleaving) {
  HybridOptions o;
  o.micro_batches = 2, o.chunks = 2, o.sequence_parallel = true;  // L = 4 = p·v blocks
  expect_equivalent(
      run_against_baseline(hybrid_factory(k222, o), test_world(), hybrid_equivalence_config(4)),
      1e-5);
}

TEST(Hybrid3D, ReportRowsEqualTheirValuesWorkedByHand) {
  HybridOptions o;
  o.micro_batches = 3;
  HybridStrategy s(GPTConfig::preset("tiny"), hybrid_test_grid(k222), AdamWConfig{}, 7, o);
  train(s, /*B=*/12, /*steps=*/2, 3);
  const HybridMeasured m = s.last_measured();
  const bool first = s.grid().pp_rank() == 0;
  // Ψ_r by hand. Unit 0 on a tp rank: wte's V/t rows 256·32/2 = 4096 + wpe 16·32 = 512 → 4608.
  // A block: c_attn 32·96/2 + 96/2, attn.c_proj 16·32 + 32, c_fc 32·128/2 + 128/2, mlp.c_proj
  // 64·32 + 32, two LayerNorms 4·32: 1536+48 + 512+32 + 2048+64 + 2048+32 + 128 = 6448.
  // Stage 0: unit 0 + block 0 = 11056. Stage 1: block 1 + ln_f 64 + the wte copy 4096 = 10608.
  const double psi_r = first ? 11056 : 10608;
  EXPECT_EQ(m.params, 4 * psi_r);
  EXPECT_EQ(m.grads, 4 * psi_r);
  EXPECT_EQ(m.optimizer, 8 * (psi_r / 2)) << "ZeRO-1: m and v for half of Ψ_r (Ψ_r even)";
  // One activation (b, T, C) = (2, 16, 32) floats = 4096 bytes, A below.
  // tp, per micro-batch: 4 all_reduces per block + the embedding's g (stage 0) or the head's f
  // (stage 1), each 2(t-1)/t·A = A; stage 1 also the cross-entropy's max and two sums over the
  // 2·16 positions: 2(t-1)/t·4·3·32 = 384 bytes. Three micro-batches.
  const double A = 4096;
  EXPECT_EQ(m.tp, 3 * (5 * A + (first ? 0 : 384)));
  EXPECT_EQ(m.regather, 0);
  EXPECT_EQ(m.repl_grads, 0);
  // pp: one send per micro-batch (forward from stage 0, backward from stage 1).
  EXPECT_EQ(m.pp, 3 * A);
  // The wte pair: all_reduce of the V/t·C = 4096 floats over 2 ranks, 2·(1/2)·16384 bytes.
  EXPECT_EQ(m.emb, 16384);
  // dp, ZeRO-1: reduce_scatter + all_gather of Ψ_r floats over 2 ranks: 2·(1/2)·4Ψ_r.
  EXPECT_EQ(m.dp, 4 * psi_r);
  // Activations one (micro-batch, chunk) keeps: per token of the block, x, ln_1, res1, ln_2
  // (C each) + qkv 3C/t, atty C/t, fc and GELU(fc) 4C/t each + 4 statistics + probabilities
  // H/t·T: 128 + 48 + 16 + 128 + 4 + 16 = 340 floats; 2·16 tokens: 43520 bytes.
  EXPECT_EQ(m.activations_per_microbatch, 43520);
  for (const ReportRow& r : s.report())
    EXPECT_EQ(r.measured, r.formula) << r.what << " (" << r.formula_text << ")";
}

TEST(Hybrid3D, SequenceParallelRowsEqualTheirValuesWorkedByHand) {
  HybridOptions o;
  o.micro_batches = 3, o.sequence_parallel = true;
  HybridStrategy s(GPTConfig::preset("tiny"), hybrid_test_grid(k222), AdamWConfig{}, 7, o);
  train(s, 12, 2, 3);
  const HybridMeasured m = s.last_measured();
  const bool first = s.grid().pp_rank() == 0;
  const double A = 4096;
  // tp: the same bytes (each all_reduce becomes reduce_scatter + all_gather, (t-1)/t·A each).
  EXPECT_EQ(m.tp, 3 * (5 * A + (first ? 0 : 384)));
  // Re-gather of ln_1 and ln_2 per block and micro-batch: 2·(1/2)·A.
  EXPECT_EQ(m.regather, 3 * A);
  // Replicated gradients all-reduced over tp: per block 6C = 192 (two LayerNorms, two c_proj
  // biases), + wpe 512 on stage 0, + ln_f 64 on stage 1; 2(t-1)/t·4 bytes each.
  EXPECT_EQ(m.repl_grads, 4.0 * (first ? 192 + 512 : 192 + 64));
  // pp: the boundary tensor is this rank's T/t positions, (2, 8, 32) floats.
  EXPECT_EQ(m.pp, 3 * A / 2);
  // Activations: x, ln_1, res1, ln_2 and the four statistics are split by t too, so every
  // tensor is: (4C + 4 + 12C + H·T)/t = (128 + 4 + 384 + 32)/2 = 274 floats per token, 32 tokens.
  EXPECT_EQ(m.activations_per_microbatch, 274 * 32 * 4);
  for (const ReportRow& r : s.report())
    EXPECT_EQ(r.measured, r.formula) << r.what << " (" << r.formula_text << ")";
}

TEST(Hybrid3D, StateRoundTripsThroughTheWholeModelsNames) {
  HybridOptions o;
  o.micro_batches = 3;
  const GPTConfig c = GPTConfig::preset("tiny");
  const int64_t psi = GPTLayout(c).num_params();
  HybridStrategy a(c, hybrid_test_grid(k222), AdamWConfig{}, 7, o);
  train(a, 12, 2, 3);
  std::vector<float> p(psi), m(psi), v(psi);
  a.get_state(p.data(), m.data(), v.data());
  HybridStrategy b(c, hybrid_test_grid(k222), AdamWConfig{}, 99, o);  // another initialisation
  b.set_state(p.data(), m.data(), v.data());
  std::vector<float> p2(psi), m2(psi), v2(psi);
  b.get_state(p2.data(), m2.data(), v2.data());
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  // The full state is the baseline's format: a one-rank GPT evaluates it to the same loss.
  GPT whole(c);
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", 16);
  std::vector<int32_t> tok(12 * 16), tgt(12 * 16);
  sample(corpus.val(), 5, 1, 0, 12, 16, tok.data(), tgt.data());
  const double base = forward_loss(whole, p.data(), tok.data(), tgt.data(), 12, 16);
  const BatchSlice sl = b.batch_slice(12);
  const double mine = b.eval_loss(tok.data() + sl.first_seq * 16, tgt.data() + sl.first_seq * 16,
                                  12, 16);
  EXPECT_NEAR(mine, base, 1e-5 * base);
}

}  // namespace
}  // namespace llmp
