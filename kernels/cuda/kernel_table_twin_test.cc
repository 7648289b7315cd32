// The entries of the CUDA kernel table (kernels/ops/kernel_ops.h; CudaKernelOps, cuda_ops.cu) that
// kernels_twin_test.cc and attention_block_twin_test.cc leave unchecked (kernels/cuda/README.md:
// the inventory), each against its kernels/cpu twin on random inputs, called THROUGH the table
// (kernel_ops(Device::kCUDA)), so the table's forward is checked with the kernel:
//   - 2D / 2.5D tensor parallelism (tp_grid.cu vs kernels/cpu/tp_grid.cc): add_to, bias_add, and
//     the split LayerNorm's five passes on 2 column shards, the all_reduce between passes done on
//     the host (s = s_0 + s_1, what common/tp_grid/grid_layernorm.cc's all_reduce leaves on each
//     rank), against kernels/cpu's passes and the unsplit layernorm_forward / _backward; with
//     layernorm_backward_weight on a shard, as grid_layernorm_backward calls it;
//   - count_rounding (round_stats.cu) and round_counted (kernels/ops; the mixed_precision stage's
//     report) vs the RoundStats of kernels/cpu/convert.h's round_to / accumulate_to (f32, f16,
//     bf16; both modes) on inputs that underflow, overflow and are non-finite;
//   - paths the first file leaves out: layernorm_backward without dw/db; the f32 instantiations
//     of round_to / accumulate_to / widen (in the rounding test, through round_counted).
// sum_of_squares (--clip_grad's norm) is checked in grad_norm_twin_test.cc, in this binary.
// Bounds (relative to max(1, max|ref|), printed): row sums of ≤ 134 fp32 terms in another order
// (a warp butterfly vs Eigen's blocked sum; FMA contraction) differ by ≲ k·2⁻²⁴·Σ|terms|, inside
// kRow = 1e-5 for inputs of magnitude ≤ 3 (kernels_twin_test's row bound); the split passes vs
// the unsplit kernel the same (partial sums added, then the same math); one addition per element
// (add_to, bias_add), copies, counts and roundings exact.
// Not vacuous: every comparison EXPECTs its reference non-empty and not all zeros (nontrivial);
// the host tests (KernelTableHost, run without a GPU) check the LayerNorm reference against the
// unsplit kernel and that the rounding inputs hit every counter. Without a GPU every
// KernelTableTwin test is SKIPPED with the runtime's reason.
// Shapes: N = 13 rows (not a multiple of a block's 8 warps), C = 134 in 2 shards of Cl = 67 (> 32,
// not a multiple: the lanes' last stride is partial); bias_add (13, 201); add_to n = 100003;
// count_rounding n = 13 (one block) and 300007 (> kMaxReduceBlocks·kThreads: the loop goes round).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/tp_grid.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using test::Dev;
using test::DevF;
using test::rnd;
using test::Vec;
constexpr float kRow = 1e-5f;
constexpr int kN = 13, kC = 134, kShards = 2, kCl = kC / kShards;

class KernelTableTwin : public test::GpuTwin {
 protected:
  KernelOps& ops = kernel_ops(Device::kCUDA);
};

/// A reference that can tell a right result from a wrong one: non-empty, not all zeros.
void nontrivial(const Vec& ref, const char* what) {
  EXPECT_FALSE(ref.empty()) << what << ": empty reference";
  EXPECT_TRUE(std::any_of(ref.begin(), ref.end(), [](float v) { return v != 0.0f; }))
      << what << ": reference all zeros";
}
float rel(const Vec& got, const Vec& ref, const char* what) {
  nontrivial(ref, what);
  return test::rel_err(got, ref, what);
}

