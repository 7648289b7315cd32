// Lab activation_checkpointing: the tests. They reach the code only through
// activation_checkpointing.h, so this one file checks both the reference (reference_test, in CI)
// and your starter.cc (student_test: bazel test //labs/activation_checkpointing:student_test).
//
// The chain: L layers y = w ⊙ tanh(x) + b on vectors of n = 256 floats (S = 1 KiB), each with
// its own random w and b; cache = tanh(x), backward dx = dy ⊙ w ⊙ (1 − cache²), dw += dy ⊙ cache,
// db += dy. The loss ½‖y − target‖², so dy = y − target. Each layer logs its calls ("F3", "B3"),
// and loss_grad logs "loss". What is checked, and why each expected value holds:
//  - dx and every layer's dw and db bit for bit equal to plain backpropagation (all caches kept,
//    the test's own loop), for L = 1 .. 16 and k = 1 .. L + 1: the same calls on the same inputs
//    give the same bits, so any difference is a wrong input or cache;
//  - the sequence of calls against hand-worked ones (the order of the header) for five (L, k),
//    and for every (L, k) above the counts: F L + (m−1)·k times, B L times;
//  - the peak of kActivations bytes during the call (MemoryTracker) at most S·(m + k + 2), and
//    for L = 16, k = 4 below plain backpropagation's (measured on the same chain);
//  - no layers and k < 1 refused by name, before any layer is called.
//
// Glossary: L layers, k segment length, m = ⌈L/k⌉, n floats per activation, S = 4n bytes.
#include "labs/activation_checkpointing/activation_checkpointing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/tensor/memory.h"
#include "labs/layer_chain/tanh_layer.h"

namespace llmp::lab {
namespace {

constexpr int64_t kN = 256;
constexpr int64_t kS = 4 * kN;  // bytes of one activation

// A chain of L fresh layers (zero gradients), its input, its loss and its call log.
struct Chain {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<TanhLayer>> owned;
  std::vector<Layer*> layers;
  Tensor x = Tensor::empty({kN}, DType::kF32, MemCategory::kOther);  // the caller's, not counted
  std::vector<float> target = draw_floats(kN, 7, -1.0f, 1.0f);

  explicit Chain(int L) {
    for (int i = 0; i < L; ++i) {
      owned.push_back(std::make_unique<TanhLayer>(i, kN, &log));
      layers.push_back(owned.back().get());
    }
    const std::vector<float> x0 = draw_floats(kN, 3, -2.0f, 2.0f);
    std::memcpy(x.f32(), x0.data(), sizeof(float) * kN);
  }
  std::function<Tensor(const Tensor&)> loss_grad() {
    return [this](const Tensor& y) {
      log.push_back("loss");
      Tensor dy = activation(kN);
      for (int64_t j = 0; j < kN; ++j) dy.f32()[j] = y.f32()[j] - target[j];
      return dy;
    };
  }
  std::string calls() const {
    std::string s;
    for (const std::string& c : log) s += (s.empty() ? "" : " ") + c;
    return s;
  }
};

// Plain backpropagation, every cache kept: what the checkpointed chain must equal bit for bit.
Tensor plain(Chain& c) {
  std::vector<Tensor> caches;
  Tensor h = c.x;
  for (Layer* l : c.layers) {
    LayerForward f = l->forward(h);
    caches.push_back(f.cache);
    h = f.y;
  }
  Tensor dy = c.loss_grad()(h);
  for (int i = static_cast<int>(c.layers.size()) - 1; i >= 0; --i)
    dy = c.layers[i]->backward(caches[i], dy);
  return dy;
}

struct Result {
  Tensor dx;
  int64_t peak = 0;  // kActivations bytes above the level before the call
};

Result checkpointed(Chain& c, int k) {
  MemoryTracker& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kActivations);
  mt.reset_peak();
  Result r;
  r.dx = checkpointed_forward_backward(c.layers, c.x, k, c.loss_grad());
  r.peak = mt.peak(MemCategory::kActivations) - before;
  return r;
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, sizeof(float) * n) == 0;
}

int count(const std::vector<std::string>& log, char kind) {
  int n = 0;
  for (const std::string& c : log) n += c[0] == kind;
  return n;
}

TEST(ActivationCheckpointing, MatchesPlainBackpropagationBitForBit) {
  std::ostringstream off;
  for (int L = 1; L <= 16; ++L)
    for (int k = 1; k <= L + 1; ++k) {
      Chain want(L), got(L);
      const Tensor dx_want = plain(want);
      const Result r = checkpointed(got, k);
      std::string what;
      if (!r.dx.defined() || r.dx.numel() != kN)
        what = " dx is not a tensor of " + std::to_string(kN);
      else if (!same_bits(r.dx.f32(), dx_want.f32(), kN))
        what = " dx differs";
      for (int i = 0; i < L && what.empty(); ++i)
        if (!same_bits(got.owned[i]->dw().data(), want.owned[i]->dw().data(), kN) ||
            !same_bits(got.owned[i]->db().data(), want.owned[i]->db().data(), kN))
          what = " layer " + std::to_string(i) + "'s dw or db differs";
      if (!what.empty()) off << "\n  L = " << L << ", k = " << k << ":" << what;
    }
  EXPECT_TRUE(off.str().empty()) << "against plain backpropagation, bit for bit:" << off.str();
}

