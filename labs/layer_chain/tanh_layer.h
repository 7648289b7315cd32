// The labs' test layer (layer.h): y = w ⊙ tanh(x) + b on vectors of n floats, each layer with
// its own random w and b (seeded by its index, so every rank of a test can make every layer);
// cache = tanh(x), backward dx = dy ⊙ w ⊙ (1 − cache²), dw += dy ⊙ cache, db += dy. Each call is
// logged ("F3", "B3": forward and backward of layer 3).
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "labs/layer_chain/layer.h"

namespace llmp::lab {

/// n floats uniform in [lo, hi) from `seed`.
inline std::vector<float> draw_floats(int64_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& e : v) e = u(gen);
  return v;
}

/// A new (n) f32 activation.
inline Tensor activation(int64_t n) {
  return Tensor::empty({n}, DType::kF32, MemCategory::kActivations);
}

/// y = w ⊙ tanh(x) + b, logging its calls into *log.
class TanhLayer : public Layer {
 public:
  TanhLayer(int index, int64_t n, std::vector<std::string>* log)
      : index_(index), n_(n), log_(log), w_(draw_floats(n, 100 + index, 0.5f, 1.5f)),
        b_(draw_floats(n, 200 + index, -0.5f, 0.5f)), dw_(n, 0.0f), db_(n, 0.0f) {}

  LayerForward forward(const Tensor& x) override {
    log_->push_back("F" + std::to_string(index_));
    LayerForward f{activation(n_), activation(n_)};
    for (int64_t j = 0; j < n_; ++j) {
      f.cache.f32()[j] = std::tanh(x.f32()[j]);
      f.y.f32()[j] = w_[j] * f.cache.f32()[j] + b_[j];
    }
    return f;
  }
  Tensor backward(const Tensor& cache, const Tensor& dy) override {
    log_->push_back("B" + std::to_string(index_));
    Tensor dx = activation(n_);
    for (int64_t j = 0; j < n_; ++j) {
      const float t = cache.f32()[j], g = dy.f32()[j];
      dx.f32()[j] = g * w_[j] * (1.0f - t * t);
      dw_[j] += g * t;
      db_[j] += g;
    }
    return dx;
  }
  const std::vector<float>& dw() const { return dw_; }
  const std::vector<float>& db() const { return db_; }

 private:
  int index_;
  int64_t n_;
  std::vector<std::string>* log_;
  std::vector<float> w_, b_, dw_, db_;
};

}  // namespace llmp::lab
