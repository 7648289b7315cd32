// Layout3d (see layout_3d.h).
#include "common/tp3d/layout_3d.h"

#include <stdexcept>

namespace llmp {
namespace {

std::vector<int64_t> range(int64_t begin, int64_t count) {
  std::vector<int64_t> v(count);
  for (int64_t k = 0; k < count; ++k) v[k] = begin + k;
  return v;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string layout3d_error(const GPTConfig& cfg, int q) {
  if (cfg.padded_vocab() != cfg.vocab)  // the cube's head has no masked columns (gpt_embed_head.cc)
    return "the 3D layout does not pad the vocabulary: --make_vocab_size_divisible_by " +
           std::to_string(cfg.vocab_divisible_by) + " pads V=" + std::to_string(cfg.vocab) +
           " to " + std::to_string(cfg.padded_vocab()) + " (give 1, or a V it divides)";
  if (cfg.heads % q != 0 || cfg.d % (q * q) != 0 || cfg.vocab % (q * q) != 0)
    return "3D tensor parallelism with q=" + std::to_string(q) + " needs q | H, q² | C and q² | V: H=" +
           std::to_string(cfg.heads) + " C=" + std::to_string(cfg.d) + " V=" +
           std::to_string(cfg.vocab);
  return "";
}

Layout3d::Layout3d(const GPTConfig& cfg, int q, int i, int j, int l) : i_(i), j_(j), l_(l) {
  const std::string err = layout3d_error(cfg, q);
  if (!err.empty()) throw std::invalid_argument(err);
  const int64_t C = cfg.d, V = cfg.vocab, Cq = C / q;
  const std::vector<int64_t> chan_l = range(l * Cq, Cq), one = {0};
  std::vector<int64_t> qkv_j;  // q|k|v of heads block j
  for (int p = 0; p < 3; ++p)
    for (int64_t c = 0; c < Cq; ++c) qkv_j.push_back(p * C + j * Cq + c);
  // Rows piece i of row block `blk` of a K-row weight.
  auto piece = [&](int64_t K, int blk) { return range(blk * K / q + i * K / (q * q), K / (q * q)); };
  const GPTLayout whole(cfg);
  for (const ParamSpec& s : whole.params()) {
    Param3d p;
    p.name = s.name;
    p.global_offset = s.global_offset;
    p.global_cols = s.global_shape.size() == 2 ? s.global_shape[1] : s.global_shape[0];
    const std::string& n = s.name;
    if (n == "wte.weight") {
      p.rows = range(j * V / q + i * V / (q * q), V / (q * q)), p.cols = chan_l;
    } else if (n == "wpe.weight") {
      p.rows = range(0, cfg.ctx), p.cols = chan_l, p.replication = Replication::kPlaneL;
    } else if (ends_with(n, "c_attn.weight")) {
      p.rows = piece(C, l), p.cols = qkv_j;
    } else if (ends_with(n, "c_attn.bias")) {
      p.rows = one, p.cols = qkv_j, p.replication = Replication::kPlaneJ;
    } else if (ends_with(n, "attn.c_proj.weight")) {
      p.rows = piece(C, j), p.cols = chan_l;
    } else if (ends_with(n, "c_fc.weight")) {
      p.rows = piece(C, l), p.cols = range(j * 4 * Cq, 4 * Cq);
    } else if (ends_with(n, "c_fc.bias")) {
      p.rows = one, p.cols = range(j * 4 * Cq, 4 * Cq), p.replication = Replication::kPlaneJ;
    } else if (ends_with(n, "mlp.c_proj.weight")) {
      p.rows = piece(4 * C, j), p.cols = chan_l;
    } else {  // LayerNorm weights and biases, the c_proj biases: channels block l
      if (s.global_shape.size() != 1 || s.global_shape[0] != C)
        throw std::invalid_argument("Layout3d: unexpected tensor " + n);
      p.rows = one, p.cols = chan_l, p.replication = Replication::kPlaneL;
    }
    p.offset = total_;
    p.numel = static_cast<int64_t>(p.rows.size() * p.cols.size());
    total_ += p.numel;
    params_.push_back(std::move(p));
  }
}

bool Layout3d::counts_once(const Param3d& p) const {
  switch (p.replication) {
    case Replication::kNone: return true;
    case Replication::kPlaneL: return i_ == 0 && j_ == 0;
    case Replication::kPlaneJ: return i_ == 0 && l_ == 0;
  }
  return false;
}

int64_t Layout3d::offset(const std::string& name) const {
  for (const Param3d& p : params_)
    if (p.name == name) return p.offset;
  throw std::out_of_range("Layout3d: no tensor " + name);
}

void Layout3d::copy_from_full(const float* full, float* local) const {
  for (const Param3d& p : params_) {
    float* dst = local + p.offset;
    for (int64_t r : p.rows)
      for (int64_t c : p.cols) *dst++ = full[p.global_offset + r * p.global_cols + c];
  }
}

void Layout3d::copy_to_full(const float* local, float* full) const {
  for (const Param3d& p : params_) {
    const float* src = local + p.offset;
    for (int64_t r : p.rows)
      for (int64_t c : p.cols) full[p.global_offset + r * p.global_cols + c] = *src++;
  }
}

}  // namespace llmp