TEST(ActivationCheckpointing, CallsFollowTheSegmentsLastFirst) {
  struct Case {
    int L, k;
    std::string calls;
  };
  const std::vector<Case> cases = {
      // segments {0,1} {2,3} {4}: the last one keeps its cache, the others are run again
      {5, 2, "F0 F1 F2 F3 F4 loss B4 F2 F3 B3 B2 F0 F1 B1 B0"},
      // one segment: plain backpropagation
      {4, 4, "F0 F1 F2 F3 loss B3 B2 B1 B0"},
      {4, 9, "F0 F1 F2 F3 loss B3 B2 B1 B0"},
      // every input a checkpoint: every layer but the last run again, alone
      {3, 1, "F0 F1 F2 loss B2 F1 B1 F0 B0"},
      // segments {0,1,2} {3,4,5}
      {6, 3, "F0 F1 F2 F3 F4 F5 loss B5 B4 B3 F0 F1 F2 B2 B1 B0"},
      {1, 1, "F0 loss B0"},
  };
  for (const Case& c : cases) {
    Chain chain(c.L);
    checkpointed(chain, c.k);
    EXPECT_EQ(chain.calls(), c.calls) << "L = " << c.L << ", k = " << c.k;
  }
  std::ostringstream off;
  for (int L = 1; L <= 16; ++L)
    for (int k = 1; k <= L + 1; ++k) {
      Chain chain(L);
      checkpointed(chain, k);
      const int m = (L + k - 1) / k;
      const int F = count(chain.log, 'F'), B = count(chain.log, 'B');
      if (F != L + (m - 1) * k || B != L)
        off << "\n  L = " << L << ", k = " << k << ": " << F << " forwards (want "
            << L + (m - 1) * k << "), " << B << " backwards (want " << L << ")";
    }
  EXPECT_TRUE(off.str().empty()) << "F runs L + (m-1)·k times, B L times:" << off.str();
}

TEST(ActivationCheckpointing, PeakActivationMemoryIsCheckpointsPlusOneSegment) {
  std::ostringstream off;
  for (int L = 1; L <= 16; ++L)
    for (int k = 1; k <= L + 1; ++k) {
      Chain chain(L);
      const int64_t peak = checkpointed(chain, k).peak;
      const int m = (L + k - 1) / k;
      const int64_t bound = kS * (m + k + 2);
      if (peak > bound)
        off << "\n  L = " << L << ", k = " << k << ": " << peak << " bytes (" << double(peak) / kS
            << " S), bound S·(m + k + 2) = " << bound << " (" << m + k + 2 << " S)";
    }
  EXPECT_TRUE(off.str().empty()) << "peak kActivations bytes over the call, S = " << kS << ":"
                                 << off.str();
  // Against plain backpropagation, measured on the same chain: k = 4 of 16 layers must save.
  Chain all(16), some(16);
  MemoryTracker& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kActivations);
  mt.reset_peak();
  plain(all);
  const int64_t plain_peak = mt.peak(MemCategory::kActivations) - before;
  const int64_t peak = checkpointed(some, 4).peak;
  EXPECT_LT(peak, plain_peak) << "L = 16, k = 4: checkpointing keeps fewer bytes than "
                              << plain_peak / kS << " S (every cache kept); measured "
                              << double(peak) / kS << " S";
  std::printf("L = 16: peak activations %.0f S at k = 4, %.0f S with every cache kept\n",
              double(peak) / kS, double(plain_peak) / kS);
}

TEST(ActivationCheckpointing, BadArgumentsAreRefusedByName) {
  Chain chain(3);
  auto message = [&](const std::vector<Layer*>& layers, int k) -> std::string {
    try {
      checkpointed_forward_backward(layers, chain.x, k, chain.loss_grad());
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(message({}, 2), "checkpointed_forward_backward: no layers");
  EXPECT_EQ(message(chain.layers, 0), "checkpointed_forward_backward: k = 0 (want k >= 1)");
  EXPECT_EQ(message(chain.layers, -3), "checkpointed_forward_backward: k = -3 (want k >= 1)");
  EXPECT_EQ(chain.calls(), "") << "a layer was called before the arguments were checked";
}

}  // namespace
}  // namespace llmp::lab
