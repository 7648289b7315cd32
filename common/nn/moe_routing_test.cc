// Unit tests of the router (moe_routing.h): expert capacity, top-k with GShard's slot order,
// gates, the Switch load-balancing loss and route_backward, on hand-built logits tables.
//
// Probabilities are given through their logarithms: logits z_e = log p_e make softmax(z) = p
// exactly (Σ p = 1), so every expected gate and loss below is worked out by hand from p.
//
//   cap   = ⌈k·S·c/E⌉ (at least 1)                       GShard §2.2
//   gates k = 1: g = p_{e1};  k ≥ 2: g_j = p_{ej} / Σ_i p_{ei}
//   aux_g = E·Σ_e f_e·P_e,  f_e = #{t: e1(t) = e}/S,  P_e = Σ_t p_{t,e}/S    Switch eq. 4-6
//   slots: all first choices of a group in token order, then all second choices, ...
//
// route_backward is checked against central finite differences of
//   L = Σ_{t,j} w_{t,j}·g_{t,j} + a·Σ_g aux_g
// evaluated through route() itself, at entries where the ±ε step leaves the routing unchanged.
//
// Glossary: n tokens, E experts, k experts per token, S tokens per group, G groups, c capacity
// factor, cap slots per expert per group, p probabilities, g gates, f_e and P_e as above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nn/init.h"
#include "common/nn/moe_routing.h"
#include "common/testing/files.h"

