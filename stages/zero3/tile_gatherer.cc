#include "stages/zero3/tile_gatherer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/runtime/check.h"
#include "kernels/cpu/convert.h"

namespace llmp {

TileGatherer::TileGatherer(const GPTLayout& layout, const ShardLayout& shards, ProcessGroup& dp,
                           const Tensor& shard, int k)
    : layout_(layout), shards_(shards), dp_(dp), shard_(shard), k_(k) {
  LLMP_CHECK(shard.numel() == shards.padded,
             "shard has " + std::to_string(shard.numel()) + " elements, expected ⌈Ψ/N⌉ = " +
                 std::to_string(shards.padded));
  LLMP_CHECK(k >= 1 && k <= layout.block_shape().C,
             "tile factor " + std::to_string(k) + " is not in [1, C = " +
                 std::to_string(layout.block_shape().C) + "]");
}

TileGatherer::~TileGatherer() {
  for (auto& kv : held_)
    if (kv.second.pending) kv.second.pending->wait();  // MPI may still write into the buffer
}

TileGatherer::Piece TileGatherer::start(const std::vector<TileRange>& ranges) {
  const int N = dp_.size(), r = dp_.rank();
  const int64_t lo_r = shards_.begin[r], hi_r = lo_r + shards_.count[r];
  std::vector<int64_t> counts(N, 0);
  int64_t n = 0;
  std::vector<TileRange> mine;  // this rank's runs, as offsets into its shard
  for (const TileRange& t : ranges) {
    const std::vector<int64_t> c = shards_.split_range(t.begin, t.end);
    for (int i = 0; i < N; ++i) counts[i] += c[i];
    n += t.size();
    const int64_t a = std::max(t.begin, lo_r), b = std::min(t.end, hi_r);
    if (a < b) mine.push_back({a - lo_r, b - lo_r});
  }
  Piece p;
  p.params = Tensor::empty({n}, shard_.dtype(), MemCategory::kParameters);  // (Σ |range|)
  Tensor part;
  if (mine.size() <= 1) {  // one contiguous run of the shard (or nothing): no copy
    part = mine.empty() ? shard_.narrow(0, 0) : shard_.narrow(mine[0].begin, mine[0].size());
  } else {  // pack the runs in flat order
    p.send = Tensor::empty({counts[r]}, shard_.dtype(), MemCategory::kOther);
    const size_t es = dtype_size(shard_.dtype());
    char* dst = static_cast<char*>(p.send.raw());
    const char* src = static_cast<const char*>(shard_.raw());
    for (const TileRange& m : mine) {
      std::memcpy(dst, src + m.begin * es, m.size() * es);
      dst += m.size() * es;
    }
    part = p.send;
  }
  // (counts[r]) from every rank -> (n) in rank order = flat order.  sends (N-1)/N · b·n
  p.pending = dp_.all_gather_v_async(part, p.params, counts);
  return p;
}

const float* TileGatherer::ready(Piece& p) {
  if (p.pending) {
    p.pending->wait();
    p.pending.reset();
  }
  if (p.params.dtype() == DType::kF32) return p.params.f32();
  if (!p.widened.defined()) {  // exact: every 16-bit value is an fp32 value
    p.widened = Tensor::empty({p.params.numel()}, DType::kF32, MemCategory::kOther);
    cpu::widen(p.params.raw(), p.params.dtype(), p.widened.f32(), p.params.numel());
  }
  return p.widened.f32();
}

std::vector<TileRange> TileGatherer::unit_ranges(int u) const {
  const int64_t a = layout_.unit_offset(u);
  if (u == 0 || u == layout_.num_units() - 1) return {{a, a + layout_.unit_numel(u)}};
  std::vector<TileRange> r = block_rest_ranges(layout_.block_shape());  // within the unit
  for (TileRange& t : r) t = {a + t.begin, a + t.end};
  return r;
}

void TileGatherer::prefetch(int u) {
  if (held_.count(u)) return;  // already gathered or in flight
  held_.emplace(u, start(unit_ranges(u)));
  ++gathers_[u];
}

const float* TileGatherer::get(int u) {
  // The walk reads a block's parameters right before it computes that block: the tiles asked
  // for next are that block's (also when a recomputation runs earlier blocks inside a step).
  if (u >= 1 && u + 1 < layout_.num_units()) block_unit_ = u;
  prefetch(u);
  return ready(held_.at(u));
}

void TileGatherer::release(int u) {
  auto it = held_.find(u);
  if (it == held_.end()) return;
  if (it->second.pending) it->second.pending->wait();  // never free a buffer MPI still writes
  held_.erase(it);
}

void TileGatherer::before_step(const std::vector<WalkStep>& steps, size_t k) {
  const WalkStep& s = steps[k];
  const bool block = s.kind == WalkStep::kBlockForward || s.kind == WalkStep::kBlockBackward ||
                     s.kind == WalkStep::kBlockBackwardInput;
  block_unit_ = block ? 1 + s.layer : -1;
  for (int u : s.units) prefetch(u);
  if (k + 1 < steps.size())
    for (int u : steps[k + 1].units) prefetch(u);  // in flight while step k computes
}

void TileGatherer::after_step(const std::vector<WalkStep>& steps, size_t k) {
  while (!tiles_.empty()) release_tile();
  block_unit_ = -1;
  static const std::vector<int> kNone;
  const std::vector<int>& next = k + 1 < steps.size() ? steps[k + 1].units : kNone;
  for (int u : steps[k].units)
    if (std::find(next.begin(), next.end(), u) == next.end()) release(u);
}

int64_t TileGatherer::weight_offset(BlockLinear w) const {
  LLMP_CHECK(block_unit_ >= 1, "a weight tile was asked for outside a block step");
  return layout_.unit_offset(block_unit_) + block_linear_offset(w, layout_.block_shape());
}

const float* TileGatherer::tile(const std::vector<TileRange>& ranges) {
  tiles_.push_back(start(ranges));  // synchronous: the layer needs it now (no prefetch)
  ++tile_gathers_;
  tile_numel_ += tiles_.back().params.numel();
  peak_tile_numel_ = std::max(peak_tile_numel_, tile_numel_);
  return ready(tiles_.back());
}

const float* TileGatherer::columns(BlockLinear w, int i) {
  int64_t R, OC;
  block_linear_shape(w, layout_.block_shape(), &R, &OC);
  const int64_t at = weight_offset(w);
  const TileRange t = tile_range(OC, k_, i);
  std::vector<TileRange> ranges(R);  // row r's columns [t.begin, t.end): strided in the buffer
  for (int64_t r = 0; r < R; ++r) ranges[r] = {at + r * OC + t.begin, at + r * OC + t.end};
  return tile(ranges);  // (R, |t|) packed
}

const float* TileGatherer::rows(BlockLinear w, int i) {
  int64_t R, OC;
  block_linear_shape(w, layout_.block_shape(), &R, &OC);
  const int64_t at = weight_offset(w);
  const TileRange t = tile_range(R, k_, i);
  return tile({{at + t.begin * OC, at + t.end * OC}});  // (|t|, OC): contiguous
}

void TileGatherer::release_tile() {
  LLMP_CHECK(!tiles_.empty(), "release_tile() with no tile alive");
  Piece& p = tiles_.back();
  if (p.pending) p.pending->wait();
  tile_numel_ -= p.params.numel();
  tiles_.pop_back();  // the tile's buffer is freed: no longer counted as parameters
}

int TileGatherer::gathers(int u) const {
  auto it = gathers_.find(u);
  return it == gathers_.end() ? 0 : it->second;
}

}  // namespace llmp
