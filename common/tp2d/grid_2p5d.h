// Grid2p5d: the d × q × q grid of Tesseract (2.5D tensor parallelism, Wang et al. 2021, §3) and
// its three kinds of process groups; Optimus's 2D grid (Xu et al. 2021) is the case d = 1.
//
// World rank w = (h·q + i)·q + j:  h the depth layer (0..d-1), i the row, j the column (0..q-1).
//   row group    (h, i, *): the q ranks holding the column blocks of the same rows  (SUMMA's A)
//   column group (h, *, j): the q ranks holding the row blocks of the same columns  (SUMMA's B)
//   depth group  (*, i, j): the d ranks holding the same weight block (replicas over depth)
//
// Worked mapping, P = 4 (q = 2, d = 1, the tp_2d default):
//     rank = (i,j):  0 = (0,0)  1 = (0,1)  2 = (1,0)  3 = (1,1)
//     row groups {0,1} {2,3};  column groups {0,2} {1,3};  depth groups {0} {1} {2} {3}
// P = 8 (q = 2, d = 2, the tp_2p5d default):
//     rank = (h,i,j):  0 = (0,0,0) 1 = (0,0,1) 2 = (0,1,0) 3 = (0,1,1)
//                      4 = (1,0,0) 5 = (1,0,1) 6 = (1,1,0) 7 = (1,1,1)
//     row groups {0,1} {2,3} {4,5} {6,7};  column groups {0,2} {1,3} {4,6} {5,7};
//     depth groups {0,4} {1,5} {2,6} {3,7}
// In every group the group rank is the coordinate that varies (j, i, h), so "root (i,k) of row
// group i" is group rank k.
//
// Glossary: P = d·q² ranks, q grid side, d depth, (h,i,j) this rank's coordinates.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"

namespace llmp {

class Grid2p5d {
 public:
  /// Collective over `all` (P = d·q² ranks, world rank order as above). Each group is its own
  /// ProcessGroup (own CommStats, so bytes are attributable to rows, columns or depth). Throws
  /// std::invalid_argument("... world size 6 is not d·q² with d = 1") when P ≠ d·q².
  Grid2p5d(ProcessGroup& all, int depth);

  int q() const { return q_; }
  int d() const { return d_; }
  int h() const { return h_; }
  int i() const { return i_; }
  int j() const { return j_; }
  ProcessGroup& row() { return *row_; }
  ProcessGroup& col() { return *col_; }
  ProcessGroup& depth() { return *depth_; }
  const ProcessGroup& row() const { return *row_; }
  const ProcessGroup& col() const { return *col_; }
  const ProcessGroup& depth() const { return *depth_; }

 private:
  int q_ = 1, d_ = 1, h_ = 0, i_ = 0, j_ = 0;
  std::shared_ptr<ProcessGroup> row_, col_, depth_;
};

/// q with q² = n, or 0 when n is not a perfect square (n ≥ 1).
int exact_sqrt(int n);

}  // namespace llmp
