// place_groups (see placement.h): every group of each kind, member by member.
#include "tools/plan/placement.h"

#include <stdexcept>

namespace llmp::plan {
namespace {

// Whether the `size` ranks first, first + stride, ... lie on more than one node.
bool spans(int first, int stride, int size, int G) {
  for (int i = 1; i < size; ++i)
    if ((first + i * stride) / G != first / G) return true;
  return false;
}

}  // namespace

GroupPlacement place_groups(int dp, int pp, int tp, int G) {
  if (dp < 1 || pp < 1 || tp < 1 || G < 1)
    throw std::invalid_argument("grid dp " + std::to_string(dp) + ", pp " + std::to_string(pp) +
                                ", tp " + std::to_string(tp) + " on " + std::to_string(G) +
                                " GPUs per node: every value must be ≥ 1");
  GroupPlacement g;
  const int replica = pp * tp;
  for (int d = 0; d < dp; ++d)
    for (int s = 0; s < pp; ++s) g.tp = g.tp || spans(d * replica + s * tp, 1, tp, G);
  for (int d = 0; d < dp; ++d)
    for (int j = 0; j < tp; ++j) {
      g.pp = g.pp || spans(d * replica + j, tp, pp, G);
      if (pp > 1) g.emb = g.emb || spans(d * replica + j, (pp - 1) * tp, 2, G);
    }
  for (int s = 0; s < pp; ++s)
    for (int j = 0; j < tp; ++j) g.dp = g.dp || spans(s * tp + j, replica, dp, G);
  return g;
}

}  // namespace llmp::plan
