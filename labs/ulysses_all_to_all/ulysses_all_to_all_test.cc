// Lab ulysses_all_to_all: the tests. They reach the code only through ulysses_all_to_all.h, so
// this one file checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/ulysses_all_to_all:student_test).
//
// Every rank draws the same whole (T, H, hs) tensor G (a seed per tensor), so each rank knows
// what every split of it must hold. The re-layouts move floats without arithmetic, so every
// comparison is exact (bit for bit). What is checked:
//  - seq_to_heads of this rank's rows of G = G's heads [r·Hp, (r+1)·Hp) at every position, for
//    shapes with Tl = 1, 2, 3, 5, Hp = 1, 2, 3, hs = 1, 2, 3, 4; heads_to_seq of the head split =
//    this rank's rows of G; the round trip gives x back; inputs not written;
//  - traffic: each call one all_to_all of Tl·H·hs floats, (p−1)/p·4·Tl·H·hs bytes, and nothing
//    else;
//  - ulysses_attention with a causal softmax attention as `attend`: called once, on (T, Hp, hs),
//    and the result equal, bit for bit, to this rank's rows of the same attention on all of G on
//    one device (it computes each head alone, in the same order, so the split cannot change a
//    bit); four all_to_alls;
//  - a sub-group of every rank in reverse order: positions and heads follow the group's ranks;
//  - bad shapes refused by name before any communication.
//
// Glossary: p ranks, r this rank, Tl positions per rank, T = p·Tl, H = p·Hp heads, hs head size.
#include "labs/ulysses_all_to_all/ulysses_all_to_all.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp::lab {
namespace {

// A whole (T, H, hs) tensor, the same on every rank.
Tensor whole(int64_t T, int64_t H, int64_t hs, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor g = Tensor::empty({T, H, hs});
  for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] = u(gen);
  return g;
}

// Positions [t0, t0 + n) and heads [h0, h0 + m) of a (T, H, hs) tensor, as a new (n, m, hs).
Tensor slice(const Tensor& g, int64_t t0, int64_t n, int64_t h0, int64_t m) {
  const int64_t H = g.dim(1), hs = g.dim(2);
  Tensor s = Tensor::empty({n, m, hs});
  for (int64_t t = 0; t < n; ++t)
    std::memcpy(s.f32() + t * m * hs, g.f32() + ((t0 + t) * H + h0) * hs, sizeof(float) * m * hs);
  return s;
}

std::string shape(const Tensor& t) {
  if (!t.defined()) return "(undefined)";
  std::string s = "(";
  for (int i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.dim(i));
  return s + ")";
}

// "" when got is want, shape and bits; else what differs.
std::string differs(const Tensor& got, const Tensor& want) {
  if (shape(got) != shape(want)) return "shape " + shape(got) + ", want " + shape(want);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(got.f32() + i, want.f32() + i, sizeof(float)) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  if (bad == 0) return "";
  std::ostringstream out;
  out << bad << " of " << want.numel() << " floats differ, the first at flat index " << first
      << " (position " << first / (want.dim(1) * want.dim(2)) << ", head "
      << first / want.dim(2) % want.dim(1) << ", channel " << first % want.dim(2) << "): "
      << got.f32()[first] << ", want " << want.f32()[first];
  return out.str();
}

// Causal softmax attention of each head alone, positions 0 .. T−1 of (T, Hx, hs) tensors.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.dim(0), Hx = q.dim(1), hs = q.dim(2);
  Tensor out = Tensor::zeros({T, Hx, hs});
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> s(T);
  for (int64_t h = 0; h < Hx; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const float* qi = q.f32() + (i * Hx + h) * hs;
      float m = -INFINITY, sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        float dot = 0.0f;
        for (int64_t c = 0; c < hs; ++c) dot += qi[c] * k.f32()[(j * Hx + h) * hs + c];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - m));
      float* o = out.f32() + (i * Hx + h) * hs;
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < hs; ++c) o[c] += s[j] / sum * v.f32()[(j * Hx + h) * hs + c];
    }
  return out;
}

struct Shape {
  int64_t Tl, Hp, hs;
};
const std::vector<Shape> kShapes = {{1, 1, 1}, {3, 1, 4}, {2, 2, 3}, {5, 3, 2}};

std::string where(const ProcessGroup& g, const Shape& s) {
  return "rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size()) +
         ", Tl = " + std::to_string(s.Tl) + ", H = " + std::to_string(s.Hp * g.size()) +
         ", hs = " + std::to_string(s.hs);
}

