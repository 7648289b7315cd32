// Cube (see cube.h).
#include "common/tp3d/cube.h"

#include <stdexcept>

namespace llmp {

int cube_side(int P) {
  for (int q = 1; q * q * q <= P; ++q)
    if (q * q * q == P) return q;
  return 0;
}

Cube::Cube(ProcessGroup& all) {
  q = cube_side(all.size());
  if (q == 0)
    throw std::invalid_argument("tp_3d needs P = q×q×q ranks: world size " +
                                std::to_string(all.size()) + " is not a cube");
  const int r = all.rank();
  i = r / (q * q), j = (r / q) % q, l = r % q;
  // split(color, key): same color → same group, ordered by key.
  i_axis = all.split(j * q + l, i);
  i_axis->set_name("i-axis group");
  j_axis = all.split(i * q + l, j);
  j_axis->set_name("j-axis group");
  l_axis = all.split(i * q + j, l);
  l_axis->set_name("l-axis group");
  plane_l = all.split(l, i * q + j);
  plane_l->set_name("plane group (same l)");
  plane_j = all.split(j, i * q + l);
  plane_j->set_name("plane group (same j)");
}

}  // namespace llmp
