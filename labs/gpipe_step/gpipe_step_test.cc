// Lab gpipe_step: the tests. They reach the code only through gpipe_step.h, so this one file
// checks both the reference (reference_test, 1..4 ranks, in CI) and your starter.cc
// (student_test, 2..4 ranks: bazel test //labs/gpipe_step:student_test).
//
// The chain: p layers y = w ⊙ tanh(x) + b (labs/layer_chain/tanh_layer.h) on n = 64 floats,
// layer r on stage r; micro-batch i has its own input and target, the loss ½‖y − target_i‖².
// Every rank can make every layer, so each one also runs the whole chain by itself (plain
// backpropagation of each micro-batch, backwards in the order m−1 .. 0) and knows what its stage
// must compute. What is checked, and why each expected value holds:
//  - rank 0's dx_i and every stage's dw and db bit for bit the chain's (the same calls on the
//    same inputs in the same order give the same bits), m = 1, 2, 4, 7;
//  - each stage's calls, each named by the micro-batch it was given (a forward by its input's
//    bits, a backward by the cache it reads), against "F0 .. F m−1 B m−1 .. B0": an input of the
//    wrong micro-batch or a cache of the wrong one shows as its number or "?";
//  - traffic: sends and receives only, m of S = 4n bytes each way per link (rank 0 sends m,
//    inner ranks 2m, the last m);
//  - a sub-group of every rank in reverse order: the stages follow the group's ranks;
//  - bad arguments refused by name before any communication;
//  - a watchdog ends a test still running after kDeadlineS with a hint (a recv no one sends to).
//
// Glossary: p stages, r this stage, m micro-batches, n floats, S = 4n bytes.
#include "labs/gpipe_step/gpipe_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing/deadline.h"
#include "labs/layer_chain/tanh_layer.h"

namespace llmp::lab {
namespace {

constexpr unsigned kDeadlineS = 60;  // a test still running then ends the job with a hint
constexpr int64_t kN = 64;

Tensor input(int i) {  // micro-batch i's input
  Tensor x = activation(kN);
  const std::vector<float> v = draw_floats(kN, 500 + i, -2.0f, 2.0f);
  std::memcpy(x.f32(), v.data(), sizeof(float) * kN);
  return x;
}
std::vector<float> target(int i) { return draw_floats(kN, 600 + i, -1.0f, 1.0f); }

Tensor loss_grad(int i, const Tensor& y) {  // ∂(½‖y − target_i‖²)/∂y
  const std::vector<float> t = target(i);
  Tensor dy = activation(kN);
  for (int64_t j = 0; j < kN; ++j) dy.f32()[j] = y.f32()[j] - t[j];
  return dy;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.numel() == b.numel() &&
         std::memcmp(a.f32(), b.f32(), sizeof(float) * a.numel()) == 0;
}

// The whole chain of p layers on one rank: each micro-batch's forward, then the backwards of
// m−1 .. 0. Keeps every layer's input of every micro-batch (to name the stage's calls by).
struct Chain {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<TanhLayer>> layers;
  std::vector<std::vector<Tensor>> in;  // in[i][l]: micro-batch i's input to layer l
  std::vector<Tensor> dx;               // dx[i] of the chain's input

  Chain(int p, int m) : in(m), dx(m) {
    for (int l = 0; l < p; ++l) layers.push_back(std::make_unique<TanhLayer>(l, kN, &log));
    std::vector<std::vector<Tensor>> caches(m);
    std::vector<Tensor> dy(m);
    for (int i = 0; i < m; ++i) {
      Tensor h = input(i);
      for (int l = 0; l < p; ++l) {
        in[i].push_back(h);
        LayerForward f = layers[l]->forward(h);
        caches[i].push_back(f.cache);
        h = f.y;
      }
      dy[i] = loss_grad(i, h);
    }
    for (int i = m - 1; i >= 0; --i) {
      Tensor g = dy[i];
      for (int l = p - 1; l >= 0; --l) g = layers[l]->backward(caches[i][l], g);
      dx[i] = g;
    }
  }
};

// The stage's layer, logging each call with the micro-batch it belongs to: a forward by the
// bits of its input (want: in[i][r]), a backward by the cache it reads (a forward's, by pointer).
class NamingStage : public Layer {
 public:
  NamingStage(int r, const Chain& chain) : r_(r), chain_(chain), layer_(r, kN, &unused_) {}
  LayerForward forward(const Tensor& x) override {
    int i = -1;
    for (int k = 0; k < static_cast<int>(chain_.in.size()) && i < 0; ++k)
      if (same(x, chain_.in[k][r_])) i = k;
    LayerForward f = layer_.forward(x);
    cache_of_.push_back({f.cache.raw(), i});
    calls_.push_back("F" + (i < 0 ? std::string("?") : std::to_string(i)));
    return f;
  }
  Tensor backward(const Tensor& cache, const Tensor& dy) override {
    int i = -1;
    for (const auto& c : cache_of_)
      if (c.first == cache.raw()) i = c.second;
    calls_.push_back("B" + (i < 0 ? std::string("?") : std::to_string(i)));
    return layer_.backward(cache, dy);
  }
  std::string calls() const {
    std::string s;
    for (const std::string& c : calls_) s += (s.empty() ? "" : " ") + c;
    return s;
  }
  const TanhLayer& layer() const { return layer_; }

