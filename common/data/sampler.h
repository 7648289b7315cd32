// Deterministic distributed sampling: the global batch at step s is a pure function of
// (seed, split, step, global batch, T), whatever the number of ranks.
//
// Sequence i of step s starts at
//     offset(i) = h(seed, s, i) mod (len - T)          h = chained splitmix64 (Steele et al. 2014)
// and is the T+1 bytes [offset, offset + T]: tokens = bytes[offset, offset+T),
// targets = bytes[offset+1, offset+T+1). There are exactly len-T such windows in a split of
// len bytes, so every window can be drawn (a split needs len ≥ T+1; Corpus::load ensures it).
//
// Counter-based, not a stream: rank r of N computes only its slice of the B sequences,
// [r·B/N, (r+1)·B/N), without generating the others. Concatenating the slices of any N gives
// the same global batch as N = 1, which is what lets every parallel stage be compared
// bit-for-bit against the single-rank baseline on identical data.
//
// Glossary: B global batch (sequences per optimizer step, all ranks together), N data-parallel
// ranks, r rank, T sequence length, s step, i sequence index within the global batch (0..B).
#pragma once

#include <cstdint>

#include "common/data/corpus.h"
#include "common/runtime/splitmix64.h"  // splitmix64

namespace llmp {


/// Start offset (bytes) of sequence `seq` of step `step` in a split of `split_len` bytes:
/// splitmix64(splitmix64(splitmix64(seed) ^ step) ^ seq) mod (split_len - T), in [0, split_len-T).
/// Throws std::invalid_argument when split_len < T+1, T < 1, step < 0 or seq < 0.
int64_t sequence_offset(uint64_t seed, int64_t step, int64_t seq, int64_t split_len, int T);

/// Fills sequences [first_seq, first_seq + num_seqs) of the global batch of step `step`.
///   tokens  (num_seqs, T) int32, row j = split bytes [o, o+T)   with o = sequence_offset(.., first_seq+j, ..)
///   targets (num_seqs, T) int32, row j = split bytes [o+1, o+T+1) (tokens shifted by one)
/// Both buffers are caller-owned, row-major, num_seqs*T elements. targets may be null (eval of
/// perplexity needs it, generation does not). Throws std::invalid_argument on a negative
/// first_seq/num_seqs/step, T < 1, null tokens, or a split shorter than T+1 bytes.
void sample(const Corpus::Split& split, uint64_t seed, int64_t step, int first_seq, int num_seqs,
            int T, int32_t* tokens, int32_t* targets);

/// The slice of a global batch of B sequences that data-parallel rank r of N owns:
/// first = r·B/N, count = B/N. Throws std::invalid_argument("global batch 30 is not divisible by
/// data-parallel size 4") when N does not divide B, or when N < 1, r ∉ [0, N) or B < 1.
struct BatchSlice {
  int first_seq = 0;
  int num_seqs = 0;
};
BatchSlice rank_slice(int global_batch, int rank, int world);

}  // namespace llmp
