// Memory-centric tiling (tiled_linear.h) on one rank: tiled linears against untiled ones, bit for
// bit, over many shapes and tile factors; one tile alive at a time; a whole block tiled against
// the untiled block; the layout of a block's rest.
//
// Glossary: N rows, C input features, OC output features, k tiles, mr the GEMM's panel rows.
#include "common/nn/tiled_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/sublayer.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

// Tiles cut from whole weights held in memory (the test double of ZeRO-3's TileGatherer): counts
// the tiles alive at once and the elements each tile handed out.
class MemoryTiles : public WeightTiles {
 public:
  MemoryTiles(int k, const BlockShape& s) : k_(k), s_(s) {}
  void set(BlockLinear w, const float* W) { W_[static_cast<int>(w)] = W; }
  int tile_factor() const override { return k_; }
  const float* columns(BlockLinear w, int i) override {
    int64_t R, OC;
    block_linear_shape(w, s_, &R, &OC);
    const TileRange t = tile_range(OC, k_, i);
    std::vector<float> tile(R * t.size());
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(&tile[r * t.size()], W_[static_cast<int>(w)] + r * OC + t.begin,
                  sizeof(float) * t.size());
    return hand_out(std::move(tile));
  }
  const float* rows(BlockLinear w, int i) override {
    int64_t R, OC;
    block_linear_shape(w, s_, &R, &OC);
    const TileRange t = tile_range(R, k_, i);
    const float* W = W_[static_cast<int>(w)];
    return hand_out(std::vector<float>(W + t.begin * OC, W + t.end * OC));
  }
  void release_tile() override {
    ASSERT_FALSE(live_.empty()) << "release_tile() with no tile alive";
    live_.erase(live_.begin());
  }
  int peak_live = 0;             // tiles alive at once, at most
  int64_t elements_handed = 0;   // Σ tile sizes
  int tiles_handed = 0;

