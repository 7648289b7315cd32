// Lab ring_attention: the tests. They reach the code only through ring_attention.h, so this one
// file checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/ring_attention:student_test).
//
// What is checked, and why each expected value holds:
//  - random q, k, v in [-1, 1] against a dense softmax in double precision over the whole
//    sequence (each rank draws the whole sequence, seeded, and keeps its rows): causal and not,
//    Tl from 1 to 16, hs from 1 to 64. The f32 online softmax differs from it by rounding only:
//    within 2e-5 (out) and 2e-5·(1 + |lse|) (lse);
//  - the running max moving at every ring step (each block arriving holds larger scores than
//    every block before it): an implementation that forgets to rescale l and the accumulator by
//    exp(m_old − m_new) is wrong there by far more than rounding;
//  - scores of ±200 (integer q and k: the scores are exact in f32), where exp(s) alone overflows:
//    the softmax must subtract the running max;
//  - closed forms with q = 0 (uniform attention over the keys a row sees) and v_j = j at global
//    position j: out_g = g/2 and lse_g = ln(g+1) causal, (T−1)/2 and ln T otherwise. They catch a
//    mask taken in local instead of global positions, a block attributed to the wrong rank, and
//    blocks after the row's position not masked out (or a row they hide entirely not left as it
//    was); a sub-group with reversed ranks checks that positions come from the group's ranks;
//  - traffic: p − 1 sends of 8·Tl·hs bytes and p − 1 receives on every rank, nothing else (no
//    all_gather, no other collective), (p − 1)·p·8·Tl·hs over all ranks;
//  - 1 MiB blocks finish: a blocking send on every rank deadlocks once messages are too large for
//    MPI to buffer. A watchdog ends a test still running after kDeadlineS with that hint.
//
// Glossary: p ranks, r this rank, Tl rows per rank, T = p·Tl, hs head size, g global position.
#include "labs/ring_attention/ring_attention.h"
#include "common/testing/deadline.h"
#include "common/testing/max_or_nan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace llmp {
namespace {

constexpr unsigned kDeadlineS = 60;  // a test still running then ends the job with a hint

// A whole sequence's q, k, v: (T, hs) each, row-major.
struct Sequence {
  int64_t T = 0, hs = 0;
  std::vector<float> q, k, v;
};

using Fill = std::function<float(int64_t j, int64_t c)>;
Sequence make_sequence(int64_t T, int64_t hs, const Fill& q, const Fill& k, const Fill& v) {
  Sequence s{T, hs, std::vector<float>(T * hs), std::vector<float>(T * hs),
             std::vector<float>(T * hs)};
  for (int64_t j = 0; j < T; ++j)
    for (int64_t c = 0; c < hs; ++c)
      s.q[j * hs + c] = q(j, c), s.k[j * hs + c] = k(j, c), s.v[j * hs + c] = v(j, c);
  return s;
}

Sequence random_sequence(int64_t T, int64_t hs, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto draw = [&](int64_t, int64_t) { return u(gen); };
  return make_sequence(T, hs, draw, draw, draw);
}

// Rows [r·Tl, (r+1)·Tl) of one of the sequence's (T, hs) arrays, as a host tensor.
Tensor rows_of(const std::vector<float>& all, int r, int64_t Tl, int64_t hs) {
  Tensor t = Tensor::empty({Tl, hs});
  std::memcpy(t.f32(), all.data() + r * Tl * hs, sizeof(float) * Tl * hs);
  return t;
}

// The dense softmax in double of global row g: out (hs) and lse, over the keys it sees.
void dense_row(const Sequence& s, int64_t g, bool causal, double* out, double* lse) {
  const int64_t seen = causal ? g + 1 : s.T;
  std::vector<double> sc(seen);
  double mx = -INFINITY;
  for (int64_t j = 0; j < seen; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < s.hs; ++c) dot += double(s.q[g * s.hs + c]) * s.k[j * s.hs + c];
    sc[j] = dot / std::sqrt(double(s.hs));
    mx = std::max(mx, sc[j]);
  }
  double l = 0;
  for (int64_t c = 0; c < s.hs; ++c) out[c] = 0;
  for (int64_t j = 0; j < seen; ++j) {
    const double e = std::exp(sc[j] - mx);
    l += e;
    for (int64_t c = 0; c < s.hs; ++c) out[c] += e * s.v[j * s.hs + c];
  }
  for (int64_t c = 0; c < s.hs; ++c) out[c] /= l;
  *lse = mx + std::log(l);
}

