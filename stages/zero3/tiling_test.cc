// ZeRO-3 with memory-centric tiling (--tile_factor k; tile_gatherer.h) against ZeRO-3 without
// (k = 1): bit-identical parameters and optimizer state after three steps, the peak of gathered
// parameters and of the largest weight tile against the closed forms of zero3.h (falling by k),
// the bytes sent per step unchanged, and the gathers it takes. Run on 1, 2, 3 and 4 ranks.
//
// Glossary: N ranks, Ψ parameters, S = ⌈Ψ/N⌉, L layers, C channels, k tile factor, n_u elements
// of unit u (n_0 embeddings, n_b a block, n_f the final LayerNorm), r = 13C a block's rest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/nn/tiled_linear.h"
#include "stages/zero3/zero3.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

bool rank0() { return test_world().rank() == 0; }

struct Tiled : OneStepMeasurement {
  int64_t peak_params = 0, peak_tile = 0;  // bytes: kParameters peak less the shard; tiles
  int tile_gathers = 0;
  std::vector<int> gathers;                 // per unit (a tiled block: its rest)
  std::vector<float> params, m, v;          // after the steps, gathered from the shards
  double eval = 0;                          // eval_loss of batch 3 after the steps
};

// `steps` steps of ZeRO-3 at tile factor k on `mc` (global batch 12, seed 7).
Tiled run(int k, int steps, GPTConfig mc = GPTConfig::preset("tiny"),
          MixedPrecisionConfig mp = {}) {
  Tiled r;
  const StrategyFactory make = [k, mp](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<Zero3Strategy>(model, test_world(), opt, seed, mp, 0, k);
  };
  static_cast<OneStepMeasurement&>(r) = measure_one_step(
      make, mc, /*global_batch=*/12, /*seed=*/7, steps, [&r](Strategy& s, const GPT& model) {
        auto& z = dynamic_cast<Zero3Strategy&>(s);
        r.peak_params = z.last_step_peak_params() - z.param_shard().nbytes();
        r.peak_tile = z.last_step_peak_tile_bytes();
        r.tile_gathers = z.last_step_tile_gathers();
        for (int u = 0; u < model.layout().num_units(); ++u)
          r.gathers.push_back(z.last_step_gathers(u));
        const int64_t psi = model.layout().num_params();
        r.params.resize(psi), r.m.resize(psi), r.v.resize(psi);
        z.get_state(r.params.data(), r.m.data(), r.v.data());
        // Evaluation through the tiles (a forward-only walk) of a fixed batch.
        const int B = 12, T = model.config().ctx;
        const BatchSlice sl = z.batch_slice(B);
        std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
        for (int i = 0; i < sl.num_seqs * T; ++i) tok[i] = (i * 7 + 3) % 256, tgt[i] = (i * 5) % 256;
        r.eval = z.eval_loss(tok.data(), tgt.data(), B, T);
      },
      storage_dtype(mp.precision));
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Forward by column tiles, backward by row tiles, each in its GEMM panel window
// (common/nn/tiled_linear.h): every sum whole and every row through the same kernel, so the
// parameters, m and v after three steps are the same bits, and so is an evaluation loss.
TEST(Zero3Tiling, BitIdenticalToWholeUnitsAfterThreeSteps) {
  const Tiled whole = run(1, 3);
  for (int k : {2, 4}) {
    const Tiled tiled = run(k, 3);
    EXPECT_TRUE(same_bits(tiled.params, whole.params)) << "parameters, k=" << k;
    EXPECT_TRUE(same_bits(tiled.m, whole.m)) << "exp_avg, k=" << k;
    EXPECT_TRUE(same_bits(tiled.v, whole.v)) << "exp_avg_sq, k=" << k;
    EXPECT_EQ(std::memcmp(&tiled.eval, &whole.eval, sizeof(double)), 0) << "eval loss, k=" << k;
    if (rank0())
      std::printf("N=%d k=%d: parameters, m, v after 3 steps %s those of k=1; eval loss %.9g\n",
                  test_world().size(), k,
                  same_bits(tiled.params, whole.params) ? "bit-identical to" : "DIFFER from",
                  tiled.eval);
  }
}

// The peak of gathered parameters (MemoryTracker, kParameters less the shard) and of the tiles
// alive at once (TileGatherer's count), against zero3.h's closed forms. tiny: C = 32, n_b =
// 12,704, n_0 + n_f = 8,768, r = 416, the largest linear (c_fc, mlp.c_proj) 4C² = 4,096.
TEST(Zero3Tiling, PeakGatheredParametersFallByK) {
  const GPTLayout lay(GPTConfig::preset("tiny"));
  const int N = test_world().size(), L = lay.num_units() - 2;
  const int64_t C = 32, n0f = lay.unit_numel(0) + lay.unit_numel(L + 1), nb = lay.unit_numel(1);
  const int64_t r = 13 * C, S = shard_size(lay.num_params(), N);
  ASSERT_EQ(block_rest_numel(lay.block_shape()), r);
  std::vector<int64_t> tile_peaks;
  for (int k : {1, 2, 4}) {
    const Tiled t = run(k, 2);
    const ReportRow& peak = report_row(t.rows, "parameters, peak in step");
    if (k == 1) {  // whole units: the block computing + the next step's units
      EXPECT_EQ(t.peak_params, 4 * (nb + std::max(n0f, nb)));
      EXPECT_EQ(t.peak_tile, 0);
    } else {  // the rest + one tile + the next step's pieces
      const int64_t tile = 4 * C * C / k;
      EXPECT_EQ(t.peak_params, 4 * (r + tile + std::max(r, n0f))) << "k=" << k;
      EXPECT_EQ(t.peak_tile, 4 * tile) << "one tile of c_fc or mlp.c_proj alive at a time";
      const ReportRow& row = report_row(t.rows, "largest weight tile, peak");
      EXPECT_EQ(row.measured, t.peak_tile);
      EXPECT_EQ(row.formula, 4.0 * tile);
      EXPECT_EQ(zero3_largest_tile_bytes(lay, k), 4.0 * tile);
      tile_peaks.push_back(t.peak_tile);
    }
    EXPECT_EQ(peak.measured, peak.formula) << "k=" << k;
    EXPECT_EQ(peak.formula - 4.0 * S, static_cast<double>(t.peak_params)) << "k=" << k;
    if (rank0())
      std::printf("N=%d k=%d: peak gathered parameters %lld B (formula %.0f less 4S), largest "
                  "weight tile %lld B\n",
                  N, k, (long long)t.peak_params, peak.formula - 4.0 * S,
                  (long long)t.peak_tile);
  }
  // The largest linear's gathered weights: 4·4C² whole (k = 1, inside the unit), then /2, /4.
  ASSERT_EQ(tile_peaks.size(), 2u);
  EXPECT_EQ(tile_peaks[0] * 2, 4 * 4 * C * C);
  EXPECT_EQ(tile_peaks[1] * 4, 4 * 4 * C * C);
}

// The tiles of a pass partition the weights, and rest + weights the unit: the same elements are
// all-gathered, so the same bytes; more collectives (the tiles, 2 passes × 4 linears × k per
// block); the rest of a block gathered twice, like the whole unit before.
TEST(Zero3Tiling, BytesSentPerStepUnchanged) {
  const Tiled whole = run(1, 2);
  const double sent1 = report_row(whole.rows, "sent per step").measured;
  for (int k : {2, 4}) {
    const Tiled t = run(k, 2);
    const double sent = report_row(t.rows, "sent per step").measured;
    EXPECT_NEAR(sent, sent1, 1e-9 * std::max(1.0, sent1)) << "k=" << k;
    EXPECT_EQ(t.gathers, whole.gathers) << "k=" << k;
    const int L = static_cast<int>(t.gathers.size()) - 2;
    EXPECT_EQ(t.tile_gathers, L * 2 * kBlockLinears * k) << "k=" << k;
    if (rank0())
      std::printf("N=%d k=%d: sent %.0f B per step (k=1: %.0f), %d tile all-gathers\n",
                  test_world().size(), k, sent, sent1, t.tile_gathers);
  }
}

// bf16: 16-bit pieces gathered at 2 bytes per element and widened; still bit-identical.
TEST(Zero3Tiling, BitIdenticalInBf16) {
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  const Tiled whole = run(1, 3, GPTConfig::preset("tiny"), mp);
  const Tiled tiled = run(4, 3, GPTConfig::preset("tiny"), mp);
  EXPECT_TRUE(same_bits(tiled.params, whole.params));
  EXPECT_TRUE(same_bits(tiled.m, whole.m));
  EXPECT_EQ(tiled.peak_tile, 2 * 4 * 32 * 32 / 4) << "2 bytes per element";
}

}  // namespace
}  // namespace llmp
