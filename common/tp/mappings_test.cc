// Megatron's tensor-parallel region operators (mappings.h), forward and backward, against closed
// forms at every world size the BUILD file lists (1..4). Inputs are rank-valued, so every result
// is a formula of the rank and the index:
//   sums:     x_r[i] = r + 1 + i               =>  sum_r x_r[i] = t(t+1)/2 + t·i
//   slices:   the full tensor holds g(index) (a distinct integer per element); rank r's slice
//             holds g at its own positions, so a gather must rebuild g everywhere and a slice
//             must keep exactly rank r's positions;
//   sequence: the same with the sequence dimension, in (B, T, C) with B = 1 (no permute) and
//             B = 2 (the rank-major permute).
// Every value is an integer below 2^24, so float sums are exact in any order: compared exactly.
// Bytes are asserted against the ring volumes of process_group.h (all_reduce 2(t-1)/t·S,
// all_gather and reduce_scatter (t-1)/t·S, S = bytes of the full tensor; 0 on one rank), and f's
// forward and g's backward (and the in-place all_reduces) must return the very same storage.
//
// Glossary: t ranks in the tp group, r this rank, K last dimension (k = K/t per rank), B batch,
// T sequence (T/t per rank), C channels, S bytes of the full tensor.
#include "common/tp/mappings.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace llmp::tp {
namespace {

Tensor make(std::vector<int64_t> shape, const std::function<double(int64_t)>& f) {
  Tensor x = Tensor::empty(std::move(shape));
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(f(i));
  return x;
}

// "" when `got` has shape `shape` and got[i] == want(i) everywhere; else what is wrong.
std::string wrong(const Tensor& got, const std::vector<int64_t>& shape,
                  const std::function<double(int64_t)>& want) {
  if (got.shape() != shape) return "shape " + shape_str(got.shape()) + ", want " + shape_str(shape);
  std::ostringstream first;
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (double(got.f32()[i]) != want(i) && ++bad <= 3)
      first << "\n    element " << i << " = " << got.f32()[i] << ", want " << want(i);
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(got.numel()) + " wrong" + first.str();
}

class MappingsTest : public ::testing::Test {
 protected:
  void SetUp() override { use(ProcessGroup::world()); }  // fresh group: CommStats at zero
  void use(std::shared_ptr<ProcessGroup> g) {
    tp = std::move(g);
    t = tp->size();
    r = tp->rank();
  }
  double bytes(const char* op) const { return tp->stats().bytes_of(op); }
  double ring(double S) const { return double(t - 1) / t * S; }  // (t-1)/t·S
  // Exactly `want` bytes under `op` (and nothing else) since the last reset; then resets.
  void expect_sent(const char* op, double want, const char* what) {
    EXPECT_DOUBLE_EQ(bytes(op), want) << what << ": bytes counted under " << op;
    EXPECT_DOUBLE_EQ(tp->stats().total_bytes(), want) << what << ": bytes in all";
    tp->reset_stats();
  }
  // Sum of x_q[i] = q + 1 + i over the group.
  double sum_closed_form(int64_t i) const { return t * (t + 1) / 2.0 + double(t) * i; }

