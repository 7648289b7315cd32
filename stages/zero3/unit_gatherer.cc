#include "stages/zero3/unit_gatherer.h"

#include <algorithm>
#include <vector>

#include "common/runtime/check.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

UnitGatherer::UnitGatherer(const GPTLayout& layout, const ShardLayout& shards, ProcessGroup& dp,
                           const Tensor& shard)
    : layout_(layout), shards_(shards), dp_(dp), shard_(shard) {
  LLMP_CHECK(shard.numel() == shards.padded,
             "shard has " + std::to_string(shard.numel()) + " elements, expected ⌈Ψ/N⌉ = " +
                 std::to_string(shards.padded));
}

UnitGatherer::~UnitGatherer() {
  for (auto& kv : held_)
    if (kv.second.pending) kv.second.pending->wait();  // MPI may still write into the buffer
}

void UnitGatherer::prefetch(int u) {
  if (held_.count(u)) return;  // already gathered or in flight
  const int64_t a = layout_.unit_offset(u), n = layout_.unit_numel(u);
  const std::vector<int64_t> counts = shards_.split_range(a, a + n);  // sum = n_u
  const int r = dp_.rank();
  // This rank's part of [a, a + n): where it starts inside the shard (nothing when it misses).
  const int64_t at = counts[r] > 0 ? std::max(a, shards_.begin[r]) - shards_.begin[r] : 0;
  Held h;
  // (n_u), beside the shard: on its device, where the walk reads the unit
  h.params = Tensor::empty({n}, shard_.dtype(), MemCategory::kParameters, shard_.device());
  // (counts[r]) from every rank -> (n_u) in rank order.  sends (N-1)/N · b·n_u
  h.pending = dp_.all_gather_v_async(shard_.narrow(at, counts[r]), h.params, counts);
  held_.emplace(u, std::move(h));
  ++gathers_[u];
}

const float* UnitGatherer::get(int u) {
  prefetch(u);
  Held& h = held_.at(u);
  if (h.pending) {
    h.pending->wait();
    h.pending.reset();
  }
  if (h.params.dtype() == DType::kF32) return h.params.f32();
  if (!h.widened.defined()) {  // exact: every 16-bit value is an fp32 value
    h.widened =
        Tensor::empty({h.params.numel()}, DType::kF32, MemCategory::kOther, h.params.device());
    kernel_ops(h.params.device())
        .widen(h.params.raw(), h.params.dtype(), h.widened.f32(), h.params.numel());
  }
  return h.widened.f32();
}

void UnitGatherer::release(int u) {
  auto it = held_.find(u);
  if (it == held_.end()) return;
  if (it->second.pending) it->second.pending->wait();  // never free a buffer MPI still writes
  held_.erase(it);  // the (n_u) buffer is freed: no longer counted as parameters
}

int64_t UnitGatherer::held_numel() const {
  int64_t n = 0;
  for (const auto& kv : held_) n += kv.second.params.numel();
  return n;
}

void UnitGatherer::before_step(const std::vector<WalkStep>& steps, size_t k) {
  for (int u : steps[k].units) prefetch(u);  // no-op: step k-1 prefetched it (k = 0 excepted)
  if (k + 1 < steps.size())
    for (int u : steps[k + 1].units) prefetch(u);  // in flight while step k computes
}

void UnitGatherer::after_step(const std::vector<WalkStep>& steps, size_t k) {
  static const std::vector<int> kNone;
  const std::vector<int>& next = k + 1 < steps.size() ? steps[k + 1].units : kNone;
  for (int u : steps[k].units)
    if (std::find(next.begin(), next.end(), u) == next.end()) release(u);
}

int UnitGatherer::gathers(int u) const {
  auto it = gathers_.find(u);
  return it == gathers_.end() ? 0 : it->second;
}

}  // namespace llmp
