// The token permutations of a mixture of experts on the GPU: the twin of kernels/cpu/permute_rows.h
// (Megatron-Core's permute / unpermute), every assignment's row in one launch.
//
// Launch shape: a block per assignment (grid-stride over the n·k assignments, at most kMaxBlocks
// blocks), its threads over the row's words: 4-byte words when the row's bytes and both pointers
// allow, else 2-byte, else single bytes (a copy: the dtype does not matter). A dropped
// assignment's block does nothing.
// Glossary: n tokens, k experts per token. Device pointers (slots too), on stream(), asynchronous.
#pragma once

#include <cstdint>

namespace llmp {
namespace cuda {

/// cpu::permute_rows on device memory: for every assignment a in [0, n·k) with slots[a] ≥ 0,
/// to_slots dst row slots[a] = src row r(a), else dst row r(a) = src row slots[a], with
/// r(a) = (a mod k)·row_j + (a div k)·row_t and rows of row_bytes bytes.
void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                  int64_t row_t, bool to_slots, int64_t row_bytes);

}  // namespace cuda
}  // namespace llmp