  std::shared_ptr<ProcessGroup> tp;
  int t = 1, r = 0;
};

TEST_F(MappingsTest, CopyToTpRegionForwardIsTheInputItselfBackwardAllReduces) {
  Tensor x = make({3, 5}, [&](int64_t i) { return r + 1 + i; });
  Tensor y = CopyToTpRegion::forward(x, *tp);
  EXPECT_EQ(y.raw(), x.raw()) << "f's forward must return x itself, not a copy";
  EXPECT_EQ(wrong(y, {3, 5}, [&](int64_t i) { return r + 1 + i; }), "");
  expect_sent("all_reduce", 0.0, "f forward");

  Tensor dy = make({3, 5}, [&](int64_t i) { return r + 1 + i; });
  Tensor dx = CopyToTpRegion::backward(dy, *tp);
  EXPECT_EQ(dx.raw(), dy.raw()) << "f's backward all_reduces dy in place";
  EXPECT_EQ(wrong(dx, {3, 5}, [&](int64_t i) { return sum_closed_form(i); }), "");
  expect_sent("all_reduce", 2.0 * ring(15 * 4), "f backward, 2(t-1)/t·S");
}

TEST_F(MappingsTest, ReduceFromTpRegionForwardAllReducesBackwardIsTheGradientItself) {
  Tensor x = make({2, 3, 7}, [&](int64_t i) { return r + 1 + i; });
  Tensor y = ReduceFromTpRegion::forward(x, *tp);
  EXPECT_EQ(y.raw(), x.raw()) << "g's forward all_reduces x in place";
  EXPECT_EQ(wrong(y, {2, 3, 7}, [&](int64_t i) { return sum_closed_form(i); }), "");
  expect_sent("all_reduce", 2.0 * ring(42 * 4), "g forward, 2(t-1)/t·S");

  Tensor dy = make({2, 3, 7}, [&](int64_t i) { return 100 * r + i; });
  Tensor dx = ReduceFromTpRegion::backward(dy, *tp);
  EXPECT_EQ(dx.raw(), dy.raw()) << "g's backward must return dy itself, not a copy";
  EXPECT_EQ(wrong(dx, {2, 3, 7}, [&](int64_t i) { return 100 * r + i; }), "");
  expect_sent("all_reduce", 0.0, "g backward");
}

// Full tensor (..., K): element (row, col) = 1000·row + col. Rank r's slice (..., k): columns
// [r·k, (r+1)·k) of it. Shapes: 1-D (one row: no permute) and (2, 3, K).
struct LastDimCase {
  std::vector<int64_t> lead;  // leading dimensions
  int64_t k;                  // per-rank slice of the last dimension
};
const LastDimCase kLastDimCases[] = {{{}, 5}, {{2, 3}, 3}};

std::vector<int64_t> shape_with(std::vector<int64_t> lead, int64_t last) {
  lead.push_back(last);
  return lead;
}
double full_at(int64_t i, int64_t K) { return 1000.0 * (i / K) + i % K; }
double slice_at(int64_t i, int64_t k, int rank) { return 1000.0 * (i / k) + rank * k + i % k; }

TEST_F(MappingsTest, ScatterToTpRegionKeepsSliceRForwardAllGathersBackward) {
  for (const LastDimCase& c : kLastDimCases) {
    const int64_t k = c.k, K = k * t;
    SCOPED_TRACE("full shape " + shape_str(shape_with(c.lead, K)));
    Tensor x = make(shape_with(c.lead, K), [&](int64_t i) { return full_at(i, K); });
    Tensor y = ScatterToTpRegion::forward(x, *tp);
    EXPECT_EQ(wrong(y, shape_with(c.lead, k), [&](int64_t i) { return slice_at(i, k, r); }), "");
    EXPECT_NE(y.raw(), x.raw()) << "the slice is a copy";
    EXPECT_EQ(y.category(), MemCategory::kActivations);
    expect_sent("all_gather", 0.0, "scatter forward");

    Tensor dy = make(shape_with(c.lead, k), [&](int64_t i) { return slice_at(i, k, r); });
    Tensor dx = ScatterToTpRegion::backward(dy, *tp);
    EXPECT_EQ(wrong(dx, shape_with(c.lead, K), [&](int64_t i) { return full_at(i, K); }), "");
    EXPECT_EQ(dx.category(), MemCategory::kActivations);
    expect_sent("all_gather", ring(4.0 * dx.numel()), "scatter backward, (t-1)/t·S");
  }
}

TEST_F(MappingsTest, GatherFromTpRegionAllGathersForwardKeepsSliceRBackward) {
  for (const LastDimCase& c : kLastDimCases) {
    const int64_t k = c.k, K = k * t;
    SCOPED_TRACE("full shape " + shape_str(shape_with(c.lead, K)));
    Tensor x = make(shape_with(c.lead, k), [&](int64_t i) { return slice_at(i, k, r); });
    Tensor y = GatherFromTpRegion::forward(x, *tp);
    EXPECT_EQ(wrong(y, shape_with(c.lead, K), [&](int64_t i) { return full_at(i, K); }), "");
    EXPECT_EQ(y.category(), MemCategory::kActivations);
    expect_sent("all_gather", ring(4.0 * y.numel()), "gather forward, (t-1)/t·S");

    Tensor dy = make(shape_with(c.lead, K), [&](int64_t i) { return full_at(i, K); });
    Tensor dx = GatherFromTpRegion::backward(dy, *tp);
    EXPECT_EQ(wrong(dx, shape_with(c.lead, k), [&](int64_t i) { return slice_at(i, k, r); }), "");
    EXPECT_NE(dx.raw(), dy.raw()) << "the slice is a copy";
    expect_sent("all_gather", 0.0, "gather backward");
  }
}

// Sequence layout (B, T, C), T = t·Tr, rank r holding positions [r·Tr, (r+1)·Tr) of every
// sequence. g(b, s, c) = 1000·b + 10·s + c (T <= 12 and C = 4 here: distinct, exact).
constexpr int64_t kTr = 3, kC = 4;
double g_at(int64_t b, int64_t s, int64_t c) { return 1000.0 * b + 10.0 * s + c; }
// Element i of the full (B, T, C) tensor, and of rank `rank`'s (B, Tr, C) part of it.
double full_seq(int64_t i, int64_t T) { return g_at(i / (T * kC), i / kC % T, i % kC); }
double part_seq(int64_t i, int rank) {
  return g_at(i / (kTr * kC), rank * kTr + i / kC % kTr, i % kC);
}
// Rank-valued partial sums over (B, T, C): x_q[i] = q + 1 + i; rank r keeps its positions of the
// sum, element i of its (B, Tr, C) part being flat index (b·T + r·Tr + s)·C + c of the full.
int64_t full_index(int64_t i, int rank, int64_t T) {
  const int64_t b = i / (kTr * kC), s = rank * kTr + i / kC % kTr, c = i % kC;
  return (b * T + s) * kC + c;
}

TEST_F(MappingsTest, GatherFromSequenceRegionAllGathersForwardReduceScattersBackward) {
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE("B = " + std::to_string(B));
    const int64_t T = kTr * t;
    Tensor x = make({B, kTr, kC}, [&](int64_t i) { return part_seq(i, r); });
    Tensor y = GatherFromSequenceRegion::forward(x, *tp);
    EXPECT_EQ(wrong(y, {B, T, kC}, [&](int64_t i) { return full_seq(i, T); }), "");
    EXPECT_EQ(y.category(), MemCategory::kActivations);
    expect_sent("all_gather", ring(4.0 * B * T * kC), "sequence gather forward, (t-1)/t·S");

    Tensor dy = make({B, T, kC}, [&](int64_t i) { return r + 1 + i; });
    Tensor dx = GatherFromSequenceRegion::backward(dy, *tp);
    EXPECT_EQ(wrong(dx, {B, kTr, kC},
                    [&](int64_t i) { return sum_closed_form(full_index(i, r, T)); }),
              "");
    EXPECT_EQ(dx.category(), MemCategory::kActivations);
    expect_sent("reduce_scatter", ring(4.0 * B * T * kC), "sequence gather backward, (t-1)/t·S");
  }
}