/// Columns [k·Cl, (k+1)·Cl) of the (rows, Cl·shards) row-major x: shard k's block.
Vec shard(const Vec& x, int rows, int k, int Cl = kCl, int shards = kShards) {
  Vec out(static_cast<size_t>(rows) * Cl);
  for (int n = 0; n < rows; ++n)
    std::copy_n(x.begin() + (n * shards + k) * Cl, Cl, out.begin() + n * Cl);
  return out;
}
Vec add(const Vec& a, const Vec& b) {  // the host's all_reduce(kSum) over two ranks
  Vec s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

// ---- The split LayerNorm, on the CPU: the reference chain ------------------------------------
Vec cols_of(const Vec& v, int k) { return Vec(v.begin() + k * kCl, v.begin() + (k + 1) * kCl); }

struct SplitLn {
  Vec x, w, b, dy, dx0, dw0;   // inputs: rows (N,C), w, b (C), dy (N,C); dx and dw/db starts
  Vec s1[kShards], s1_all;     // pass 1: partial Σ_c x; the all_reduce
  Vec mean[kShards], s2[kShards], s2_all;  // pass 2: mean; partial Σ_c (x - mean)²; all_reduce
  Vec y[kShards], mean_out, rstd_out;      // pass 3
  Vec sb[kShards], sb_all;     // backward pass 1: [Σ dx̂ | Σ dx̂·x̂] (2N); the all_reduce
  Vec dx[kShards], dw[kShards], db[kShards];  // backward pass 2 (dx +=); the weight half (+=)
  Vec y_full, mean_full, rstd_full, dx_full, dw_full, db_full;  // the unsplit kernels
};

SplitLn split_ln_reference() {
  SplitLn r;
  r.x = rnd(kN * kC, 1, -2.0f, 3.0f);  // a nonzero mean per row
  r.w = rnd(kC, 2, 0.5f, 1.5f), r.b = rnd(kC, 3), r.dy = rnd(kN * kC, 4);
  r.dx0 = rnd(kN * kC, 5), r.dw0 = rnd(kC, 6);  // nonzero: the accumulation is checked
  Vec x[kShards], dy[kShards];
  for (int k = 0; k < kShards; ++k) {
    x[k] = shard(r.x, kN, k), dy[k] = shard(r.dy, kN, k), r.dx[k] = shard(r.dx0, kN, k);
    r.s1[k].resize(kN), r.mean[k].resize(kN), r.y[k].resize(kN * kCl), r.sb[k].resize(2 * kN);
    r.dw[k] = r.db[k] = cols_of(r.dw0, k);
    cpu::layernorm_partial_sum(r.s1[k].data(), x[k].data(), kN, kCl);
  }
  r.s1_all = add(r.s1[0], r.s1[1]);
  for (int k = 0; k < kShards; ++k) {
    r.s2[k] = r.s1_all;
    cpu::layernorm_partial_sq(r.mean[k].data(), r.s2[k].data(), x[k].data(), kN, kCl, kC);
  }
  r.s2_all = add(r.s2[0], r.s2[1]);
  r.mean_out.resize(kN), r.rstd_out.resize(kN);
  const float *m = r.mean_out.data(), *rs = r.rstd_out.data();  // the backward's, as on a rank
  for (int k = 0; k < kShards; ++k) {
    const float *w = r.w.data() + k * kCl, *b = r.b.data() + k * kCl;
    cpu::layernorm_normalize(r.y[k].data(), r.mean_out.data(), r.rstd_out.data(), x[k].data(), w,
                             b, r.mean[k].data(), r.s2_all.data(), kN, kCl, kC);
    cpu::layernorm_backward_partial(r.sb[k].data(), dy[k].data(), x[k].data(), w, m, rs, kN, kCl);
  }
  r.sb_all = add(r.sb[0], r.sb[1]);
  for (int k = 0; k < kShards; ++k) {
    cpu::layernorm_backward_apply(r.dx[k].data(), r.sb_all.data(), dy[k].data(), x[k].data(),
                                  r.w.data() + k * kCl, m, rs, kN, kCl, kC);
    cpu::layernorm_backward_weight(r.dw[k].data(), r.db[k].data(), dy[k].data(), x[k].data(), m,
                                   rs, kN, kCl);
  }
  r.y_full.resize(kN * kC), r.mean_full.resize(kN), r.rstd_full.resize(kN);
  cpu::layernorm_forward(r.y_full.data(), r.mean_full.data(), r.rstd_full.data(), r.x.data(),
                         r.w.data(), r.b.data(), kN, kC);
  r.dx_full = r.dx0, r.dw_full = r.db_full = r.dw0;
  cpu::layernorm_backward(r.dx_full.data(), r.dw_full.data(), r.db_full.data(), r.dy.data(),
                          r.x.data(), r.w.data(), r.mean_full.data(), r.rstd_full.data(), kN, kC);
  return r;
}

TEST(KernelTableHost, SplitLayerNormReferenceMatchesUnsplit) {
  const SplitLn r = split_ln_reference();
  EXPECT_LE(rel(r.mean_out, r.mean_full, "cpu split mean"), kRow);
  EXPECT_LE(rel(r.rstd_out, r.rstd_full, "cpu split rstd"), kRow);
  for (int k = 0; k < kShards; ++k) {
    EXPECT_LE(rel(r.y[k], shard(r.y_full, kN, k), "cpu split y"), kRow);
    EXPECT_LE(rel(r.dx[k], shard(r.dx_full, kN, k), "cpu split dx"), kRow);
    EXPECT_LE(rel(r.dw[k], cols_of(r.dw_full, k), "cpu split dw"), kRow);
    EXPECT_LE(rel(r.db[k], cols_of(r.db_full, k), "cpu split db"), kRow);
  }
}

// ---- The split LayerNorm on the device, pass by pass -----------------------------------------
struct ShardDev {  // one rank's column block on the device
  DevF x, w, b, dy, s, mean, y, sb, dx, dw, db;
  ShardDev(const SplitLn& r, int k)
      : x(shard(r.x, kN, k)), w(cols_of(r.w, k)), b(cols_of(r.b, k)), dy(shard(r.dy, kN, k)),
        s(kN), mean(kN), y(kN * kCl), sb(2 * kN), dx(shard(r.dx0, kN, k)),
        dw(cols_of(r.dw0, k)), db(cols_of(r.dw0, k)) {}
};
void upload(DevF& d, const Vec& h) {
  ASSERT_EQ(d.n, h.size());
  CUDA_CHECK(cudaMemcpy(d.p, h.data(), 4 * h.size(), cudaMemcpyHostToDevice));
}

TEST_F(KernelTableTwin, SplitLayerNormForwardOnTwoShards) {
  const SplitLn r = split_ln_reference();
  std::unique_ptr<ShardDev> sh[kShards] = {std::make_unique<ShardDev>(r, 0),
                                           std::make_unique<ShardDev>(r, 1)};
  for (auto& d : sh) ops.layernorm_partial_sum(d->s.p, d->x.p, kN, kCl);
  Vec got[kShards] = {sh[0]->s.get(), sh[1]->s.get()};
  for (int k = 0; k < kShards; ++k) EXPECT_LE(rel(got[k], r.s1[k], "partial_sum"), kRow);
  const Vec s1 = add(got[0], got[1]);  // the all_reduce, of the device's own partials
  for (auto& d : sh) {
    upload(d->s, s1);
    ops.layernorm_partial_sq(d->mean.p, d->s.p, d->x.p, kN, kCl, kC);
  }
  for (int k = 0; k < kShards; ++k) {
    got[k] = sh[k]->s.get();
    EXPECT_LE(rel(sh[k]->mean.get(), r.mean[k], "partial_sq mean"), kRow);
    EXPECT_LE(rel(got[k], r.s2[k], "partial_sq s"), kRow);
  }
  const Vec s2 = add(got[0], got[1]);
  DevF mean_out(kN), rstd_out(kN);
  for (auto& d : sh) upload(d->s, s2);
  // Shard 0 writes mean and rstd apart; shard 1 with mean_out aliasing mean and no rstd_out.
  ops.layernorm_normalize(sh[0]->y.p, mean_out.p, rstd_out.p, sh[0]->x.p, sh[0]->w.p, sh[0]->b.p,
                          sh[0]->mean.p, sh[0]->s.p, kN, kCl, kC);
  ops.layernorm_normalize(sh[1]->y.p, sh[1]->mean.p, nullptr, sh[1]->x.p, sh[1]->w.p, sh[1]->b.p,
                          sh[1]->mean.p, sh[1]->s.p, kN, kCl, kC);
  for (int k = 0; k < kShards; ++k) {
    const Vec y = sh[k]->y.get();
    EXPECT_LE(rel(y, r.y[k], "normalize y"), kRow);
    EXPECT_LE(rel(y, shard(r.y_full, kN, k), "normalize y vs unsplit"), kRow);
  }
  EXPECT_LE(rel(mean_out.get(), r.mean_out, "normalize mean_out"), kRow);
  EXPECT_LE(rel(sh[1]->mean.get(), r.mean_full, "mean aliased vs unsplit"), kRow);
  EXPECT_LE(rel(rstd_out.get(), r.rstd_out, "normalize rstd_out"), kRow);
  EXPECT_LE(rel(rstd_out.get(), r.rstd_full, "rstd vs unsplit"), kRow);
}

TEST_F(KernelTableTwin, SplitLayerNormBackwardOnTwoShards) {
  const SplitLn r = split_ln_reference();
  std::unique_ptr<ShardDev> sh[kShards] = {std::make_unique<ShardDev>(r, 0),
                                           std::make_unique<ShardDev>(r, 1)};
  DevF mean(r.mean_out), rstd(r.rstd_out);  // the forward's, as grid_layernorm_backward gets them
  for (auto& d : sh)
    ops.layernorm_backward_partial(d->sb.p, d->dy.p, d->x.p, d->w.p, mean.p, rstd.p, kN, kCl);
  const Vec got[kShards] = {sh[0]->sb.get(), sh[1]->sb.get()};
  for (int k = 0; k < kShards; ++k) EXPECT_LE(rel(got[k], r.sb[k], "backward_partial"), kRow);
  const Vec sb = add(got[0], got[1]);
  for (auto& d : sh) {
    upload(d->sb, sb);
    ops.layernorm_backward_apply(d->dx.p, d->sb.p, d->dy.p, d->x.p, d->w.p, mean.p, rstd.p, kN,
                                 kCl, kC);
    ops.layernorm_backward_weight(d->dw.p, d->db.p, d->dy.p, d->x.p, mean.p, rstd.p, kN, kCl);
  }
  for (int k = 0; k < kShards; ++k) {
    const Vec dx = sh[k]->dx.get(), dw = sh[k]->dw.get(), db = sh[k]->db.get();
    EXPECT_LE(rel(dx, r.dx[k], "backward_apply dx"), kRow);
    EXPECT_LE(rel(dx, shard(r.dx_full, kN, k), "dx vs unsplit"), kRow);
    EXPECT_LE(rel(dw, r.dw[k], "backward_weight dw"), kRow);
    EXPECT_LE(rel(dw, cols_of(r.dw_full, k), "dw vs unsplit"), kRow);
    EXPECT_LE(rel(db, r.db[k], "backward_weight db"), kRow);
    EXPECT_LE(rel(db, cols_of(r.db_full, k), "db vs unsplit"), kRow);
  }
}

TEST_F(KernelTableTwin, AddToAndBiasAddAreExact) {
  const int64_t n = 100003;
  Vec y = rnd(n, 10), yb = rnd(kN * 201, 12);
  const Vec x = rnd(n, 11), b = rnd(201, 13);
  DevF y_d(y), x_d(x), yb_d(yb), b_d(b);
  cpu::add_to(y.data(), x.data(), n);  // one addition per element: the same bits
  cpu::bias_add(yb.data(), b.data(), kN, 201);
  ops.add_to(y_d.p, x_d.p, n);
  ops.bias_add(yb_d.p, b_d.p, kN, 201);
  nontrivial(y, "add_to"), nontrivial(yb, "bias_add");
  EXPECT_EQ(y_d.get(), y);
  EXPECT_EQ(yb_d.get(), yb);
}

// ---- count_rounding and round_counted vs kernels/cpu/convert.h's counts -----------------------
// Values on every edge: f16 overflow (65520 ties to inf; FLT_MAX), bf16 overflow (FLT_MAX,
// 3.3961e38 past bf16's halfway), f16 underflow (2⁻²⁶; 2⁻²⁵ ties to 0), f32 subnormals (bf16
// underflow), the non-finite, zeros; then random bit patterns, ±2^e·(1 + u) for e in [-30, 20),
// and uniform [-1, 1).
Vec rounding_src(int64_t n, unsigned seed) {
  const float edges[] = {65520.0f, FLT_MAX, 0x1p-26f, 1e-45f, NAN, INFINITY, -INFINITY, 0.0f,
                         -0.0f, -3.3961e38f, 0x1p-25f, 65504.0f, -1e-40f, 0x1.002p-25f, -65520.0f};
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Vec v(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = g();
    if (i % 3 == 0) std::memcpy(&v[i], &bits, 4);
    if (i % 3 == 1)
      v[i] = std::ldexp(bits & 1 ? -1.0f - u(g) : 1.0f + u(g), static_cast<int>(bits % 50) - 30);
    if (i % 3 == 2) v[i] = 2.0f * u(g) - 1.0f;
  }
  const int64_t m = std::min<int64_t>(n, std::size(edges)), stride = n / m;
  for (int64_t e = 0; e < m; ++e) v[e * stride] = edges[e];
  return v;
}
/// accumulate_to's start in dt: 0 on the first 16 and every third element (so tiny sums
/// underflow), ±65504 (f16's largest) on every third, uniform [-4, 4) elsewhere.
std::vector<uint8_t> rounding_dst(int64_t n, DType dt) {
  Vec v = rnd(n, 20, -4.0f, 4.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (i < 16 || i % 3 == 0) v[i] = 0.0f;
    else if (i % 3 == 1) v[i] = i % 2 ? 65504.0f : -65504.0f;
  }
  std::vector<uint8_t> d(n * dtype_size(dt));
  cpu::round_to(v.data(), d.data(), dt, n);
  return d;
}
/// kernels/cpu's rounding of src into *dst (round_to, or accumulate_to), and what it counted.
cpu::RoundStats cpu_counts(const Vec& src, std::vector<uint8_t>* dst, DType dt, bool accumulate) {
  cpu::RoundStats st;
  const int64_t n = static_cast<int64_t>(src.size());
  if (accumulate) cpu::accumulate_to(src.data(), dst->data(), dt, n, &st);
  else cpu::round_to(src.data(), dst->data(), dt, n, &st);
  return st;
}
/// All five counts as one string: compared at once, both printed on a failure.
std::string str(const cpu::RoundStats& s) {
  return "elements " + std::to_string(s.elements) + " nonzero " + std::to_string(s.nonzero) +
         " underflow " + std::to_string(s.underflow) + " overflow " + std::to_string(s.overflow) +
         " nonfinite " + std::to_string(s.nonfinite);
}
const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
const int64_t kSizes[] = {13, 300007};

TEST(KernelTableHost, RoundingInputsHitEveryCounter) {
  for (int64_t n : kSizes)
    for (DType dt : kDtypes) {
      const Vec src = rounding_src(n, 7);
      std::vector<uint8_t> d1 = rounding_dst(n, dt), d2 = d1;
      const cpu::RoundStats r = cpu_counts(src, &d1, dt, false), a = cpu_counts(src, &d2, dt, true);
      const std::string what = std::string(to_string(dt)) + " n=" + std::to_string(n);
      std::printf("%s round: %s\n%s accumulate: %s\n", what.c_str(), str(r).c_str(), what.c_str(),
                  str(a).c_str());
      for (const cpu::RoundStats& s : {r, a}) {
        EXPECT_EQ(s.elements, n) << what;
        EXPECT_GT(s.nonzero, 0) << what;
        EXPECT_GT(s.nonfinite, 0) << what;
        if (dt == DType::kF32) continue;  // f32 neither underflows nor overflows
        EXPECT_GT(s.underflow, 0) << what;
        EXPECT_GT(s.overflow, 0) << what;
      }
      if (n > 16) {
        EXPECT_NE(str(r), str(a)) << what << ": the start in dst must matter";
      }
    }
}

TEST(KernelTableHost, CountsOnTheDeviceTableAreRefusedOrCheckedBeforeDeviceWork) {
  KernelOps& ops = kernel_ops(Device::kCUDA);
  cpu::RoundStats st;
  EXPECT_THROW(ops.round_to(nullptr, nullptr, DType::kF16, 4, &st), std::invalid_argument);
  EXPECT_THROW(ops.accumulate_to(nullptr, nullptr, DType::kBF16, 4, &st), std::invalid_argument);
  EXPECT_THROW(ops.count_rounding(nullptr, nullptr, DType::kU8, 4, false), std::invalid_argument);
}

/// The elements (of dtype dt) of a and b that differ in their bits, a NaN matching any NaN
/// (payloads may differ); a size mismatch counts 1.
template <typename T>
int64_t differing(const std::vector<T>& a, const std::vector<T>& b, DType dt) {
  const int64_t e = dtype_size(dt), n = static_cast<int64_t>(a.size() * sizeof(T)) / e;
  const char* pa = reinterpret_cast<const char*>(a.data());
  const char* pb = reinterpret_cast<const char*>(b.data());
  int64_t bad = a.size() != b.size();
  for (int64_t i = 0; i < n && !bad; ++i) {
    if (std::memcmp(pa + i * e, pb + i * e, e) == 0) continue;
    float x, y;
    cpu::widen(pa + i * e, dt, &x, 1), cpu::widen(pb + i * e, dt, &y, 1);
    bad += !(std::isnan(x) && std::isnan(y));
  }
  return bad;
}

TEST_F(KernelTableTwin, CountRoundingAndRoundCountedMatchTheCpuCounts) {
  for (int64_t n : kSizes)
    for (DType dt : kDtypes)
      for (bool accumulate : {false, true}) {
        const std::string what = std::string(to_string(dt)) + (accumulate ? " acc" : " round") +
                                 " n=" + std::to_string(n);
        const Vec src = rounding_src(n, 7);
        const std::vector<uint8_t> dst0 = rounding_dst(n, dt);
        std::vector<uint8_t> ref_dst = dst0;
        const cpu::RoundStats ref = cpu_counts(src, &ref_dst, dt, accumulate);
        EXPECT_EQ(ref.elements, n) << what;
        EXPECT_GT(ref.nonfinite, 0) << what;  // the inputs hit the counters (see the host test)
        if (dt != DType::kF32) {
          EXPECT_GT(ref.underflow * ref.overflow, 0) << what;
        }
        DevF src_d(src);
        Dev<uint8_t> dst_d(dst0);
        EXPECT_EQ(str(ops.count_rounding(src_d.p, dst_d.p, dt, n, accumulate)), str(ref)) << what;
        EXPECT_TRUE(dst_d.get() == dst0) << what << ": count_rounding wrote dst";
        cpu::RoundStats got;  // what the mixed_precision stage calls: count, then round
        round_counted(ops, src_d.p, dst_d.p, dt, n, accumulate, &got);
        EXPECT_EQ(str(got), str(ref)) << what << " round_counted";
        EXPECT_EQ(differing(dst_d.get(), ref_dst, dt), 0) << what;
        Vec wide(n);  // and back to fp32 (f32: widen's own instantiation, a copy)
        DevF wide_d(n);
        cpu::widen(ref_dst.data(), dt, wide.data(), n), ops.widen(dst_d.p, dt, wide_d.p, n);
        EXPECT_EQ(differing(wide_d.get(), wide, DType::kF32), 0) << what << " widen";
      }
  EXPECT_EQ(str(ops.count_rounding(nullptr, nullptr, DType::kF16, 0, true)),
            str(cpu::RoundStats{}));  // n = 0: nothing counted, nothing launched
}

// ---- A null path kernels_twin_test leaves out ------------------------------------------------
TEST_F(KernelTableTwin, LayerNormBackwardWithoutWeightGradients) {
  const SplitLn r = split_ln_reference();
  Vec dx = r.dx0;
  cpu::layernorm_backward(dx.data(), nullptr, nullptr, r.dy.data(), r.x.data(), r.w.data(),
                          r.mean_full.data(), r.rstd_full.data(), kN, kC);
  DevF dx_d(r.dx0), dy_d(r.dy), x_d(r.x), w_d(r.w), m_d(r.mean_full), s_d(r.rstd_full);
  ops.layernorm_backward(dx_d.p, dx_d.p, nullptr, nullptr, dy_d.p, x_d.p, w_d.p, m_d.p, s_d.p, kN,
                         kC);
  EXPECT_LE(rel(dx_d.get(), dx, "layernorm dx only"), kRow);
}

}  // namespace
}  // namespace llmp