namespace llmp {
namespace {

/// Logits (rows of E) whose softmax is the given probability table.
std::vector<float> log_probs(const std::vector<std::vector<double>>& p) {
  std::vector<float> z;
  for (const auto& row : p)
    for (double v : row) z.push_back(static_cast<float>(std::log(v)));
  return z;
}

using testing::error_of;  // common/testing/files.h

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---- expert capacity ------------------------------------------------------------------------

TEST(ExpertCapacity, HandWorked) {
  EXPECT_EQ(expert_capacity(1, 16, 1.25, 8), 3);  // ⌈1·16·1.25/8⌉ = ⌈2.5⌉
  EXPECT_EQ(expert_capacity(2, 16, 1.0, 4), 8);   // ⌈2·16/4⌉ = 8, exact
  EXPECT_EQ(expert_capacity(2, 8, 0.5, 4), 2);    // ⌈2·8·0.5/4⌉ = 2
  EXPECT_EQ(expert_capacity(1, 1, 0.01, 64), 1);  // ⌈1/6400⌉ = 1: never 0 slots
  EXPECT_EQ(expert_capacity(3, 5, 1.0, 5), 3);    // ⌈3·5/5⌉ = 3
}

TEST(ExpertCapacity, ErrorsNameTheValues) {
  const std::string k_over_e = error_of([] { expert_capacity(3, 16, 1.0, 2); });
  EXPECT_TRUE(has(k_over_e, "3") && has(k_over_e, "2")) << k_over_e;
  const std::string c_zero = error_of([] { expert_capacity(1, 16, 0.0, 4); });
  EXPECT_TRUE(has(c_zero, "capacity factor 0")) << c_zero;
  const std::string c_neg = error_of([] { expert_capacity(1, 16, -0.5, 4); });
  EXPECT_TRUE(has(c_neg, "-0.5")) << c_neg;
  const std::string e_zero = error_of([] { expert_capacity(1, 16, 1.0, 0); });
  EXPECT_TRUE(has(e_zero, "experts=0")) << e_zero;
  const std::string k_zero = error_of([] { expert_capacity(0, 16, 1.0, 4); });
  EXPECT_TRUE(has(k_zero, "top_k=0")) << k_zero;
  const std::string s_zero = error_of([] { expert_capacity(1, 0, 1.0, 4); });
  EXPECT_TRUE(has(s_zero, "0")) << s_zero;
  for (const std::string& m : {k_over_e, c_zero, c_neg, e_zero, k_zero, s_zero}) {
    EXPECT_FALSE(m.empty());
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
}

TEST(RoutingError, EmptyWhenValidElseOneLine) {
  EXPECT_EQ(routing_error(8, 1, 1.25), "");
  EXPECT_EQ(routing_error(4, 4, 0.1), "");
  EXPECT_EQ(routing_error(2, 3, 1.0), "top_k=3 exceeds experts=2");
  EXPECT_EQ(routing_error(4, 1, 0.0), "capacity factor 0 must be > 0");
  EXPECT_TRUE(has(routing_error(0, 1, 1.0), "experts=0"));
  EXPECT_TRUE(has(routing_error(4, 0, 1.0), "top_k=0"));
}

TEST(Route, TokensNotInWholeGroupsThrow) {
  const std::vector<float> z(5 * 2, 0.0f);
  const std::string m = error_of([&] { route(z.data(), 5, 2, 1, 2, 1.0); });
  EXPECT_TRUE(has(m, "5") && has(m, "2")) << m;
}

// ---- top-k, slots, groups ---------------------------------------------------------------------

// k = 1, S = 4, E = 4, c = 2: cap = ⌈1·4·2/4⌉ = 2. Tokens 0, 2 and 3 choose expert 2, token 1
// expert 0: token 3, the third chooser of expert 2 in token order, is dropped.
TEST(Route, ThirdChooserOverCapacityIsDropped) {
  const auto z = log_probs({{0.1, 0.1, 0.7, 0.1},
                            {0.6, 0.2, 0.1, 0.1},
                            {0.2, 0.1, 0.5, 0.2},
                            {0.1, 0.3, 0.4, 0.2}});
  const Routing r = route(z.data(), 4, 4, 1, 4, 2.0);
  EXPECT_EQ(r.cap, 2);
  EXPECT_EQ(r.expert, (std::vector<int>{2, 0, 2, 2}));
  EXPECT_EQ(r.slot, (std::vector<int>{0, 0, 1, -1}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{1, 0, 3, 0}));
  EXPECT_EQ(r.kept, (std::vector<int64_t>{1, 0, 2, 0}));
  EXPECT_EQ(r.buffer_row(3, 0), -1);
}

// k = 2, S = 4, E = 4, c = 1: cap = ⌈2·4/4⌉ = 2. Choices (e1, e2): t0 (0,1), t1 (1,2), t2 (2,3),
// t3 (1,3). GShard's order: first choices t0→0 s0, t1→1 s0, t2→2 s0, t3→1 s1 (expert 1 full);
// then second choices t0→1 dropped, t1→2 s1, t2→3 s0, t3→3 s1. Slots token by token would
// instead give t0's second choice expert 1's last slot and drop t3's FIRST choice.
TEST(Route, SecondChoicesWaitForEveryFirstChoiceOfTheGroup) {
  const auto z = log_probs({{0.6, 0.3, 0.05, 0.05},
                            {0.05, 0.6, 0.3, 0.05},
                            {0.05, 0.05, 0.6, 0.3},
                            {0.05, 0.6, 0.05, 0.3}});
  const Routing r = route(z.data(), 4, 4, 2, 4, 1.0);
  EXPECT_EQ(r.cap, 2);
  EXPECT_EQ(r.expert, (std::vector<int>{0, 1, 1, 2, 2, 3, 1, 3}));
  EXPECT_EQ(r.slot, (std::vector<int>{0, -1, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{1, 3, 2, 2}));
  EXPECT_EQ(r.kept, (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_GE(r.buffer_row(3, 0), 0) << "token 3's first choice must get expert 1's last slot";
  EXPECT_EQ(r.buffer_row(0, 1), -1) << "token 0's second choice comes after every first choice";
}

// Two groups of S = 3, E = 2, k = 1, c = 1: cap = ⌈3/2⌉ = 2. All six tokens choose expert 0:
// each group keeps its first two (slots 0, 1) and drops its third; slots restart per group.
// buffer_row = (e·G + g)·cap + slot with G = 2.
TEST(Route, GroupsAreIndependent) {
  const auto z = log_probs({{0.9, 0.1}, {0.8, 0.2}, {0.7, 0.3},
                            {0.6, 0.4}, {0.95, 0.05}, {0.55, 0.45}});
  const Routing r = route(z.data(), 6, 2, 1, 3, 1.0);
  EXPECT_EQ(r.groups(), 2);
  EXPECT_EQ(r.cap, 2);
  EXPECT_EQ(r.slot, (std::vector<int>{0, 1, -1, 0, 1, -1}));
  EXPECT_EQ(r.buffer_row(0, 0), 0);  // (0·2 + 0)·2 + 0
  EXPECT_EQ(r.buffer_row(1, 0), 1);
  EXPECT_EQ(r.buffer_row(3, 0), 2);  // (0·2 + 1)·2 + 0
  EXPECT_EQ(r.buffer_row(4, 0), 3);
  EXPECT_EQ(r.kept, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{6, 0}));
  // aux per group = 2·(1·P_0 + 0·P_1): P_0 = 2.4/3 and 2.1/3; Σ = 2·4.5/3 = 3.
  EXPECT_NEAR(r.aux_sum, 3.0, 1e-6);
}

// buffer_row of every kept assignment is ((e·G + g)·cap + slot), and no two coincide: the
// dispatch buffer (E,G,cap) holds each kept assignment once. Random logits, k = 2, G = 3.
TEST(Route, BufferRowsOfKeptAssignmentsAreDistinct) {
  const int E = 4, k = 2, S = 8, G = 3, n = S * G;
  std::vector<float> z(n * E);
  for (int i = 0; i < n * E; ++i) z[i] = static_cast<float>(4 * (uniform_at(11, i) - 0.5));
  const Routing r = route(z.data(), n, E, k, S, 1.0);
  ASSERT_EQ(r.cap, 4);  // ⌈2·8/4⌉
  std::set<int64_t> rows;
  int kept = 0;
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int s = r.slot[t * k + j];
      if (s < 0) {
        EXPECT_EQ(r.buffer_row(t, j), -1);
        continue;
      }
      ++kept;
      EXPECT_LT(s, r.cap);
      EXPECT_EQ(r.buffer_row(t, j), (int64_t{r.expert[t * k + j]} * G + t / S) * r.cap + s);
      rows.insert(r.buffer_row(t, j));
    }
  EXPECT_EQ(static_cast<int>(rows.size()), kept) << "two assignments share a buffer row";
  int64_t kept_sum = 0, routed_sum = 0;
  for (int e = 0; e < E; ++e) kept_sum += r.kept[e], routed_sum += r.routed[e];
  EXPECT_EQ(kept_sum, kept);
  EXPECT_EQ(routed_sum, n * k);
}

// ---- gates -------------------------------------------------------------------------------------

// p = (0.5, 0.3, 0.15, 0.05). k = 1: g = 0.5 (Switch keeps p_{e1}). k = 2: 0.5/0.8, 0.3/0.8.
// k = 3: 0.5/0.95, 0.3/0.95, 0.15/0.95.
TEST(Route, GatesSwitchAndRenormalised) {
  const auto z = log_probs({{0.15, 0.5, 0.05, 0.3}});
  const Routing r1 = route(z.data(), 1, 4, 1, 1, 4.0);
  EXPECT_EQ(r1.expert, (std::vector<int>{1}));
  EXPECT_NEAR(r1.gate[0], 0.5, 1e-6);
  const Routing r2 = route(z.data(), 1, 4, 2, 1, 4.0);
  EXPECT_EQ(r2.expert, (std::vector<int>{1, 3}));
  EXPECT_NEAR(r2.gate[0], 0.625, 1e-6);
  EXPECT_NEAR(r2.gate[1], 0.375, 1e-6);
  const Routing r3 = route(z.data(), 1, 4, 3, 1, 4.0);
  EXPECT_EQ(r3.expert, (std::vector<int>{1, 3, 0}));
  EXPECT_NEAR(r3.gate[0], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(r3.gate[1], 0.3 / 0.95, 1e-6);
  EXPECT_NEAR(r3.gate[2], 0.15 / 0.95, 1e-6);
  EXPECT_NEAR(r1.probs[3], 0.3, 1e-6);
}

// Equal probabilities go to the lower expert index, for the first and for later choices.
TEST(Route, TiesGoToTheLowerIndex) {
  const std::vector<float> z = {0.0f, 1.0f, 0.0f, 1.0f,   // e1 = 1, e2 = 3
                                2.0f, 1.0f, 1.0f, 0.0f,   // e1 = 0, e2 = 1
                                0.0f, 0.0f, 0.0f, 0.0f};  // e1 = 0, e2 = 1
  const Routing r = route(z.data(), 3, 4, 2, 3, 4.0);
  EXPECT_EQ(r.expert, (std::vector<int>{1, 3, 0, 1, 0, 1}));
  EXPECT_NEAR(r.gate[0], 0.5, 1e-6);  // a tie renormalises to halves
  EXPECT_NEAR(r.gate[4], 0.5, 1e-6);
}

// ---- load-balancing loss -----------------------------------------------------------------------

TEST(Route, AuxIsOneWhenBalanced) {
  // Uniform probabilities (every token picks expert 0 by the tie rule): E·Σ f_e/E = 1.
  const std::vector<float> uniform(8 * 4, 0.0f);
  EXPECT_NEAR(route(uniform.data(), 8, 4, 1, 8, 1.0).aux_sum, 1.0, 1e-6);
  // Token t prefers expert t (p 0.7, others 0.1): f_e = 1/4, P_e = (0.7 + 3·0.1)/4 = 1/4,
  // aux = 4·4·(1/16) = 1.
  const auto z = log_probs({{0.7, 0.1, 0.1, 0.1},
                            {0.1, 0.7, 0.1, 0.1},
                            {0.1, 0.1, 0.7, 0.1},
                            {0.1, 0.1, 0.1, 0.7}});
  EXPECT_NEAR(route(z.data(), 4, 4, 1, 4, 1.0).aux_sum, 1.0, 1e-6);
}

TEST(Route, AuxNearEWhenAllPickOneExpert) {
  // Every token p = (0.97, 0.01, 0.01, 0.01): f_0 = 1, P_0 = 0.97, aux = 4·0.97 = 3.88.
  const auto z = log_probs({{0.97, 0.01, 0.01, 0.01}, {0.97, 0.01, 0.01, 0.01},
                            {0.97, 0.01, 0.01, 0.01}, {0.97, 0.01, 0.01, 0.01}});
  EXPECT_NEAR(route(z.data(), 4, 4, 1, 4, 1.0).aux_sum, 3.88, 1e-5);
  // The same with k = 2: f counts first choices only, so the value does not change.
  EXPECT_NEAR(route(z.data(), 4, 4, 2, 4, 1.0).aux_sum, 3.88, 1e-5);
}

TEST(Route, AuxHandCase) {
  // E = 2, S = 4: first choices 0, 0, 0, 1: f = (3/4, 1/4); P_0 = (0.9+0.8+0.6+0.3)/4 = 0.65,
  // P_1 = 0.35; aux = 2·(0.75·0.65 + 0.25·0.35) = 1.15. A second group (all expert 1,
  // P_1 = 0.8) adds 2·0.8 = 1.6.
  const auto z = log_probs({{0.9, 0.1}, {0.8, 0.2}, {0.6, 0.4}, {0.3, 0.7},
                            {0.2, 0.8}, {0.1, 0.9}, {0.3, 0.7}, {0.2, 0.8}});
  EXPECT_NEAR(route(z.data(), 4, 2, 1, 4, 1.0).aux_sum, 1.15, 1e-6);
  EXPECT_NEAR(route(z.data(), 8, 2, 1, 4, 1.0).aux_sum, 1.15 + 1.6, 1e-6);
}

// ---- route_backward ----------------------------------------------------------------------------

// k = 1, no aux loss, dgate = 1 on token 0: L = p_{e1}, so dz_e = p_{e1}·(1[e = e1] − p_e).
TEST(RouteBackward, SwitchGateClosedForm) {
  const auto z = log_probs({{0.2, 0.5, 0.3}});
  const Routing r = route(z.data(), 1, 3, 1, 1, 3.0);
  const float dgate = 1.0f;
  std::vector<float> dz(3);
  route_backward(r, &dgate, 0.0, dz.data());
  EXPECT_NEAR(dz[0], 0.5 * (0 - 0.2), 1e-6);
  EXPECT_NEAR(dz[1], 0.5 * (1 - 0.5), 1e-6);
  EXPECT_NEAR(dz[2], 0.5 * (0 - 0.3), 1e-6);
}

struct FdCase {
  int k, E, S, G;
  double c, a;
  double zw = 0;  // the z-loss's weight per token
};

class RouteBackwardFd : public ::testing::TestWithParam<FdCase> {};

// L = Σ w·g + a·Σ_g aux_g + zw·Σ_t lse_t² through route(), central differences at ε = 1e-3 in the logits, sums in
// double; entries whose ±ε step changes any expert choice or slot are skipped (no derivative).
TEST_P(RouteBackwardFd, MatchesCentralDifferences) {
  const FdCase q = GetParam();
  const int n = q.S * q.G;
  std::vector<float> z(n * q.E), w(n * q.k);
  for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(3 * (uniform_at(21, i) - 0.5));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(2 * (uniform_at(22, i) - 0.5));
  const Routing base = route(z.data(), n, q.E, q.k, q.S, q.c);
  auto loss = [&](const Routing& r) {
    double L = q.a * r.aux_sum + q.zw * r.z_sum;
    for (size_t i = 0; i < w.size(); ++i) L += static_cast<double>(w[i]) * r.gate[i];
    return L;
  };
  std::vector<float> dz(n * q.E);
  route_backward(base, w.data(), q.a, dz.data(), q.zw);
  const float eps = 1e-3f;
  int checked = 0;
  double worst = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const float z0 = z[i];
    z[i] = z0 + eps;
    const Routing up = route(z.data(), n, q.E, q.k, q.S, q.c);
    z[i] = z0 - eps;
    const Routing down = route(z.data(), n, q.E, q.k, q.S, q.c);
    z[i] = z0;
    if (up.expert != base.expert || down.expert != base.expert || up.slot != base.slot ||
        down.slot != base.slot)
      continue;
    // The step actually taken in float: (z0+ε) − (z0−ε) rounded.
    const double h = static_cast<double>(z0 + eps) - static_cast<double>(z0 - eps);
    const double fd = (loss(up) - loss(down)) / h;
    const double err = std::abs(fd - dz[i]);
    worst = std::max(worst, err);
    EXPECT_NEAR(dz[i], fd, 2e-4 + 1e-3 * std::abs(fd)) << "logit " << i;
    ++checked;
  }
  std::printf("k=%d E=%d: %d of %zu logits checked, largest |analytic - fd| = %.3g\n", q.k, q.E,
              checked, z.size(), worst);
  EXPECT_GE(checked * 10, static_cast<int>(z.size()) * 9) << "too many routing boundaries";
}

INSTANTIATE_TEST_SUITE_P(TopK, RouteBackwardFd,
                         ::testing::Values(FdCase{1, 4, 4, 3, 1.0, 0.5},
                                           FdCase{2, 4, 4, 3, 1.0, 0.5},
                                           FdCase{3, 5, 5, 2, 0.8, 0.7},
                                           FdCase{2, 8, 8, 2, 0.5, 0.0},
                                           FdCase{2, 4, 4, 3, 1.0, 0.5, 0.3}),
                         [](const ::testing::TestParamInfo<FdCase>& i) {
                           return "k" + std::to_string(i.param.k) + "_E" +
                                  std::to_string(i.param.E) +
                                  (i.param.a > 0 ? "_aux" : "_noaux") +
                                  (i.param.zw > 0 ? "_z" : "");
                         });

}  // namespace
}  // namespace llmp