 private:
  const float* hand_out(std::vector<float> tile) {
    elements_handed += static_cast<int64_t>(tile.size());
    ++tiles_handed;
    live_.push_back(std::move(tile));
    peak_live = std::max(peak_live, static_cast<int>(live_.size()));
    return live_.back().data();
  }
  int k_;
  BlockShape s_;
  const float* W_[kBlockLinears] = {};
  std::vector<std::vector<float>> live_;
};

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// One linear as c_fc of a block whose shape makes it (C, OC) (BlockShape with ffn = OC).
int differing(const std::vector<float>& a, const std::vector<float>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

// Every output bit-identical, forward (column tiles) and input gradient (row tiles), for shapes
// whose tiles are and are not whole GEMM panels (mr = 24 with AVX2): C = 32, 35, 96, 128, 256,
// OC = C, 3C, 4C, N = 37..512, k = 2, 3, 4, 8 (uneven tiles when k does not divide).
TEST(TiledLinear, BitIdenticalToTheUntiledLayer) {
  int shapes = 0;
  for (int k : {2, 3, 4, 8})
    for (int N : {37, 64, 96, 512})
      for (int C : {32, 35, 96, 128, 256})
        for (int m : {1, 3, 4}) {
          const int OC = m * C;
          BlockShape s;
          s.C = C;
          s.ffn = OC;
          const std::vector<float> x = randn(size_t(N) * C, 1), W = randn(size_t(C) * OC, 2),
                                   b = randn(OC, 3), dy = randn(size_t(N) * OC, 4);
          std::vector<float> y(size_t(N) * OC), yt(y.size()), dx(size_t(N) * C), dxt(dx.size());
          MemoryTiles tiles(k, s);
          KernelOps& cpu_ops = kernel_ops(Device::kCPU);
          tiles.set(BlockLinear::kFc, W.data());
          linear_forward(cpu_ops, nullptr, BlockLinear::kFc, y.data(), x.data(), W.data(), b.data(),
                         N, C, OC);
          linear_forward(cpu_ops, &tiles, BlockLinear::kFc, yt.data(), x.data(), nullptr, b.data(),
                         N, C, OC);
          linear_backward_input(cpu_ops, nullptr, BlockLinear::kFc, dx.data(), dy.data(), W.data(),
                                N, C, OC);
          linear_backward_input(cpu_ops, &tiles, BlockLinear::kFc, dxt.data(), dy.data(), nullptr,
                                N, C, OC);
          EXPECT_EQ(differing(y, yt), 0)
              << "forward N=" << N << " C=" << C << " OC=" << OC << " k=" << k;
          EXPECT_EQ(differing(dx, dxt), 0)
              << "backward N=" << N << " C=" << C << " OC=" << OC << " k=" << k;
          // Each weight element handed out once per pass; k tiles per pass; one alive at a time.
          EXPECT_EQ(tiles.elements_handed, 2 * int64_t(C) * OC);
          EXPECT_EQ(tiles.tiles_handed, 2 * k);
          EXPECT_EQ(tiles.peak_live, 1) << "a tile was not released before the next";
          ++shapes;
        }
  std::printf("%d shapes (mr = %d): tiled = untiled, bit for bit\n", shapes, matmul_panel_rows());
}

// The reason for panel windows, measured: the same column tiles of 64, each its own GEMM without
// a window, give outputs that differ in their last bits (rows 48..63 of a tile meet a 2-packet
// kernel where the whole product used a 3-packet one). If a future Eigen made this 0, the windows
// could go.
TEST(TiledLinear, TilesWithoutPanelWindowsRoundDifferently) {
  const int N = 64, C = 128, OC = 128, k = 2, w = OC / k;
  const std::vector<float> x = randn(size_t(N) * C, 1), W = randn(size_t(C) * OC, 2);
  std::vector<float> y(size_t(N) * OC), yt(y.size()), tile(size_t(C) * w), ytile(size_t(N) * w);
  cpu::matmul_forward(y.data(), x.data(), W.data(), nullptr, N, C, OC);
  for (int i = 0; i < k; ++i) {
    for (int r = 0; r < C; ++r)
      std::memcpy(&tile[size_t(r) * w], &W[size_t(r) * OC + i * w], sizeof(float) * w);
    cpu::matmul_forward(ytile.data(), x.data(), tile.data(), nullptr, N, C, w);
    for (int n = 0; n < N; ++n)
      std::memcpy(&yt[size_t(n) * OC + i * w], &ytile[size_t(n) * w], sizeof(float) * w);
  }
  const int diff = differing(y, yt);
  std::printf("tiles of %d columns without windows (mr = %d): %d of %d outputs differ\n", w,
              matmul_panel_rows(), diff, N * OC);
  EXPECT_GT(diff, 0);
  EXPECT_EQ(panel_window({0, 64}, OC), (TileRange{0, 72})) << "64 rounded up to panels of 24";
  EXPECT_EQ(panel_window({64, 128}, OC), (TileRange{48, 128})) << "to the end: last panel";
}

TEST(TiledLinear, BlockRestIsThirteenC) {
  const GPT model(GPTConfig::preset("tiny"));
  const BlockShape& s = model.block_shape();
  EXPECT_EQ(block_rest_numel(s), 13 * s.C);
  // The rest plus the four weights is the unit; each weight at its kBlockParams offset.
  int64_t weights = 0;
  for (int w = 0; w < kBlockLinears; ++w) {
    int64_t r, c;
    block_linear_shape(static_cast<BlockLinear>(w), s, &r, &c);
    weights += r * c;
  }
  EXPECT_EQ(weights + block_rest_numel(s), model.layout().unit_numel(1));
  EXPECT_EQ(block_linear_offset(BlockLinear::kFc, s),
            model.layout().find("h.0.mlp.c_fc.weight").offset - model.layout().unit_offset(1));
}

// A whole block (forward, backward) through the tiles, against the untiled block: the same bits.
TEST(TiledLinear, TiledBlockIsBitIdentical) {
  const GPT model(GPTConfig::preset("tiny"));
  const BlockShape& s = model.block_shape();
  const int B = 3, T = 16, C = s.C;
  const int64_t n_u = model.layout().unit_numel(1), off = model.layout().unit_offset(1);
  std::vector<float> all(model.layout().num_params());
  model.init_params(all.data(), 5);
  const float* unit = all.data() + off;
  // The rest, packed, as a tiled ParamSource hands it out.
  std::vector<float> rest;
  for (const TileRange& r : block_rest_ranges(s)) rest.insert(rest.end(), unit + r.begin, unit + r.end);
  for (int k : {1, 2, 4}) {
    MemoryTiles tiles(k, s);
    for (int w = 0; w < kBlockLinears; ++w)
      tiles.set(static_cast<BlockLinear>(w), unit + block_linear_offset(static_cast<BlockLinear>(w), s));
    const GPT tiled = model.with_weight_tiles(&tiles);
    Tensor x = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
    const std::vector<float> xv = randn(x.numel(), 6), dyv = randn(x.numel(), 7);
    std::memcpy(x.f32(), xv.data(), sizeof(float) * xv.size());
    Tensor dy = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
    std::memcpy(dy.f32(), dyv.data(), sizeof(float) * dyv.size());
    BlockCache c1, c2;
    const Tensor y1 = model.block_forward(0, unit, x, B, T, &c1);
    const Tensor y2 = tiled.block_forward(0, rest.data(), x, B, T, &c2);
    std::vector<float> g1(n_u, 0.f), g2(n_u, 0.f);
    const Tensor dx1 = model.block_backward(0, unit, x, &c1, dy, g1.data());
    const Tensor dx2 = tiled.block_backward(0, rest.data(), x, &c2, dy, g2.data());
    EXPECT_EQ(std::memcmp(y1.f32(), y2.f32(), y1.nbytes()), 0) << "k=" << k;
    EXPECT_EQ(std::memcmp(dx1.f32(), dx2.f32(), dx1.nbytes()), 0) << "k=" << k;
    EXPECT_EQ(std::memcmp(g1.data(), g2.data(), sizeof(float) * n_u), 0) << "k=" << k;
    EXPECT_EQ(tiles.tiles_handed, 2 * kBlockLinears * k) << "4 linears, forward and backward";
    EXPECT_EQ(tiles.peak_live, 1);
  }
}

}  // namespace
}  // namespace llmp