// The worst differences of this rank's out and lse from what `want` gives for row g: out's
// absolute, lse's relative to 1 + |lse|; NaN kept (max_or_nan), so a NaN fails every bound.
struct Errors {
  double out = 0, lse = 0;
};
using Want = std::function<void(int64_t g, double* out, double* lse)>;
Errors errors(const Tensor& out, const Tensor& lse, int r, const Want& want) {
  const int64_t Tl = out.dim(0), hs = out.dim(1);
  Errors e;
  std::vector<double> w(hs);
  for (int64_t i = 0; i < Tl; ++i) {
    double wl = 0;
    want(r * Tl + i, w.data(), &wl);
    for (int64_t c = 0; c < hs; ++c)
      e.out = testing::max_or_nan(e.out, std::fabs(out.f32()[i * hs + c] - w[c]));
    e.lse = testing::max_or_nan(e.lse, std::fabs(lse.f32()[i] - wl) / (1 + std::fabs(wl)));
  }
  return e;
}

constexpr double kOutBound = 2e-5, kLseBound = 2e-5;

class RingAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    group = ProcessGroup::world();    // a fresh group: its CommStats start at zero
    checker = ProcessGroup::world();  // the tests' own collectives, kept out of group's stats
    p = group->size();
    r = group->rank();
    testing::arm_deadline(
        kDeadlineS, r,
        "If every rank first sends (blocking) and then receives, each waits for a neighbour that "
        "is itself waiting in its send, once the block is too large for MPI to buffer "
        "(labs/ring_all_reduce/README.md, \"Why not just send, then receive?\").");
  }
  void TearDown() override { testing::disarm_deadline(); }

  // Runs ring_attention_forward on this rank's rows of `s` over `g` (whose rank q holds rows
  // [q·Tl, (q+1)·Tl)) and returns its errors against `want`.
  Errors run(ProcessGroup& g, const Sequence& s, bool causal, const Want& want) {
    const int q = g.rank();
    const int64_t Tl = s.T / g.size(), hs = s.hs;
    Tensor out = Tensor::empty({Tl, hs}), lse = Tensor::empty({Tl});
    ring_attention_forward(g, rows_of(s.q, q, Tl, hs), rows_of(s.k, q, Tl, hs),
                           rows_of(s.v, q, Tl, hs), causal, out, lse);
    return errors(out, lse, q, want);
  }
  Want dense(const Sequence& s, bool causal) {
    return [&s, causal](int64_t g, double* out, double* lse) { dense_row(s, g, causal, out, lse); };
  }

  std::shared_ptr<ProcessGroup> group, checker;
  int p = 1, r = 0;
};

