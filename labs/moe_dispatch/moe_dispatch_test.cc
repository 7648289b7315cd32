// Lab moe_dispatch: the tests. They reach the code only through moe_dispatch.h, so this one file
// checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/moe_dispatch:student_test).
//
// What is checked, and where each expected value comes from:
//  - routing (no communication, the same on every rank): probability tables written by hand, with
//    the experts, gates and slots worked out by hand in the comments beside them: three first
//    choices of one group on an expert of capacity 2 (the third in token order is dropped, and
//    the next group starts empty); k = 2 where placing each token's second choice before the next
//    token's first choice would drop a first choice; gates p_e1 (k = 1) and p_ej / Σ p (k ≥ 2),
//    ties to the lower index;
//  - dispatch/combine with a routing built by hand from a formula every rank knows, x holding
//    small integers (100·rank + 10·t + c) and gates that are sums of powers of two, and expert e
//    being x -> (e+1)·x + e: out[t] = Σ_{kept j} g_j·((e_j+1)·x[t] + e_j) holds exactly, a token
//    with no kept assignment gives 0, and the rows each expert receives are known row by row
//    (a token of the wrong rank, group or slot shows as a wrong integer);
//  - expert parallelism: ep = world size (E = 4 at ep = 1, 2, 4; E = 6 at ep = 3): the result
//    equals the same routing and computation on a group of one rank over the whole global batch;
//    the experts are called only on their own ranks, once each, with ep·G·cap rows; a group cut
//    from the world with its ranks reversed (group rank != world rank) and E = 2·ep;
//  - traffic: exactly two all_to_alls, 2·(ep-1)/ep·4·E·G·cap·C bytes in all (CommStats);
//  - bad input: k > E, cap < 1, n not divisible by S, E not divisible by ep: std::invalid_argument
//    with one line naming the values.
// A rank left waiting in an all_to_all the others never make ends the test after 60 s (the
// ProcessGroup's watchdog), naming the operation.
//
// Glossary: ep ranks, r rank in the group, n tokens per rank, C channels, E experts, k experts
// per token, S tokens per group, G = n/S, cap slots per expert per group, El = E/ep.
#include "labs/moe_dispatch/moe_dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp {
namespace {

Tensor table(int n, int E, const std::vector<float>& v) {
  Tensor t = Tensor::empty({n, E});
  for (int i = 0; i < n * E; ++i) t.f32()[i] = v[i];
  return t;
}

// "" when every gate is within 1e-6 of `want`, else how many are not and the first three.
std::string gates_off(const TopKRouting& got, const std::vector<double>& want) {
  if (got.gate.size() != want.size() || got.k < 1)
    return std::to_string(got.gate.size()) + " gates, want " + std::to_string(want.size());
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(got.gate[i] - want[i]) <= 1e-6) continue;
    if (++bad <= 3)
      first += "\n    gate of (t, j) = (" + std::to_string(i / got.k) + ", " +
               std::to_string(i % got.k) + ") = " + std::to_string(got.gate[i]) + ", want " +
               std::to_string(want[i]);
  }
  return bad ? std::to_string(bad) + " of " + std::to_string(want.size()) + " wrong" + first : "";
}
// --- routing ---------------------------------------------------------------------------------

