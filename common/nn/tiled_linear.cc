// Tiled linear layers (tiled_linear.h): forward by column tiles, input gradient by row tiles,
// each computed in its GEMM panel window so that every output has the untiled layer's bits.
#include "common/nn/tiled_linear.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/tensor/tensor.h"
#include "kernels/cpu/flops.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

constexpr std::array<int, kBlockLinears> kWeightIndex = {2, 4, 8, 10};

// Scratch of the tiling (windows, output tiles): MemCategory::kOther, freed after each tile.
// Tiles are gathered into host buffers (ZeRO-3's tiled gatherer); a device walk does not tile.
void require_host(const KernelOps& ops, const char* what) {
  if (ops.device() != Device::kCPU)
    throw std::invalid_argument(std::string(what) + ": weight tiles are host memory, and this "
                                "layer runs on " + to_string(ops.device()));
}

Tensor scratch(int64_t rows, int64_t cols) {
  return Tensor::zeros({rows, cols}, DType::kF32, MemCategory::kOther);
}

// dst[:, d0 : d0+w] (row stride ld_dst) = src[:, s0 : s0+w] (row stride ld_src), N rows.
void copy_columns(float* dst, int64_t ld_dst, int64_t d0, const float* src, int64_t ld_src,
                  int64_t s0, int64_t w, int64_t N) {
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(dst + n * ld_dst + d0, src + n * ld_src + s0, sizeof(float) * w);
}

}  // namespace

int block_linear_param(BlockLinear w) { return kWeightIndex.at(static_cast<int>(w)); }

void block_linear_shape(BlockLinear w, const BlockShape& s, int64_t* rows, int64_t* cols) {
  const BlockParamDef& d = kBlockParams[block_linear_param(w)];
  *rows = dim_size(d.rows, s);
  *cols = dim_size(d.cols, s);
}

int64_t block_linear_offset(BlockLinear w, const BlockShape& s) {
  int64_t off = 0;
  for (int i = 0; i < block_linear_param(w); ++i)
    off += dim_size(kBlockParams[i].rows, s) * dim_size(kBlockParams[i].cols, s);
  return off;
}

TileRange tile_range(int64_t D, int k, int i) {
  if (k < 1 || i < 0 || i >= k)
    throw std::out_of_range("tile " + std::to_string(i) + " of " + std::to_string(k) +
                            " does not exist");
  return {i * D / k, (i + 1) * D / k};
}

int matmul_panel_rows() {
  // The GEMM kernel kernels/cpu/matmul.cc runs: Eigen's general block-panel kernel for floats.
  return static_cast<int>(Eigen::internal::gebp_traits<float, float>::mr);
}

TileRange panel_window(TileRange t, int64_t D) {
  const int64_t mr = matmul_panel_rows(), whole = D / mr * mr;  // [0, whole): whole panels
  const int64_t lo = t.begin / mr * mr;
  const int64_t hi = t.end > whole ? D : (t.end + mr - 1) / mr * mr;
  return {lo, hi};
}