TEST_F(RingAttention, MatchesDenseSoftmaxAttention) {
  // One report for every case (every rank runs every case: a rank that stopped early would leave
  // its neighbours waiting in the ring).
  std::ostringstream off;
  double worst_out = 0, worst_lse = 0;
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {3, 8}, {16, 16}, {5, 64}};
  for (bool causal : {false, true})
    for (auto [Tl, hs] : sizes) {
      const Sequence s = random_sequence(p * Tl, hs, 7 + Tl * 100 + hs);
      const Errors e = run(*group, s, causal, dense(s, causal));
      worst_out = testing::max_or_nan(worst_out, e.out);
      worst_lse = testing::max_or_nan(worst_lse, e.lse);
      if (!(e.out <= kOutBound && e.lse <= kLseBound))
        off << "\n  " << (causal ? "causal" : "full") << ", Tl = " << Tl << ", hs = " << hs
            << ": max |out − dense| = " << e.out << " (bound " << kOutBound
            << "), max |lse − dense| / (1 + |lse|) = " << e.lse << " (bound " << kLseBound << ")";
    }
  if (!off.str().empty())
    ADD_FAILURE() << "p = " << p << ", rank " << r << ", random q, k, v in [-1, 1]:" << off.str();
  if (r == 0)
    std::printf("p = %d: largest differences from the dense double softmax: out %.3g, lse %.3g\n",
                p, worst_out, worst_lse);
}

TEST_F(RingAttention, RescalesWhenTheRunningMaxMovesAtEveryStep) {
  // hs = 1, q = 1, k_j = (T − j)/4: the scores fall with the key's position, and rank r receives
  // the blocks of ranks r, r−1, r−2, ...: each block arriving holds larger scores than all before
  // it (after the wrap to rank p−1 they fall again). Weights e^{(T−j)/4} span e^{T/4}: fine in f32.
  const int64_t Tl = 6, T = p * Tl;
  const Sequence s = make_sequence(
      T, 1, [](int64_t, int64_t) { return 1.0f; },
      [&](int64_t j, int64_t) { return static_cast<float>(T - j) / 4; },
      [](int64_t j, int64_t) { return static_cast<float>(j % 5) - 2; });
  for (bool causal : {false, true}) {
    const Errors e = run(*group, s, causal, dense(s, causal));
    EXPECT_LE(e.out, kOutBound) << (causal ? "causal" : "full") << ": out differs from the dense "
                                << "softmax. Does each new block's max rescale l and the "
                                << "accumulator by exp(m_old − m_new)?";
    EXPECT_LE(e.lse, kLseBound) << (causal ? "causal" : "full") << ": lse differs";
  }
}

TEST_F(RingAttention, ScoresOfHundredsDoNotOverflow) {
  // Integer q and k in [-10, 10], hs = 4: every score q·k/2 is an integer or half-integer of at
  // most 200, exact in f32; exp(200) is +inf in f32, so the softmax must subtract the max.
  const int64_t Tl = 8, hs = 4;
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> d(-10, 10);
  auto integer = [&](int64_t, int64_t) { return static_cast<float>(d(gen)); };
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const Sequence s =
      make_sequence(p * Tl, hs, integer, integer, [&](int64_t, int64_t) { return u(gen); });
  for (bool causal : {false, true}) {
    const Errors e = run(*group, s, causal, dense(s, causal));
    EXPECT_LE(e.out, kOutBound) << (causal ? "causal" : "full") << ": scores up to ±200";
    EXPECT_LE(e.lse, kLseBound) << (causal ? "causal" : "full") << ": scores up to ±200";
  }
}

// q = 0: every key a row sees has weight 1/(keys seen). With v_j = j (every channel):
// out_g = mean of 0..g = g/2 and lse_g = ln(g + 1) causal, (T − 1)/2 and ln T otherwise.
Sequence uniform_sequence(int64_t T, int64_t hs) {
  return make_sequence(
      T, hs, [](int64_t, int64_t) { return 0.0f; },
      [](int64_t j, int64_t c) { return static_cast<float>((j * 7 + c) % 13) / 13; },
      [](int64_t j, int64_t) { return static_cast<float>(j); });
}
Want uniform_want(int64_t T, int64_t hs, bool causal) {
  return [=](int64_t g, double* out, double* lse) {
    const int64_t seen = causal ? g + 1 : T;
    for (int64_t c = 0; c < hs; ++c) out[c] = (seen - 1) / 2.0;
    *lse = std::log(double(seen));
  };
}

