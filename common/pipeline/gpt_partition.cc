// GPTPartition (see gpt_partition.h): virtual stages as contiguous unit ranges.
#include "common/pipeline/gpt_partition.h"

#include <algorithm>
#include <stdexcept>

#include "common/pipeline/schedule.h"

namespace llmp {

std::string GPTPartition::check(int layers, int p, int v, int pipelines) {
  if (p < 1) return "pipeline size p = " + std::to_string(p) + " must be at least 1";
  if (v < 1) return "chunks per rank v = " + std::to_string(v) + " must be at least 1";
  if (pipelines == 2 && v != 2)
    return "chimera holds two chunks per rank (one per pipeline); got v = " + std::to_string(v);
  try {
    check_layers_divisible(layers, p, v, pipelines);  // schedule.h's message, the same everywhere
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

GPTPartition::GPTPartition(const GPTLayout& layout, int layers, int p, int v, int pipelines)
    : layout_(layout), L_(layers), p_(p), v_(v), k_(0), pl_{p, v, pipelines} {
  const std::string err = check(layers, p, v, pipelines);
  if (!err.empty()) throw std::invalid_argument(err);
  k_ = L_ / pl_.num_stages();
  segments_.resize(p_);
  for (int r = 0; r < p_; ++r) {
    std::vector<ParamSegment>& segs = segments_[r];
    for (int c = 0; c < v_; ++c) {
      const int s = pl_.stage(r, c);
      ParamSegment seg;
      seg.global_offset = layout_.unit_offset(unit_begin(s));
      const int last_unit = unit_end(s) - 1;
      seg.numel = layout_.unit_offset(last_unit) + layout_.unit_numel(last_unit) - seg.global_offset;
      seg.chunk = c;
      segs.push_back(seg);
    }
    // Model order (chunk order but for Chimera's up chunks), then local offsets.
    std::sort(segs.begin(), segs.end(), [](const ParamSegment& a, const ParamSegment& b) {
      return a.global_offset < b.global_offset;
    });
    int64_t local = 0;
    for (ParamSegment& seg : segs) seg.local_offset = local, local += seg.numel;
    // A rank with the last virtual stage keeps a copy of wte for the tied head, unless it also
    // holds the first stage (p = 1; Chimera's ranks 0 and p-1), where wte sits in unit 0.
    if (holds_stage(r, pl_.num_stages() - 1) && !holds_stage(r, 0)) {
      const ParamSpec& wte = layout_.find("wte.weight");
      segs.push_back({wte.offset, local, wte.numel, /*wte_copy=*/true, /*chunk=*/-1});
    }
  }
}

bool GPTPartition::holds_stage(int rank, int s) const {
  for (int c = 0; c < v_; ++c)
    if (pl_.stage(rank, c) == s) return true;
  return false;
}

const ParamSegment& GPTPartition::chunk_segment(int rank, int chunk) const {
  for (const ParamSegment& seg : segments(rank))
    if (seg.chunk == chunk) return seg;
  throw std::invalid_argument("rank " + std::to_string(rank) + " has no chunk " +
                              std::to_string(chunk));
}

VirtualStage GPTPartition::stage(int rank, int chunk) const {
  VirtualStage vs;
  vs.index = pl_.stage(rank, chunk);
  vs.rank = rank, vs.chunk = chunk;
  vs.first_block = vs.index * k_;
  vs.num_blocks = k_;
  vs.first = vs.index == 0;
  vs.last = vs.index == pl_.num_stages() - 1;
  return vs;
}

int GPTPartition::unit_begin(int s) const { return s == 0 ? 0 : 1 + s * k_; }
int GPTPartition::unit_end(int s) const {
  return s == pl_.num_stages() - 1 ? L_ + 2 : 1 + (s + 1) * k_;
}

int64_t GPTPartition::local_numel(int rank) const {
  const ParamSegment& back = segments(rank).back();
  return back.local_offset + back.numel;
}

int64_t GPTPartition::wte_local_offset(int rank) const {
  if (holds_stage(rank, 0)) return segments(rank).at(0).local_offset;  // wte opens unit 0
  const ParamSegment& back = segments(rank).back();
  return back.wte_copy ? back.local_offset : -1;
}

int64_t GPTPartition::unit_local_offset(int rank, int unit) const {
  for (int c = 0; c < v_; ++c) {
    const int s = pl_.stage(rank, c);
    if (unit >= unit_begin(s) && unit < unit_end(s)) {
      const ParamSegment& seg = chunk_segment(rank, c);
      return seg.local_offset + (layout_.unit_offset(unit) - seg.global_offset);
    }
  }
  return unit == 0 ? wte_local_offset(rank) : -1;
}

int64_t GPTPartition::unit_local_numel(int rank, int unit) const {
  for (int c = 0; c < v_; ++c) {
    const int s = pl_.stage(rank, c);
    if (unit >= unit_begin(s) && unit < unit_end(s)) return layout_.unit_numel(unit);
  }
  return unit == 0 && wte_local_offset(rank) >= 0 ? layout_.find("wte.weight").numel : 0;
}

std::vector<int> GPTPartition::embedding_ranks() const {
  const int first = rank_of(0), last = rank_of(pl_.num_stages() - 1);
  if (first == last) return {first};
  return {first, last};
}

}  // namespace llmp
