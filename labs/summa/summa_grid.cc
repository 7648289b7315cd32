// make_summa_grid (see summa_grid.h): the row and column groups of a q×q grid, by split.
#include "labs/summa/summa_grid.h"

#include <cmath>
#include <string>

#include "common/runtime/check.h"

namespace llmp {

SummaGrid make_summa_grid(ProcessGroup& group) {
  const int P = group.size();
  int q = static_cast<int>(std::lround(std::sqrt(static_cast<double>(P))));
  LLMP_CHECK(q * q == P, "summa: " + std::to_string(P) + " ranks are not a square q×q grid");
  SummaGrid g;
  g.q = q, g.i = group.rank() / q, g.j = group.rank() % q;
  g.row = group.split(/*color=*/g.i, /*key=*/g.j);  // same grid row i, ordered by column j
  g.row->set_name("row group");
  g.col = group.split(/*color=*/g.j, /*key=*/g.i);  // same grid column j, ordered by row i
  g.col->set_name("column group");
  return g;
}

}  // namespace llmp
