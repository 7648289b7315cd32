// Grid2p5d (see grid_2p5d.h).
#include "common/tp2d/grid_2p5d.h"

#include <stdexcept>

namespace llmp {

int exact_sqrt(int n) {
  for (int q = 1; q * q <= n; ++q)
    if (q * q == n) return q;
  return 0;
}

Grid2p5d::Grid2p5d(ProcessGroup& all, int depth) : d_(depth) {
  const int P = all.size();
  if (depth < 1 || P % depth != 0 || exact_sqrt(P / depth) == 0)
    throw std::invalid_argument("world size " + std::to_string(P) + " is not d·q² with d = " +
                                std::to_string(depth));
  q_ = exact_sqrt(P / depth);
  const int w = all.rank();
  j_ = w % q_;
  i_ = (w / q_) % q_;
  h_ = w / (q_ * q_);
  row_ = all.split(h_ * q_ + i_, j_);    // (h, i, *): group rank j
  col_ = all.split(h_ * q_ + j_, i_);    // (h, *, j): group rank i
  depth_ = all.split(i_ * q_ + j_, h_);  // (*, i, j): group rank h
  row_->set_name("row group");
  col_->set_name("column group");
  depth_->set_name("depth group");
}

}  // namespace llmp