 private:
  int r_;
  const Chain& chain_;
  std::vector<std::string> unused_, calls_;
  TanhLayer layer_;
  std::vector<std::pair<void*, int>> cache_of_;
};

std::string gpipe_calls(int m) {
  std::string s;
  for (int i = 0; i < m; ++i) s += (s.empty() ? "F" : " F") + std::to_string(i);
  for (int i = m - 1; i >= 0; --i) s += " B" + std::to_string(i);
  return s;
}

// One GPipe step on `g` for m micro-batches, checked against the chain on this rank.
void check_step(ProcessGroup& g, int m) {
  const int p = g.size(), r = g.rank();
  const Chain chain(p, m);
  NamingStage stage(r, chain);
  std::vector<Tensor> inputs;
  if (r == 0)
    for (int i = 0; i < m; ++i) inputs.push_back(input(i));
  g.reset_stats();
  const std::vector<Tensor> dx = gpipe_step(g, stage, inputs, m, kN, loss_grad);
  const std::string where =
      "stage " + std::to_string(r) + " of " + std::to_string(p) + ", m = " + std::to_string(m);

  EXPECT_EQ(stage.calls(), gpipe_calls(m)) << where << ": this stage's calls";
  if (r == 0) {
    ASSERT_EQ(dx.size(), size_t(m)) << where << ": input gradients returned";
    for (int i = 0; i < m; ++i)
      EXPECT_TRUE(same(dx[i], chain.dx[i])) << where << ": dx of micro-batch " << i;
  } else {
    EXPECT_TRUE(dx.empty()) << where << ": only rank 0 returns input gradients";
  }
  const TanhLayer& want = *chain.layers[r];
  EXPECT_EQ(std::memcmp(stage.layer().dw().data(), want.dw().data(), sizeof(float) * kN), 0)
      << where << ": dw, against the chain's layer " << r;
  EXPECT_EQ(std::memcmp(stage.layer().db().data(), want.db().data(), sizeof(float) * kN), 0)
      << where << ": db, against the chain's layer " << r;

  const int64_t sends = (r < p - 1 ? m : 0) + (r > 0 ? m : 0);  // down in F, up in B
  EXPECT_EQ(g.stats().calls_of("send"), sends) << where << ", calls:" << g.stats().calls_str();
  EXPECT_EQ(g.stats().calls_of("recv"), sends) << where << ", calls:" << g.stats().calls_str();
  EXPECT_DOUBLE_EQ(g.stats().bytes_of("send"), double(sends) * 4 * kN) << where;
  EXPECT_DOUBLE_EQ(g.stats().total_bytes(), double(sends) * 4 * kN)
      << where << ": nothing but the sends; calls:" << g.stats().calls_str();
  for (const auto& kv : g.stats().calls)
    EXPECT_TRUE(kv.first == "send" || kv.first == "recv") << where << ": a " << kv.first;
}

class GpipeStep : public ::testing::Test {
 protected:
  void SetUp() override {
    world = ProcessGroup::world();
    testing::arm_deadline(
        kDeadlineS, world->rank(),
        "A stage waits in a recv that no stage sends to, or sends what no stage receives: every "
        "stage must send exactly where and in the order the next (forward) or the previous "
        "(backward) stage receives (labs/gpipe_step/README.md, \"The schedule\").");
  }
  void TearDown() override { testing::disarm_deadline(); }
  std::shared_ptr<ProcessGroup> world;
};

TEST_F(GpipeStep, MatchesTheChainBitForBitWithTheGpipeSchedule) {
  for (int m : {1, 2, 4, 7}) check_step(*world, m);
}

TEST_F(GpipeStep, StagesFollowTheGroupsRanks) {
  std::shared_ptr<ProcessGroup> reversed = world->split(0, -world->rank());
  ASSERT_EQ(reversed->rank(), world->size() - 1 - world->rank());
  check_step(*reversed, 3);
  EXPECT_EQ(world->stats().total_bytes(), 0.0) << "the world group was used, not the one passed";
}

TEST_F(GpipeStep, BadArgumentsAreRefusedByName) {
  std::vector<std::string> log;
  TanhLayer layer(0, kN, &log);
  auto message = [&](ProcessGroup& g, const std::vector<Tensor>& inputs, int m, int64_t n) {
    try {
      gpipe_step(g, layer, inputs, m, n, loss_grad);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  std::vector<Tensor> none;
  world->reset_stats();
  EXPECT_EQ(message(*world, none, 0, kN), "gpipe_step: m = 0 (want m >= 1)");
  EXPECT_EQ(message(*world, none, 2, 0), "gpipe_step: n = 0 (want n >= 1)");
  // Only rank 0 holds inputs, so only it can refuse them: on a group of this rank alone.
  std::shared_ptr<ProcessGroup> alone = world->split(world->rank(), 0);
  EXPECT_EQ(message(*alone, {input(0), input(1)}, 3, kN), "gpipe_step: 2 inputs, m = 3");
  Tensor five = Tensor::zeros({5});
  EXPECT_EQ(message(*alone, {input(0), five}, 2, kN),
            "gpipe_step: inputs[1] has 5 elements, want n = 64");
  EXPECT_EQ(log.size(), 0u) << "the layer was called before the arguments were checked";
  EXPECT_EQ(world->stats().calls.size(), 0u)
      << "communication before the checks:" << world->stats().calls_str();
}

}  // namespace
}  // namespace llmp::lab