// seq_to_heads, heads_to_seq and their round trip on `g`, every shape.
void check_relayouts(ProcessGroup& g) {
  const int64_t p = g.size(), r = g.rank();
  for (const Shape& s : kShapes) {
    const int64_t T = p * s.Tl, H = p * s.Hp;
    const Tensor G = whole(T, H, s.hs, 11);
    const Tensor x = slice(G, r * s.Tl, s.Tl, 0, H);          // the sequence split
    const Tensor y = slice(G, 0, T, r * s.Hp, s.Hp);          // the head split
    const Tensor x_copy = slice(x, 0, s.Tl, 0, H), y_copy = slice(y, 0, T, 0, s.Hp);
    const double each = double(p - 1) / p * (4 * s.Tl * H * s.hs);

    g.reset_stats();
    const Tensor heads = seq_to_heads(g, x);
    EXPECT_EQ(differs(heads, y), "") << where(g, s) << ": seq_to_heads";
    EXPECT_EQ(g.stats().calls_of("all_to_all"), 1)
        << where(g, s) << ", seq_to_heads' calls:" << g.stats().calls_str();
    EXPECT_DOUBLE_EQ(g.stats().bytes_of("all_to_all"), each)
        << where(g, s) << ": seq_to_heads' bytes";
    EXPECT_EQ(g.stats().calls.size(), 1u)
        << where(g, s) << ", seq_to_heads' calls:" << g.stats().calls_str();

    g.reset_stats();
    const Tensor seq = heads_to_seq(g, y);
    EXPECT_EQ(differs(seq, x), "") << where(g, s) << ": heads_to_seq";
    EXPECT_EQ(g.stats().calls_of("all_to_all"), 1)
        << where(g, s) << ", heads_to_seq's calls:" << g.stats().calls_str();
    EXPECT_DOUBLE_EQ(g.stats().bytes_of("all_to_all"), each)
        << where(g, s) << ": heads_to_seq's bytes";
    EXPECT_EQ(g.stats().calls.size(), 1u)
        << where(g, s) << ", heads_to_seq's calls:" << g.stats().calls_str();

    EXPECT_EQ(differs(heads_to_seq(g, seq_to_heads(g, x)), x), "") << where(g, s)
                                                                     << ": the round trip";
    EXPECT_EQ(differs(x, x_copy), "") << where(g, s) << ": seq_to_heads wrote its input";
    EXPECT_EQ(differs(y, y_copy), "") << where(g, s) << ": heads_to_seq wrote its input";
  }
}

TEST(UlyssesAllToAll, SeqToHeadsAndBackMoveEveryFloatToItsRank) {
  std::shared_ptr<ProcessGroup> world = ProcessGroup::world();
  check_relayouts(*world);
}

TEST(UlyssesAllToAll, PositionsAndHeadsFollowTheGroupsRanks) {
  std::shared_ptr<ProcessGroup> world = ProcessGroup::world();
  std::shared_ptr<ProcessGroup> reversed = world->split(0, -world->rank());
  ASSERT_EQ(reversed->rank(), world->size() - 1 - world->rank());
  check_relayouts(*reversed);
}

TEST(UlyssesAllToAll, AttentionOnTheHeadSplitEqualsOneDevice) {
  std::shared_ptr<ProcessGroup> g = ProcessGroup::world();
  const int64_t p = g->size(), r = g->rank();
  for (const Shape& s : kShapes) {
    const int64_t T = p * s.Tl, H = p * s.Hp;
    const Tensor Q = whole(T, H, s.hs, 21), K = whole(T, H, s.hs, 22), V = whole(T, H, s.hs, 23);
    const Tensor want = slice(causal_attention(Q, K, V), r * s.Tl, s.Tl, 0, H);
    int attends = 0;
    std::string seen;
    const AttendFn attend = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
      ++attends;
      seen = shape(q) + " " + shape(k) + " " + shape(v);
      return causal_attention(q, k, v);
    };
    g->reset_stats();
    const Tensor got =
        ulysses_attention(*g, slice(Q, r * s.Tl, s.Tl, 0, H), slice(K, r * s.Tl, s.Tl, 0, H),
                          slice(V, r * s.Tl, s.Tl, 0, H), attend);
    EXPECT_EQ(differs(got, want), "") << where(*g, s) << ": the attention output";
    EXPECT_EQ(attends, 1) << where(*g, s) << ": calls of attend";
    const std::string each = "(" + std::to_string(T) + ", " + std::to_string(s.Hp) + ", " +
                             std::to_string(s.hs) + ")";
    if (attends == 1)
      EXPECT_EQ(seen, each + " " + each + " " + each) << where(*g, s) << ": attend's q, k, v";
    EXPECT_EQ(g->stats().calls_of("all_to_all"), 4)
        << where(*g, s) << ", calls:" << g->stats().calls_str();
    EXPECT_DOUBLE_EQ(g->stats().bytes_of("all_to_all"),
                     4 * (double(p - 1) / p * (4 * s.Tl * H * s.hs)))
        << where(*g, s) << ": bytes of the four all_to_alls";
    EXPECT_EQ(g->stats().calls.size(), 1u) << where(*g, s) << ", calls:" << g->stats().calls_str();
  }
}

TEST(UlyssesAllToAll, BadShapesAreRefusedByName) {
  std::shared_ptr<ProcessGroup> g = ProcessGroup::world();
  const int64_t p = g->size();
  auto message = [&](bool to_heads, const Tensor& t) -> std::string {
    try {
      to_heads ? seq_to_heads(*g, t) : heads_to_seq(*g, t);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  g->reset_stats();
  EXPECT_EQ(message(true, Tensor::zeros({6, 4})),
            "seq_to_heads: x has 2 dimensions, want 3 (Tl, H, hs)");
  EXPECT_EQ(message(false, Tensor::zeros({6, 4})),
            "heads_to_seq: y has 2 dimensions, want 3 (T, Hp, hs)");
  if (p > 1) {
    EXPECT_EQ(message(true, Tensor::zeros({2, p + 1, 3})),
              "seq_to_heads: H = " + std::to_string(p + 1) + " heads, not divisible by p = " +
                  std::to_string(p));
    EXPECT_EQ(message(false, Tensor::zeros({p + 1, 2, 3})),
              "heads_to_seq: T = " + std::to_string(p + 1) + " positions, not divisible by p = " +
                  std::to_string(p));
  }
  EXPECT_EQ(g->stats().calls.size(), 0u)
      << "communication before the checks:" << g->stats().calls_str();
}

}  // namespace
}  // namespace llmp::lab
