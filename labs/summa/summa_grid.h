// Lab summa: the q×q grid of ranks and its row and column groups (given: not part of the TODO).
//
// SUMMA (van de Geijn & Watts 1997, "SUMMA: Scalable Universal Matrix Multiplication Algorithm")
// and Optimus, Colossal-AI's 2D tensor parallelism (Xu et al. 2021, §3), place P = q² ranks on a
// q×q grid; rank (i, j) holds block (i, j) of every matrix. A step of SUMMA talks along one row or
// one column of the grid only, so each rank needs two groups: its row (the q ranks (i, 0..q-1))
// and its column (the q ranks (0..q-1, j)).
//
// Mapping, row-major: group rank g of the group passed in sits at (i, j) = (g / q, g % q). Row i's
// group holds group ranks i·q .. i·q + q-1 in that order (so a rank's place in its row group is
// j), column j's holds j, q + j, ..., (q-1)·q + j (its place there is i). For q = 2 (P = 4):
//
//            j = 0   j = 1
//   i = 0      0       1        row groups {0, 1}, {2, 3}
//   i = 1      2       3        column groups {0, 2}, {1, 3}
//
// Glossary: P ranks, q = √P grid side, (i, j) this rank's grid row and column.
#pragma once

#include <memory>

#include "common/comm/process_group.h"

namespace llmp {

/// This rank's place on the q×q grid and its two groups (each with CommStats of its own, so the
/// bytes sent along rows and along columns are counted apart).
struct SummaGrid {
  int q = 1;  ///< grid side, q² = the group's size
  int i = 0;  ///< this rank's grid row, its rank in `col`
  int j = 0;  ///< this rank's grid column, its rank in `row`
  std::shared_ptr<ProcessGroup> row;  ///< the q ranks (i, 0), ..., (i, q-1); rank in it = j
  std::shared_ptr<ProcessGroup> col;  ///< the q ranks (0, j), ..., (q-1, j); rank in it = i
};

/// Builds the grid over `group` (collective over it: two ProcessGroup::split calls). Ends every
/// rank (LLMP_CHECK) with "summa: 6 ranks are not a square q×q grid" when group.size() is not a
/// perfect square.
SummaGrid make_summa_grid(ProcessGroup& group);

}  // namespace llmp
