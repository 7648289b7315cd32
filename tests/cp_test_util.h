// What every long-sequence (context-parallel) stage's test checks, written once: the stage
// against the single-rank baseline, every report row against its closed form, and the state
// round trip (stages/ulysses, stages/ring_attention, stages/ring_self_attention; each passes
// its AttentionCore). Collective over test_world(): p = its size.
//
// Glossary: p ranks, B global batch, T sequence length, H heads.
#pragma once

#include "common/cp/cp_strategy.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {

/// ContextParallelStrategy over test_world() with its core from `make`, in `mp`'s precision.
StrategyFactory context_parallel_on_world(CoreFactory make, MixedPrecisionConfig mp = {});

/// The tiny preset with H = 4 heads (hs = 8: Ulysses at p = 4 needs p | H) and ctx = T.
GPTConfig cp_model(int T = 16);

/// Trains 10 steps of the stage and of the baseline on the same global batches (B = 12) of the
/// tiny preset with H = 4 and ctx = T, non-default lr and weight decay; expects every loss and
/// every parameter within 1e-5 relative of the baseline's.
void expect_cp_matches_baseline(const CoreFactory& make, int T);

/// Two steps of cp_model(T) at global batch B; every report row measured == its closed form,
/// and the rows the stage must have are there. Returns the rows for stage-specific checks.
std::vector<ReportRow> expect_cp_report_rows_match(const CoreFactory& make, int T, int B);

/// get_state of a trained strategy into a fresh one (another seed): the same state back, and the
/// same loss on the next step.
void expect_cp_state_round_trip(const CoreFactory& make);

/// --recompute full (every 1, 2 and 3 blocks) against none, in `precision`: three steps of
/// cp_model(16) with L = 4 blocks (B = 6) from the same seed on the same batches, every loss and
/// the final state (master weights or parameters, m, v) bit for bit the same; the recomputed
/// run's report rows each equal to their closed form (its core's forward communication run
/// again, the recomputed FLOPs, the kept checkpoints), L block forwards recomputed per step,
/// fewer activation bytes kept per block and no higher a score peak than without.
void expect_cp_full_recomputation_bit_identical(const CoreFactory& make,
                                                TrainPrecision precision = TrainPrecision::kFP32);

// ---- Mixed precision (--precision bf16 / fp16; cp_strategy.h) ----

/// 10 steps of the stage and of the baseline in `precision` (B = 12, T = 16, H = 4, the default
/// lr 1e-3; fp16 with eps 1e-6): losses within 1e-4 relative, the fp32 master weights
/// within 1e-2 (bf16) or 2e-3 (fp16) of the baseline's (cp_test_util.cc says why). Returns the
/// comparison for stage-specific checks.
EquivalenceResult expect_cp_matches_baseline_in(const CoreFactory& make, TrainPrecision precision);

/// Two bf16 steps of cp_model(T) at global batch B: the replicas' model states 2Ψ + 2Ψ + 12Ψ to
/// the byte, the gradient all_reduce 2(p-1)/p·2Ψ, every report row measured == its closed form.
/// Returns the rows.
std::vector<ReportRow> expect_cp_bf16_report_rows_match(const CoreFactory& make, int T, int B);

/// fp16's skip agreed over the group: an overflow injected on the last rank only at step 2 is
/// skipped by every rank, the state bit-identical, and step 3 trains (stage_test_util.h).
void expect_cp_fp16_overflow_skipped_by_every_rank(const CoreFactory& make);

/// Three steps of cp_model(16) (B = 6) in `precision` with core `a` and with core `b`, from the
/// same seed on the same batches: every loss and the final state (master weights, m, v) bit for
/// bit the same.
void expect_cp_runs_bit_identical(const CoreFactory& a, const CoreFactory& b,
                                  TrainPrecision precision);

}  // namespace llmp
