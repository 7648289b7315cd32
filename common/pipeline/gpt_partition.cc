// GPTPartition (see gpt_partition.h): virtual stages as contiguous unit ranges.
#include "common/pipeline/gpt_partition.h"

#include <stdexcept>

#include "common/pipeline/schedule.h"

namespace llmp {

std::string GPTPartition::check(int layers, int p, int v) {
  if (p < 1) return "pipeline size p = " + std::to_string(p) + " must be at least 1";
  if (v < 1) return "chunks per rank v = " + std::to_string(v) + " must be at least 1";
  try {
    check_layers_divisible(layers, p, v);  // schedule.h's message, the same everywhere
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

GPTPartition::GPTPartition(const GPTLayout& layout, int layers, int p, int v)
    : layout_(layout), L_(layers), p_(p), v_(v), k_(0) {
  const std::string err = check(layers, p, v);
  if (!err.empty()) throw std::invalid_argument(err);
  k_ = L_ / (p_ * v_);
  segments_.resize(p_);
  for (int r = 0; r < p_; ++r) {
    int64_t local = 0;
    for (int c = 0; c < v_; ++c) {
      const int s = c * p_ + r;
      ParamSegment seg;
      seg.global_offset = layout_.unit_offset(unit_begin(s));
      const int last_unit = unit_end(s) - 1;
      seg.numel = layout_.unit_offset(last_unit) + layout_.unit_numel(last_unit) - seg.global_offset;
      seg.local_offset = local;
      local += seg.numel;
      segments_[r].push_back(seg);
    }
    // The rank of the last virtual stage keeps a copy of wte for the tied head (unless it is
    // also the first stage's rank, p = 1, where wte already sits in its chunk 0).
    if (r == rank_of(p_ * v_ - 1) && r != rank_of(0)) {
      const ParamSpec& wte = layout_.find("wte.weight");
      segments_[r].push_back({wte.offset, local, wte.numel, /*wte_copy=*/true});
    }
  }
}

VirtualStage GPTPartition::stage(int rank, int chunk) const {
  VirtualStage vs;
  vs.index = chunk * p_ + rank;
  vs.rank = rank, vs.chunk = chunk;
  vs.first_block = vs.index * k_;
  vs.num_blocks = k_;
  vs.first = vs.index == 0;
  vs.last = vs.index == p_ * v_ - 1;
  return vs;
}

int GPTPartition::unit_begin(int s) const { return s == 0 ? 0 : 1 + s * k_; }
int GPTPartition::unit_end(int s) const { return s == p_ * v_ - 1 ? L_ + 2 : 1 + (s + 1) * k_; }

int64_t GPTPartition::local_numel(int rank) const {
  const ParamSegment& back = segments(rank).back();
  return back.local_offset + back.numel;
}

int64_t GPTPartition::wte_local_offset(int rank) const {
  if (rank == rank_of(0)) return segments(rank).at(0).local_offset;  // wte opens unit 0
  const ParamSegment& back = segments(rank).back();
  return back.wte_copy ? back.local_offset : -1;
}

int64_t GPTPartition::unit_local_offset(int rank, int unit) const {
  for (int c = 0; c < v_; ++c) {
    const int s = c * p_ + rank;
    if (unit >= unit_begin(s) && unit < unit_end(s)) {
      const ParamSegment& seg = segments(rank).at(c);
      return seg.local_offset + (layout_.unit_offset(unit) - seg.global_offset);
    }
  }
  return unit == 0 ? wte_local_offset(rank) : -1;
}

std::vector<int> GPTPartition::embedding_ranks() const {
  const int first = rank_of(0), last = rank_of(p_ * v_ - 1);
  if (first == last) return {first};
  return {first, last};
}

}  // namespace llmp