void linear_forward(KernelOps& ops, WeightTiles* tiles, BlockLinear w, Act y_stored,
                    ActIn x_stored, const float* W, const float* bias, int N, int C, int OC) {
  if (!tiles) {
    ops.matmul_forward(y_stored, x_stored, W, bias, N, C, OC);  // the untiled layer, unchanged
    return;
  }
  require_host(ops, "linear_forward");
  // fp32 copies of 16-bit activations, as the untiled layer's table makes (cpu_kernel_ops.cc).
  const Fp32Copy xf(x_stored, int64_t{N} * C, Device::kCPU);
  Fp32Copy yf(y_stored, int64_t{N} * OC, Device::kCPU);
  const float* x = xf.get();
  float* y = yf.get();
  const int k = tiles->tile_factor();
  for (int i = 0; i < k; ++i) {
    const TileRange t = tile_range(OC, k, i), win = panel_window(t, OC);
    const int64_t wn = win.size(), off = t.begin - win.begin;
    const float* Wt = tiles->columns(w, i);  // (C, |t|): W[:, t], gathered
    // The window (C, wn): the tile's columns at their place, the other columns zero.
    Tensor Ww, bw;
    const float* Wp = Wt;
    const float* bp = bias ? bias + t.begin : nullptr;
    if (!(win == t)) {
      Ww = scratch(C, wn);
      copy_columns(Ww.f32(), wn, off, Wt, t.size(), 0, t.size(), C);
      Wp = Ww.f32();
      if (bias) {
        bw = scratch(1, wn);
        std::memcpy(bw.f32() + off, bias + t.begin, sizeof(float) * t.size());
        bp = bw.f32();
      }
    }
    Tensor yt = scratch(N, wn);
    cpu::matmul_forward(yt.f32(), x, Wp, bp, N, C, static_cast<int>(wn));  // (N,C) @ (C,wn)
    cpu::count_flops(-2L * N * C * (wn - t.size()));  // the window's zero columns: not model FLOPs
    copy_columns(y, OC, t.begin, yt.f32(), wn, off, t.size(), N);          // y[:, t]
    tiles->release_tile();  // before the next tile is gathered: one tile alive at a time
  }
}

void linear_backward_input(KernelOps& ops, WeightTiles* tiles, BlockLinear w, Act dx_stored,
                           ActIn dy_stored, const float* W, int N, int C, int OC) {
  if (!tiles) {
    ops.matmul_backward_input(dx_stored, dy_stored, W, N, C, OC);  // the untiled layer
    return;
  }
  require_host(ops, "linear_backward_input");
  const Fp32Copy dyf(dy_stored, int64_t{N} * OC, Device::kCPU);
  Fp32Copy dxf(dx_stored, int64_t{N} * C, Device::kCPU);
  const float* dy = dyf.get();
  float* dx = dxf.get();
  const int k = tiles->tile_factor();
  for (int i = 0; i < k; ++i) {
    const TileRange t = tile_range(C, k, i), win = panel_window(t, C);
    const int64_t h = win.size(), off = t.begin - win.begin;
    const float* Wt = tiles->rows(w, i);  // (|t|, OC): W[t, :], gathered
    Tensor Ww;
    const float* Wp = Wt;
    if (!(win == t)) {  // the window (h, OC): the tile's rows at their place, the others zero
      Ww = scratch(h, OC);
      std::memcpy(Ww.f32() + off * OC, Wt, sizeof(float) * t.size() * OC);
      Wp = Ww.f32();
    }
    Tensor dxt = scratch(N, h);
    cpu::matmul_backward_input(dxt.f32(), dy, Wp, N, static_cast<int>(h), OC);  // (N,OC) @ (OC,h)
    cpu::count_flops(-2L * N * OC * (h - t.size()));  // the window's zero rows: not model FLOPs
    copy_columns(dx, C, t.begin, dxt.f32(), h, off, t.size(), N);              // dx[:, t]
    tiles->release_tile();
  }
}

std::vector<TileRange> block_rest_ranges(const BlockShape& s) {
  std::vector<TileRange> r;
  int64_t off = 0;
  for (const BlockParamDef& d : kBlockParams) {
    const int64_t n = dim_size(d.rows, s) * dim_size(d.cols, s);
    if (d.rows == Dim::kOne) {  // a vector: part of the rest (merged with a neighbour)
      if (!r.empty() && r.back().end == off)
        r.back().end += n;
      else
        r.push_back({off, off + n});
    }
    off += n;
  }
  return r;
}

int64_t block_rest_numel(const BlockShape& s) {
  int64_t n = 0;
  for (const TileRange& t : block_rest_ranges(s)) n += t.size();
  return n;
}

BlockParams<const float> block_rest_params(const float* rest, const BlockShape& s) {
  std::array<const float*, kBlockParams.size()> p{};
  int64_t off = 0;
  for (size_t i = 0; i < kBlockParams.size(); ++i) {
    if (kBlockParams[i].rows != Dim::kOne) continue;  // a weight: read from the tiles
    p[i] = rest + off;
    off += dim_size(kBlockParams[i].cols, s);
  }
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
}

}  // namespace llmp