TEST_F(MappingsTest, ReduceScatterToSequenceRegionReduceScattersForwardAllGathersBackward) {
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE("B = " + std::to_string(B));
    const int64_t T = kTr * t;
    Tensor x = make({B, T, kC}, [&](int64_t i) { return r + 1 + i; });
    Tensor y = ReduceScatterToSequenceRegion::forward(x, *tp);
    EXPECT_EQ(wrong(y, {B, kTr, kC},
                    [&](int64_t i) { return sum_closed_form(full_index(i, r, T)); }),
              "");
    expect_sent("reduce_scatter", ring(4.0 * B * T * kC), "sequence reduce_scatter forward");

    Tensor dy = make({B, kTr, kC}, [&](int64_t i) { return part_seq(i, r); });
    Tensor dx = ReduceScatterToSequenceRegion::backward(dy, *tp);
    EXPECT_EQ(wrong(dx, {B, T, kC}, [&](int64_t i) { return full_seq(i, T); }), "");
    expect_sent("all_gather", ring(4.0 * B * T * kC), "sequence reduce_scatter backward");
  }
}

// A tp group cut from a larger world, its ranks numbered in reverse: rank r of the group is not
// world rank r, so an operator slicing by the world rank keeps the wrong positions.
TEST_F(MappingsTest, SubGroupWithReorderedRanksSlicesByGroupRank) {
  auto world = ProcessGroup::world();
  const int w = world->rank();
  use(world->split(world->size() >= 4 ? w % 2 : 0, -w));
  const int64_t k = 3, K = k * t, T = kTr * t;
  Tensor x = make({2, K}, [&](int64_t i) { return full_at(i, K); });
  EXPECT_EQ(wrong(ScatterToTpRegion::forward(x, *tp), {2, k},
                  [&](int64_t i) { return slice_at(i, k, r); }),
            "")
      << "group rank " << r << ", world rank " << w;
  Tensor seq = make({2, kTr, kC}, [&](int64_t i) { return part_seq(i, r); });
  EXPECT_EQ(wrong(GatherFromSequenceRegion::forward(seq, *tp), {2, T, kC},
                  [&](int64_t i) { return full_seq(i, T); }),
            "");
  Tensor d = make({2, T, kC}, [&](int64_t i) { return r + 1 + i; });
  EXPECT_EQ(wrong(ReduceScatterToSequenceRegion::forward(d, *tp), {2, kTr, kC},
                  [&](int64_t i) { return sum_closed_form(full_index(i, r, T)); }),
            "");
}

}  // namespace
}  // namespace llmp::tp