TEST_F(RingAttention, CausalRowsSeeExactlyTheKeysAtOrBeforeTheirGlobalPosition) {
  const int64_t Tl = 5, hs = 3, T = p * Tl;
  const Sequence s = uniform_sequence(T, hs);
  for (bool causal : {false, true}) {
    const Errors e = run(*group, s, causal, uniform_want(T, hs, causal));
    EXPECT_LE(e.out, kOutBound * T)
        << (causal ? "causal" : "full") << ", q = 0, v_j = j: out_g must be "
        << (causal ? "g/2 (the mean of the keys at global positions 0..g: the blocks of later "
                     "ranks hidden, the diagonal block masked by global position)"
                   : "(T−1)/2");
    EXPECT_LE(e.lse, kLseBound) << (causal ? "causal: lse_g must be ln(g+1)" : "full: ln T");
  }
}

TEST_F(RingAttention, PositionsComeFromTheGroupsRanks) {
  // Ranks numbered in reverse (key = −r), and from 4 ranks on two groups (even and odd world
  // ranks): group rank q holds rows [q·Tl, (q+1)·Tl).
  std::shared_ptr<ProcessGroup> sub = group->split(p >= 4 ? r % 2 : 0, -r);
  const int64_t Tl = 4, hs = 2, T = sub->size() * Tl;
  const Sequence s = uniform_sequence(T, hs);
  const Errors e = run(*sub, s, /*causal=*/true, uniform_want(T, hs, true));
  EXPECT_LE(e.out, kOutBound * T) << "a sub-group of " << sub->size() << " ranks (its rank "
                                  << sub->rank() << ", world rank " << r << ")";
  EXPECT_LE(e.lse, kLseBound) << "a sub-group: lse";
  EXPECT_EQ(group->stats().calls_of("send"), 0) << "the world group was not the one passed";
}

TEST_F(RingAttention, SendsPMinusOneBlocksAndUsesNoCollective) {
  const int64_t Tl = 7, hs = 5;
  const Sequence s = random_sequence(p * Tl, hs, 3);
  run(*group, s, /*causal=*/true, dense(s, true));
  const double block = 8.0 * Tl * hs;  // K and V: 2·Tl·hs floats
  EXPECT_EQ(group->stats().bytes_of("send"), (p - 1) * block)
      << "bytes sent: want p − 1 = " << p - 1 << " blocks of 8·Tl·hs = " << block << " bytes";
  EXPECT_EQ(group->stats().calls_of("send"), p - 1) << "sends (isend counts as send)";
  EXPECT_EQ(group->stats().calls_of("recv"), p - 1) << "receives (irecv counts as recv)";
  for (const auto& kv : group->stats().calls)
    EXPECT_TRUE(kv.first == "send" || kv.first == "recv")
        << "ring_attention_forward called group." << kv.first << " (" << kv.second
        << " times): only send/recv/isend/irecv are allowed (an all_gather would hold every "
           "rank's K and V at once)";
  Tensor total = Tensor::empty({1});
  total.f32()[0] = static_cast<float>(group->stats().bytes_of("send"));
  checker->all_reduce(total);
  EXPECT_EQ(total.f32()[0], (p - 1) * p * block) << "bytes sent by all ranks together";
}

TEST_F(RingAttention, OneMiBBlocksFinishWithoutDeadlock) {
  // K|V blocks of 2·512·256·4 bytes = 1 MiB: far above what MPI sends eagerly, so a send
  // completes only once its receive is posted.
  const int64_t Tl = 512, hs = 256, T = p * Tl;
  const Sequence s = uniform_sequence(T, hs);
  const Errors e = run(*group, s, /*causal=*/true, uniform_want(T, hs, true));
  EXPECT_LE(e.out, kOutBound * T) << "Tl = 512, hs = 256, q = 0, v_j = j: out_g must be g/2";
  EXPECT_LE(e.lse, kLseBound) << "lse_g must be ln(g+1)";
}

}  // namespace
}  // namespace llmp
