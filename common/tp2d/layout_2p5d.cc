// Layout2p5d (see layout_2p5d.h).
#include "common/tp2d/layout_2p5d.h"

#include <stdexcept>

namespace llmp {

int64_t Part2p5d::global_col(int64_t c) const {
  if (!qkv) return c0 + c;
  const int64_t w = cols / 3, C = Cw / 3;  // [q_j | k_j | v_j] ← columns p·C + c0 + (c mod w)
  return (c / w) * C + c0 + c % w;
}

std::string tp2d_model_error(const GPTConfig& cfg, int q) {
  if (cfg.padded_vocab() != cfg.vocab)  // the grid's head has no masked columns (gpt_embed_head.cc)
    return "the 2D / 2.5D layout does not pad the vocabulary: --make_vocab_size_divisible_by " +
           std::to_string(cfg.vocab_divisible_by) + " pads V=" + std::to_string(cfg.vocab) +
           " to " + std::to_string(cfg.padded_vocab()) + " (give 1, or a V it divides)";
  if (cfg.heads % q || cfg.d % q || (4 * cfg.d) % q || cfg.vocab % q)
    return "grid side q=" + std::to_string(q) + " does not divide H=" + std::to_string(cfg.heads) +
           ", C=" + std::to_string(cfg.d) + ", 4C=" + std::to_string(4 * cfg.d) +
           " and V=" + std::to_string(cfg.vocab);
  return "";
}

Layout2p5d::Layout2p5d(const GPTConfig& cfg, int q, int i, int j) : i_(i) {
  const std::string err = tp2d_model_error(cfg, q);
  if (!err.empty()) throw std::invalid_argument(err);
  const GPTLayout whole(cfg);
  std::vector<Part2p5d> vecs, mats;
  for (const ParamSpec& p : whole.params()) {
    Part2p5d a;
    a.name = p.name;
    a.global_offset = p.offset;
    a.R = p.shape.size() == 2 ? p.shape[0] : 1;
    a.Cw = p.shape.back();
    a.decayed = p.shape.size() >= 2;
    a.qkv = p.name.find("c_attn") != std::string::npos;
    a.cols = a.Cw / q;
    a.c0 = a.qkv ? j * (a.Cw / 3 / q) : j * a.cols;
    a.matrix = p.shape.size() == 2 && p.name != "wpe.weight";
    a.rows = a.matrix ? a.R / q : a.R;  // matrices: rows block i; vectors and wpe: all rows
    a.r0 = a.matrix ? i * a.rows : 0;
    (a.matrix ? mats : vecs).push_back(a);
  }
  for (auto* list : {&vecs, &mats})
    for (Part2p5d& a : *list) {
      a.offset = vec_ + mat_;
      (a.matrix ? mat_ : vec_) += a.numel();
      index_[a.name] = parts_.size();
      parts_.push_back(a);
    }
}

const Part2p5d& Layout2p5d::at(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::out_of_range("no parameter " + name + " in the 2.5D layout");
  return parts_[it->second];
}

void Layout2p5d::copy_from_full(const float* full, float* local) const {
  for (const Part2p5d& a : parts_)
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t c = 0; c < a.cols; ++c)
        local[a.offset + r * a.cols + c] = full[a.global_offset + (a.r0 + r) * a.Cw + a.global_col(c)];
}

void Layout2p5d::copy_to_full(const float* local, float* full) const {
  for (const Part2p5d& a : parts_)
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t c = 0; c < a.cols; ++c)
        full[a.global_offset + (a.r0 + r) * a.Cw + a.global_col(c)] = local[a.offset + r * a.cols + c];
}

std::vector<ElementRange> Layout2p5d::decay_ranges(DecayRule rule) const {
  std::vector<ElementRange> out;
  for (const Part2p5d& a : parts_) {
    if (rule != DecayRule::kAll && !a.decayed) continue;
    if (!out.empty() && out.back().end == a.offset)
      out.back().end += a.numel();
    else
      out.push_back({a.offset, a.offset + a.numel()});
  }
  return out;
}

}  // namespace llmp
