// The q×q×q cube of 3D tensor parallelism (Bian et al. 2021, "Maximizing Parallelism in
// Distributed Training for Huge Neural Networks", §3; Colossal-AI's parallel_3d) and the process
// groups cut from it.
//
// P = q³ ranks; world rank r = (i·q + j)·q + l  ⇔  i = r / q², j = (r / q) % q, l = r % q.
// Five groups, each its own ProcessGroup object (own CommStats, so bytes are attributable):
//   i-axis group   (·, j, l): q ranks, ordered by i   — the weights' pieces (all_gather W,
//                                                       reduce_scatter dW)
//   j-axis group   (i, ·, l): q ranks, ordered by j   — A→B linears' input, B→A outputs, the
//                                                       vocabulary of the cross-entropy
//   l-axis group   (i, j, ·): q ranks, ordered by l   — A→B outputs, B→A inputs, LayerNorm
//   plane (same l) (·, ·, l): q² ranks, ordered by i·q + j — the embedding's reduce_scatter,
//                                                       gradients of the layout-A vectors
//   plane (same j) (·, j, ·): q² ranks, ordered by i·q + l — gradients of the layout-B vectors,
//                                                       the loss
// Worked mapping for P = 8 (q = 2), rank = 4i + 2j + l:
//   rank:        0   1   2   3   4   5   6   7
//   (i,j,l):   000 001 010 011 100 101 110 111
//   i-axis groups: {0,4} {1,5} {2,6} {3,7}      j-axis groups: {0,2} {1,3} {4,6} {5,7}
//   l-axis groups: {0,1} {2,3} {4,5} {6,7}
//   planes same l: {0,2,4,6} {1,3,5,7}          planes same j: {0,1,4,5} {2,3,6,7}
//
// Glossary: q cube side, P = q³ ranks, (i,j,l) a rank's coordinates.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"

namespace llmp {

/// q with q³ = P, or 0 when P is not a cube (P ≥ 1).
int cube_side(int P);

/// This rank's coordinates and its five groups, split from `all` (P = q³ ranks, group rank =
/// the world rank order above). Collective over `all`. Throws std::invalid_argument("tp_3d needs
/// P = q×q×q ranks: world size 6 is not a cube") otherwise.
struct Cube {
  explicit Cube(ProcessGroup& all);
  int q = 1, i = 0, j = 0, l = 0;
  std::shared_ptr<ProcessGroup> i_axis, j_axis, l_axis, plane_l, plane_j;
};

}  // namespace llmp
