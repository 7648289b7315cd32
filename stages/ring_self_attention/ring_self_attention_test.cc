// Ring self-attention (common/cp/ring_self_attention.h) in the shared context-parallel strategy
// against the single-rank baseline, its report rows against the closed forms, and its state
// round trip. Run on 1, 2 and 4 ranks: p = the world size (mpi_test in BUILD).
//
// Glossary: p ranks, B global batch, T sequence length, H heads, L blocks.
#include "common/cp/ring_self_attention.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/cp_test_util.h"

namespace llmp {
namespace {

std::unique_ptr<AttentionCore> rsa(ProcessGroup& g) {
  return std::make_unique<RingSelfAttention>(g);
}

TEST(RingSelfAttention, MatchesBaselineWithNonDefaultHyperparameters) {
  expect_cp_matches_baseline(rsa, 16);
}

TEST(RingSelfAttention, MatchesBaselineOnLongerSequences) { expect_cp_matches_baseline(rsa, 64); }

// Each rank keeps its queries' whole score rows: (L + 1)·4·B·H·T²/p, the baseline's divided by p
// (up to its one (T,T) scratch), and sends 6(p − 1) chunks of B·T/p rows per block.
TEST(RingSelfAttention, ReportRowsMatchTheClosedForms) {
  const int p = test_world().size(), T = 32, B = 6;
  const std::vector<ReportRow> rows = expect_cp_report_rows_match(rsa, T, B);
  const double L = 2, H = 4, A = 32;
  EXPECT_EQ(report_row(rows, "peak attention scores").measured, (L + 1) * 4 * B * H * T * T / p);
  EXPECT_EQ(report_row(rows, "attention sent/step").measured, L * 6 * (p - 1) * 4 * B * T * A / p);
}

TEST(RingSelfAttention, StateRoundTrip) { expect_cp_state_round_trip(rsa); }

// --recompute full: every block's key and value chunks go around again, the result to the bit.
TEST(RingSelfAttention, FullRecomputationIsBitIdentical) {
  expect_cp_full_recomputation_bit_identical(rsa);
  expect_cp_full_recomputation_bit_identical(rsa, TrainPrecision::kBF16);
}

// ---- Mixed precision: 16-bit chunks, fp32 products, accumulators and P ----

TEST(RingSelfAttention, MatchesBaselineInBf16) {
  expect_cp_matches_baseline_in(rsa, TrainPrecision::kBF16);
}

TEST(RingSelfAttention, MatchesBaselineInFp16) {
  expect_cp_matches_baseline_in(rsa, TrainPrecision::kFP16);
}

// In bf16 the chunks travel in 16 bits and their accumulators in fp32: 16(p − 1)·B·Tl·A bytes
// per block against 24(p − 1)·B·Tl·A, two thirds, measured (CommStats); P and dP stay fp32, so
// the score peak is the fp32 run's.
TEST(RingSelfAttention, Bf16ReportRowsMatchAndTheChunksHalve) {
  const int T = 32, B = 6;
  const std::vector<ReportRow> bf16 = expect_cp_bf16_report_rows_match(rsa, T, B);
  const std::vector<ReportRow> fp32 = expect_cp_report_rows_match(rsa, T, B);
  EXPECT_EQ(report_row(bf16, "attention sent/step").measured,
            report_row(fp32, "attention sent/step").measured * 2 / 3);
  EXPECT_EQ(report_row(bf16, "peak attention scores").measured,
            report_row(fp32, "peak attention scores").measured);
}

/// Ring self-attention told it cannot take 16-bit tensors: the strategy runs it in a WidenedCore
/// (common/cp/widened_core.h), fp32 inside, its chunks fp32 on the ring.
struct WidenedRsa : RingSelfAttention {
  using RingSelfAttention::RingSelfAttention;
  bool takes_16bit() const override { return false; }
};

// The 16-bit chunks are exact and the products are fp32 on the same widened values either way:
// the native 16-bit ring is the widened fp32 core, bit for bit, with fewer bytes sent.
TEST(RingSelfAttention, Bf16RingIsTheWidenedFp32CoreBitForBit) {
  expect_cp_runs_bit_identical(
      rsa,
      [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
        return std::make_unique<WidenedRsa>(g);
      },
      TrainPrecision::kBF16);
}

TEST(RingSelfAttention, Fp16InjectedOverflowIsSkippedByEveryRank) {
  expect_cp_fp16_overflow_skipped_by_every_rank(rsa);
}

TEST(RingSelfAttention, RefusesASplitItCannotMake) {
  EXPECT_EQ(RingSelfAttention::split_error(16, 4, 3),
            "ring self-attention: T=16 is not divisible by p=3 (the contiguous split)");
  EXPECT_EQ(RingSelfAttention::split_error(16, 2, 4), "");
}

}  // namespace
}  // namespace llmp
