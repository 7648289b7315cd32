// Counter-based batch sampling. See sampler.h.
#include "common/data/sampler.h"

#include <stdexcept>
#include <string>

namespace llmp {

namespace {
void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}
}  // namespace

int64_t sequence_offset(uint64_t seed, int64_t step, int64_t seq, int64_t split_len, int T) {
  require(T >= 1, "sample: sequence length T=" + std::to_string(T) + " must be at least 1");
  require(step >= 0, "sample: step " + std::to_string(step) + " is negative");
  require(seq >= 0, "sample: sequence index " + std::to_string(seq) + " is negative");
  require(split_len >= static_cast<int64_t>(T) + 1,
          "sample: split of " + std::to_string(split_len) + " bytes is shorter than T+1 = " +
              std::to_string(T + 1));
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(step)) ^
                                static_cast<uint64_t>(seq));
  // split_len - T windows of T+1 bytes fit; the modulo bias (< 2^-40 for any real corpus) is
  // irrelevant here.
  return static_cast<int64_t>(h % static_cast<uint64_t>(split_len - T));
}

void sample(const Corpus::Split& split, uint64_t seed, int64_t step, int first_seq, int num_seqs,
            int T, int32_t* tokens, int32_t* targets) {
  require(first_seq >= 0 && num_seqs >= 0,
          "sample: bad slice first_seq=" + std::to_string(first_seq) +
              " num_seqs=" + std::to_string(num_seqs));
  require(tokens != nullptr || num_seqs == 0, "sample: tokens buffer is null");
  const uint8_t* bytes = split.bytes.data();
  for (int j = 0; j < num_seqs; ++j) {
    const int64_t o = sequence_offset(seed, step, first_seq + j, split.size(), T);
    int32_t* x = tokens + static_cast<int64_t>(j) * T;  // (T,) row j of (num_seqs, T)
    for (int t = 0; t < T; ++t) x[t] = bytes[o + t];
    if (targets != nullptr) {
      int32_t* y = targets + static_cast<int64_t>(j) * T;
      for (int t = 0; t < T; ++t) y[t] = bytes[o + t + 1];
    }
  }
}

BatchSlice rank_slice(int global_batch, int rank, int world) {
  require(world >= 1, "data-parallel size " + std::to_string(world) + " must be at least 1");
  require(rank >= 0 && rank < world,
          "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world) + ")");
  require(global_batch >= 1, "global batch " + std::to_string(global_batch) + " must be positive");
  require(global_batch % world == 0, "global batch " + std::to_string(global_batch) +
                                         " is not divisible by data-parallel size " +
                                         std::to_string(world));
  const int b = global_batch / world;
  return BatchSlice{rank * b, b};
}

}  // namespace llmp
