// ForwardingCore: an AttentionCore that wraps another and passes every call through to it, the
// base of a core that changes one thing about another (a decorator): cp_strategy.cc's metered
// core counts the FLOPs of the forwards, WidenedCore (widened_core.h) runs an fp32-only core on
// 16-bit tensors. A subclass overrides only what it changes.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/nn/attention_core.h"

namespace llmp {

class ForwardingCore : public AttentionCore {
 public:
  /// Takes ownership of `inner`. Throws std::invalid_argument when it is null.
  explicit ForwardingCore(std::unique_ptr<AttentionCore> inner) : inner_(std::move(inner)) {
    if (!inner_) throw std::invalid_argument("ForwardingCore: no inner core");
  }

  std::string name() const override { return inner_->name(); }
  int shards() const override { return inner_->shards(); }
  int rank() const override { return inner_->rank(); }
  bool supports_device() const override { return inner_->supports_device(); }
  bool takes_16bit() const override { return inner_->takes_16bit(); }
  std::vector<int> positions(int T) const override { return inner_->positions(T); }
  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H, AttentionKeep* keep) override {
    inner_->forward(qkv, out, B, T, H, keep);
  }
  void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, AttentionKeep* keep,
                Tensor& dqkv, int B, int T, int H) override {
    inner_->backward(dout, qkv, out, keep, dqkv, B, T, H);
  }

  // The inner core's closed forms (in the inner core's storage() bytes).
  double bytes_per_block(int B, int T, int A, int H) const override {
    return inner_->bytes_per_block(B, T, A, H);
  }
  std::string bytes_formula_text() const override { return inner_->bytes_formula_text(); }
  int calls_per_block() const override { return inner_->calls_per_block(); }
  double forward_bytes_per_block(int B, int T, int A, int H) const override {
    return inner_->forward_bytes_per_block(B, T, A, H);
  }
  int forward_calls_per_block() const override { return inner_->forward_calls_per_block(); }
  double kept_bytes_per_block(int B, int T, int A, int H) const override {
    return inner_->kept_bytes_per_block(B, T, A, H);
  }
  double peak_score_bytes(int B, int T, int A, int H, int L) const override {
    return inner_->peak_score_bytes(B, T, A, H, L);
  }
  std::string peak_score_formula_text() const override {
    return inner_->peak_score_formula_text();
  }
  double forward_flops_per_block(int B, int T, int A, int H) const override {
    return inner_->forward_flops_per_block(B, T, A, H);
  }

 protected:
  AttentionCore& inner() { return *inner_; }

 private:
  std::unique_ptr<AttentionCore> inner_;
};

}  // namespace llmp
