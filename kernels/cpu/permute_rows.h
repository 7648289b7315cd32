// The token permutations of a mixture of experts: tokens' rows into their experts' capacity slots
// and back, in one call over every assignment (Megatron-Core's permute / unpermute; the MoE
// sub-layer, common/nn/moe.cc, makes four per block and step: the dispatch, the combine and their
// backwards). The CUDA twin (kernels/cuda/permute_rows.h) is one launch where a copy per
// contiguous run of rows was about one device copy per token.
//
// An assignment a = t·k + j is token t's j-th expert choice (k per token); slots[a] is its row in
// the dispatch buffer (E, G, cap, ·) (moe_routing.h Routing::buffer_row), −1 when the expert's
// capacity dropped it. Its row on the token side is r(a) = j·row_j + t·row_t: the token itself
// (row_j 0, row_t 1), the assignment (1, k) or the (k, n, ·) layout of the dispatch's backward
// (n, 1).
//
// Glossary: n tokens, k experts per token, row_bytes = C elements × their size (any dtype: the
// rows are copied, not converted).
#pragma once

#include <cstdint>

namespace llmp {
namespace cpu {

/// For every assignment a in [0, n·k) with slots[a] ≥ 0: to_slots, dst row slots[a] = src row
/// r(a); otherwise dst row r(a) = src row slots[a] (r(a) = (a mod k)·row_j + (a div k)·row_t, rows
/// of row_bytes bytes). Rows of dst that no kept assignment names are left as they are (the
/// caller zeroes them: a dropped assignment contributes 0). The rows written must be distinct
/// (each slot holds one assignment; r is one-to-one where it is written); those read may repeat.
/// dst and src do not overlap.
void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                  int64_t row_t, bool to_slots, int64_t row_bytes);

}  // namespace cpu
}  // namespace llmp