TEST(MoeRouting, TheThirdTokenOverCapacityIsDroppedAndTheNextGroupStartsEmpty) {
  // k = 1, E = 3, S = 4, cap = 2, two groups.   first choice, gate   slot
  const std::vector<float> p = {0.2f, 0.7f, 0.1f,  // t0  e1 0.7           e1's slot 0
                                0.1f, 0.5f, 0.4f,  // t1  e1 0.5           e1's slot 1
                                0.6f, 0.3f, 0.1f,  // t2  e0 0.6           e0's slot 0
                                0.3f, 0.4f, 0.3f,  // t3  e1 0.4           dropped: e1 is full
                                0.1f, 0.8f, 0.1f,  // t4  e1 0.8 (group 1) slot 0: a new group
                                0.25f, 0.5f, 0.25f,  // t5  e1 0.5         slot 1
                                0.1f, 0.2f, 0.7f,  // t6  e2 0.7           slot 0
                                0.3f, 0.1f, 0.6f};  // t7 e2 0.6           slot 1
  const TopKRouting r = route_top_k(table(8, 3, p), 1, 4, 2);
  EXPECT_EQ(std::vector<int>({r.n, r.E, r.k, r.S, r.cap}), std::vector<int>({8, 3, 1, 4, 2}))
      << "n, E, k, S, cap";
  EXPECT_EQ(r.expert, std::vector<int>({1, 1, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(r.slot, std::vector<int>({0, 1, 0, -1, 0, 1, 0, 1}))
      << "t3 is e1's third token of group 0 (cap 2): dropped; group 1 starts with empty buffers";
  EXPECT_EQ(gates_off(r, {0.7, 0.5, 0.6, 0.4, 0.8, 0.5, 0.7, 0.6}), "")
      << "k = 1: the gate is p_e1";
}

TEST(MoeRouting, SecondChoicesWaitForEveryFirstChoiceOfTheGroup) {
  // k = 2, E = 3, S = 3, cap = 2.      (e1, e2)  gates renormalised over the two
  const std::vector<float> p = {
      0.5f, 0.3f, 0.2f,    // t0  (0, 1)  0.5/0.8 = 0.625, 0.375
      0.6f, 0.2f, 0.2f,    // t1  (0, 1)  tie e1/e2 -> e1; 0.75, 0.25
      0.25f, 0.5f, 0.25f,  // t2  (1, 0)  tie e0/e2 -> e0; 2/3, 1/3
      0.2f, 0.3f, 0.5f,    // t3  (2, 1)  group 1; 0.625, 0.375
      0.2f, 0.5f, 0.3f,    // t4  (1, 2)  0.625, 0.375
      0.5f, 0.1f, 0.4f};   // t5  (0, 2)  5/9, 4/9
  // Group 0, first choices: t0 -> e0 slot 0, t1 -> e0 slot 1, t2 -> e1 slot 0; then second
  // choices: t0 -> e1 slot 1, t1 -> e1 full: dropped, t2 -> e0 full: dropped. (Token by token, t0
  // and t1 would fill e1 with second choices and t2's FIRST choice would be dropped.)
  // Group 1, first: t3 -> e2 0, t4 -> e1 0, t5 -> e0 0; second: t3 -> e1 1, t4 -> e2 1, t5 -> e2
  // full: dropped.
  const TopKRouting r = route_top_k(table(6, 3, p), 2, 3, 2);
  EXPECT_EQ(r.expert, std::vector<int>({0, 1, 0, 1, 1, 0, 2, 1, 1, 2, 0, 2}));
  EXPECT_EQ(r.slot, std::vector<int>({0, 1, 1, -1, 0, -1, 0, 1, 0, 1, 0, -1}))
      << "GShard's order: all first choices of a group, then its second choices";
  EXPECT_EQ(gates_off(r, {0.625, 0.375, 0.75, 0.25, 2.0 / 3, 1.0 / 3, 0.625, 0.375, 0.625, 0.375,
                          5.0 / 9, 4.0 / 9}),
            "")
      << "k = 2: g_j = p_ej / (p_e1 + p_e2)";
}

TEST(MoeRouting, GatesTopOneIsTheProbabilityTopKRenormalisedTiesToTheLowerIndex) {
  const std::vector<float> p = {0.2f, 0.7f, 0.1f, 0.0f,   // row 0
                                0.4f, 0.1f, 0.4f, 0.1f,   // row 1: ties e0 = e2, e1 = e3
                                0.1f, 0.2f, 0.3f, 0.4f};  // row 2
  const Tensor t = table(3, 4, p);
  const int big = 8;  // cap: nothing is dropped here
  const TopKRouting k1 = route_top_k(t, 1, 3, big);
  EXPECT_EQ(k1.expert, std::vector<int>({1, 0, 3}));
  EXPECT_EQ(gates_off(k1, {0.7, 0.4, 0.4}), "") << "k = 1: g_1 = p_e1, not 1";
  const TopKRouting k2 = route_top_k(t, 2, 3, big);
  EXPECT_EQ(k2.expert, std::vector<int>({1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(gates_off(k2, {7.0 / 9, 2.0 / 9, 0.5, 0.5, 4.0 / 7, 3.0 / 7}), "")
      << "k = 2, renormalised";
  const TopKRouting k3 = route_top_k(t, 3, 3, big);
  EXPECT_EQ(k3.expert, std::vector<int>({1, 0, 2, 0, 2, 1, 3, 2, 1}));
  EXPECT_EQ(gates_off(k3, {0.7, 0.2, 0.1, 4. / 9, 4. / 9, 1. / 9, 4. / 9, 3. / 9, 2. / 9}), "")
      << "k = 3, renormalised over the three";
  EXPECT_EQ(k3.slot, std::vector<int>({0, 1, 2, 0, 0, 1, 0, 1, 2}))
      << "first choices e1, e0, e3 take slot 0 of each; then the second choices e0 (slot 1), e2 "
         "(0), e2 (1); then the third e2 (2), e1 (1), e1 (2)";
}

// --- dispatch and combine, with a routing built by hand ----------------------------------------

std::shared_ptr<ProcessGroup> world() {
  set_comm_timeout(60);  // an all_to_all made on some ranks only: a failure, not a hang
  return ProcessGroup::world();
}

// E = 4 at ep = 1, 2, 4 (the brief's sizes); E = 6 at ep = 3 (4 would not divide).
int experts_for(int ep) { return 4 % ep == 0 ? 4 : 2 * ep; }

// The routing of rank q, known to every rank: n = 8 tokens, S = 4 (G = 2), k = 2, cap = 2.
// Token t (position i = t % 4 in group g = t / 4): e_j = (i + j + q + g) mod E in slot j, so
// within a group the first choices are 4 distinct experts (slot 0) and so are the second choices
// (slot 1). Dropped by hand: every i = 3's second choice, and both choices of t = 6.
// Gates 0.75/0.25 (even i) or 0.625/0.375 (odd i): exact in binary, as is x = 100q + 10t + c.
constexpr int kN = 8, kS = 4, kK = 2, kCap = 2, kC = 3;
TopKRouting hand_routing(int q, int E) {
  TopKRouting r;
  r.n = kN, r.E = E, r.k = kK, r.S = kS, r.cap = kCap;
  for (int t = 0; t < kN; ++t)
    for (int j = 0; j < kK; ++j) {
      const int i = t % kS, g = t / kS;
      r.expert.push_back((i + j + q + g) % E);
      r.gate.push_back(j == 0 ? (i % 2 ? 0.625f : 0.75f) : (i % 2 ? 0.375f : 0.25f));
      r.slot.push_back((i == 3 && j == 1) || t == 6 ? -1 : j);
    }
  return r;
}
float x_of(int q, int t, int c) { return 100.0f * q + 10.0f * t + c; }
Tensor hand_x(int q) {
  Tensor x = Tensor::empty({kN, kC});
  for (int t = 0; t < kN; ++t)
    for (int c = 0; c < kC; ++c) x.f32()[t * kC + c] = x_of(q, t, c);
  return x;
}

// Expert e: x -> (e+1)·x + e, row by row; every call recorded (expert, rows received).
struct ScaleShift {
  std::map<int, std::vector<Tensor>> calls;
  ExpertFn fn() {
    return [this](int e, const Tensor& rows) {
      Tensor copy = Tensor::empty(rows.shape());
      copy.copy_from(rows);
      calls[e].push_back(copy);
      Tensor y = Tensor::empty(rows.shape());
      for (int64_t i = 0; i < rows.numel(); ++i) y.f32()[i] = (e + 1) * rows.f32()[i] + e;
      return y;
    };
  }
};

// out[t] = Σ_{kept j} g_j·((e_j+1)·x[t] + e_j): "" when `out` is that within 1e-6 relative.
std::string combine_error(const Tensor& out, const Tensor& x, const TopKRouting& r) {
  const int C = x.dim(1);
  if (out.shape() != x.shape()) return "out " + out.describe() + ", want x's shape";
  for (int t = 0; t < r.n; ++t)
    for (int c = 0; c < C; ++c) {
      double want = 0;
      for (int j = 0; j < r.k; ++j)
        if (r.slot[t * r.k + j] >= 0) {
          const int e = r.expert[t * r.k + j];
          want += r.gate[t * r.k + j] * ((e + 1.0) * x.f32()[t * C + c] + e);
        }
      const double got = out.f32()[t * C + c];
      if (std::fabs(got - want) > 1e-6 * std::max(1.0, std::fabs(want)))
        return "out[" + std::to_string(t) + "][" + std::to_string(c) + "] = " +
               std::to_string(got) + ", want Σ_kept g·((e+1)·x + e) = " + std::to_string(want);
    }
  return "";
}

class MoeDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    group = world();  // a fresh group: its CommStats start at zero
    ep = group->size(), r = group->rank(), E = experts_for(ep);
  }
  std::shared_ptr<ProcessGroup> group;
  int ep = 1, r = 0, E = 4;
};

TEST_F(MoeDispatch, CombineIsTheGateWeightedSumOfTheKeptExpertOutputs) {
  const TopKRouting rt = hand_routing(r, E);
  const Tensor x = hand_x(r);
  ScaleShift experts;
  const Tensor out = moe_dispatch_combine(*group, x, rt, experts.fn());
  EXPECT_EQ(combine_error(out, x, rt), "") << "ep = " << ep << ", E = " << E << ", rank " << r;
  for (int c = 0; c < kC; ++c)
    EXPECT_EQ(out.f32()[6 * kC + c], 0.0f) << "token 6 has no kept assignment: its output is 0";
}

TEST_F(MoeDispatch, EachHeldExpertIsCalledOnceWithTheRowsDispatchedToIt) {
  const TopKRouting rt = hand_routing(r, E);
  ScaleShift experts;
  moe_dispatch_combine(*group, hand_x(r), rt, experts.fn());
  const int El = E / ep, G = kN / kS;
  ASSERT_EQ(static_cast<int>(experts.calls.size()), El)
      << "rank " << r << " of " << ep << " holds experts [" << r * El << ", " << (r + 1) * El
      << ") and must call each once, and no other; first called: "
      << (experts.calls.empty() ? -1 : experts.calls.begin()->first);
  for (int e = r * El; e < (r + 1) * El; ++e) {
    ASSERT_EQ(experts.calls.count(e), 1u) << "expert " << e << " is held by rank " << r;
    ASSERT_EQ(experts.calls[e].size(), 1u) << "expert " << e << ": one call over all its rows";
    const Tensor& rows = experts.calls[e][0];
    ASSERT_EQ(rows.shape(), std::vector<int64_t>({ep * G * kCap, kC}))
        << "expert " << e << ": ep·G·cap rows of C, every slot of every rank's buffer";
    // Row (i, g, s): rank i's token t of group g with e_j = e in slot s = j, or zeros.
    for (int i = 0; i < ep; ++i) {
      const TopKRouting ri = hand_routing(i, E);
      for (int g = 0; g < G; ++g)
        for (int s = 0; s < kCap; ++s) {
          int from = -1;
          for (int t = g * kS; t < (g + 1) * kS; ++t)
            if (ri.expert[t * kK + s] == e && ri.slot[t * kK + s] == s) from = t;
          for (int c = 0; c < kC; ++c)
            EXPECT_EQ(rows.f32()[((i * G + g) * kCap + s) * kC + c],
                      from < 0 ? 0.0f : x_of(i, from, c))
                << "expert " << e << ", row from rank " << i << ", group " << g << ", slot " << s
                << (from < 0 ? ": an empty slot is a zero row" : ": want token ")
                << (from < 0 ? "" : std::to_string(from) + " of rank " + std::to_string(i));
        }
    }
  }
}

TEST_F(MoeDispatch, SendsTwoAllToAllsOfEGCapCFloats) {
  moe_dispatch_combine(*group, hand_x(r), hand_routing(r, E), ScaleShift().fn());
  const int G = kN / kS;
  const double want = 2.0 * (ep - 1) * 4 * E * G * kCap * kC / ep;  // 2·(ep-1)/ep·4·E·G·cap·C
  const auto& st = group->stats();
  const double a2a = st.bytes.count("all_to_all") ? st.bytes.at("all_to_all") : 0.0;
  EXPECT_DOUBLE_EQ(a2a, want) << "ep = " << ep << ": two all_to_alls of E·G·cap·C floats";
  EXPECT_DOUBLE_EQ(st.total_bytes(), want) << "no communication besides the two all_to_alls";
  EXPECT_EQ(st.calls.count("all_to_all") ? st.calls.at("all_to_all") : 0, 2)
      << "one all_to_all to the experts, one back";
}

// The global batch routed on every rank's slice vs on a group of one rank holding it all.
TEST_F(MoeDispatch, MatchesTheSameComputationOnOneRank) {
  const int T = 6, B = 2, n = B * T, C = 4, N = ep * n;  // tokens per rank, in the global batch
  std::mt19937 gen(12);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(N * E), xs(N * C);
  for (int t = 0; t < N; ++t) {  // a random probability vector per token
    float sum = 0;
    for (int e = 0; e < E; ++e) sum += (p[t * E + e] = u(gen) * u(gen));
    for (int e = 0; e < E; ++e) p[t * E + e] /= sum;
  }
  for (float& v : xs) v = 2 * u(gen) - 1;
  auto one = group->split(r, 0);  // every rank alone: the single-rank computation
  for (int k : {1, 2}) {
    const int cap = (k * T + 2 * E - 1) / (2 * E);  // ⌈k·T·c/E⌉ with c = 0.5: drops tokens
    const TopKRouting all = route_top_k(table(N, E, p), k, T, cap);
    int dropped = 0;
    for (int s : all.slot) dropped += s < 0;
    ASSERT_GT(dropped, 0) << "the test data must drop some assignments (k = " << k << ")";
    ASSERT_LT(dropped, N * k) << "and keep some: " << dropped << " of " << N * k << " dropped";
    const Tensor X = table(N, C, xs);
    const Tensor want = moe_dispatch_combine(*one, X, all, ScaleShift().fn());
    EXPECT_EQ(combine_error(want, X, all), "") << "one rank, k = " << k;
    const Tensor mine = table(n, E, std::vector<float>(p.begin() + r * n * E, p.end()));
    const Tensor x = table(n, C, std::vector<float>(xs.begin() + r * n * C, xs.end()));
    const Tensor out = moe_dispatch_combine(*group, x, route_top_k(mine, k, T, cap),
                                            ScaleShift().fn());
    // No ASSERT here: a rank that left the loop early would leave the others in the all_to_all.
    int worst = 0;
    for (int i = 0; i < n * C; ++i)
      if (std::fabs(out.f32()[i] - want.f32()[r * n * C + i]) >
          std::fabs(out.f32()[worst] - want.f32()[r * n * C + worst]))
        worst = i;
    EXPECT_NEAR(out.f32()[worst], want.f32()[r * n * C + worst], 1e-6)
        << "k = " << k << ", ep = " << ep << ", rank " << r << ": element " << worst
        << " of this rank's slice differs most from the single-rank result";
  }
}

// A group cut from the world with its ranks reversed, E = max(4, 2·ep): two experts per rank
// from ep = 2 on (the hand routing needs E ≥ 4: a group's 4 first choices are distinct experts).
TEST_F(MoeDispatch, ASubGroupWithReorderedRanksAndSeveralExpertsPerRank) {
  const int w = group->rank();
  auto sub = group->split(0, -w);
  const int q = sub->rank(), E2 = std::max(4, 2 * sub->size()), El = E2 / sub->size();
  const TopKRouting rt = hand_routing(q, E2);
  const Tensor x = hand_x(q);
  ScaleShift experts;
  const Tensor out = moe_dispatch_combine(*sub, x, rt, experts.fn());
  SCOPED_TRACE("E = " + std::to_string(E2) + ", group rank " + std::to_string(q) +
               " (world rank " + std::to_string(w) + ")");
  EXPECT_EQ(combine_error(out, x, rt), "");
  EXPECT_EQ(static_cast<int>(experts.calls.size()), El) << "experts called on this rank";
  for (int e = q * El; e < (q + 1) * El; ++e)
    EXPECT_EQ(experts.calls.count(e), 1u) << "group rank " << q << " holds expert " << e;
  EXPECT_EQ(group->stats().bytes.count("all_to_all"), 0u)
      << "an all_to_all on the world, not on the group passed";
}

// --- bad input --------------------------------------------------------------------------------

// what() of the std::invalid_argument that f throws: one line holding every one of `values`.
template <typename F>
void expect_invalid(F f, const std::vector<std::string>& values, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no std::invalid_argument thrown";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << what << ": one line, got \"" << m << "\"";
    for (const std::string& v : values)
      EXPECT_NE(m.find(v), std::string::npos) << what << ": \"" << m << "\" does not name " << v;
  }
}

TEST_F(MoeDispatch, BadInputThrowsOneLineNamingTheValues) {
  const Tensor p = table(10, 3, std::vector<float>(30, 1.0f / 3));
  expect_invalid([&] { route_top_k(p, 4, 5, 2); }, {"4", "3"}, "k = 4 > E = 3");
  expect_invalid([&] { route_top_k(p, 1, 5, -2); }, {"-2"}, "capacity -2");
  expect_invalid([&] { route_top_k(p, 2, 4, 2); }, {"10", "4"}, "n = 10 tokens, S = 4");
  if (ep > 1) {  // every rank throws, before any communication
    const int bad_E = ep + 1;
    TopKRouting rt;
    rt.n = 2, rt.E = bad_E, rt.k = 1, rt.S = 2, rt.cap = 1;
    rt.expert = {0, 1}, rt.gate = {1.0f, 1.0f}, rt.slot = {0, 0};
    const Tensor x = table(2, 3, std::vector<float>(6, 1.0f));
    expect_invalid([&] { moe_dispatch_combine(*group, x, rt, ScaleShift().fn()); },
                   {std::to_string(bad_E), std::to_string(ep)}, "E = ep + 1 experts on ep ranks");
  }
}

}  // namespace
}  // namespace llmp
