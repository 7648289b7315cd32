// Lab ring_all_reduce, reference solution (for instructors; students start from ../starter.cc).
//
// Ring all-reduce (Patarasuk & Yuan 2009): cut the data into N chunks; in N-1 reduce-scatter
// steps each chunk travels once round the ring collecting every rank's contribution, in N-1
// all-gather steps each finished chunk travels round again being copied. Every step, every rank
// sends one chunk right and receives one from the left, so all N links are busy at once and each
// rank sends 2(N-1) chunks of ~S/N bytes: 2(N-1)/N·S, independent of N for large N (bandwidth
// optimal: each rank must receive at least (N-1)/N·S and send as much).
//
// Glossary: N ranks, r this rank, n elements, c_i / off_i size and start of chunk i, s step.
#include <algorithm>
#include <memory>

#include "common/runtime/check.h"
#include "labs/ring_all_reduce/ring_all_reduce.h"

namespace llmp {

namespace {

// Chunk i of n elements over N ranks: the first n mod N chunks hold one extra element.
struct Chunks {
  int64_t n, N;
  int64_t size(int64_t i) const { return n / N + (i < n % N ? 1 : 0); }
  int64_t offset(int64_t i) const { return i * (n / N) + std::min(i, n % N); }
};

// Non-negative a mod N (C++'s % keeps the sign of a: (-1) % 4 == -1).
int mod(int a, int N) { return ((a % N) + N) % N; }

// One ring step: post the receive, post the send, then wait for both. Neither waits for the
// other to be matched first, so no rank blocks in a send while its neighbour blocks in its own
// send (the deadlock of a blocking send on every rank once messages are too large to be buffered).
void exchange(ProcessGroup& group, const Tensor& out, int dst, Tensor& in, int src) {
  std::shared_ptr<Work> recv = group.irecv(in, src);
  std::shared_ptr<Work> send = group.isend(out, dst);
  recv->wait();
  send->wait();
}

}  // namespace

void ring_all_reduce(ProcessGroup& group, Tensor& data) {
  LLMP_CHECK(data.device() == Device::kCPU && data.dtype() == DType::kF32,
             "ring_all_reduce sums host f32 tensors, got " + data.describe());
  const int N = group.size(), r = group.rank();
  if (N == 1) return;  // the sum over one rank is its own data
  Tensor flat = data.view({data.numel()});
  const Chunks ch{flat.numel(), N};
  auto chunk = [&](int i) { return flat.narrow(ch.offset(i), ch.size(i)); };
  const int right = mod(r + 1, N), left = mod(r - 1, N);

  // Scratch for one incoming chunk: the largest chunk is chunk 0, ceil(n/N) elements.
  Tensor scratch = Tensor::empty({ch.size(0)}, DType::kF32, MemCategory::kCommBuffers);

  // 1. Reduce-scatter. After step s, chunk (r-s-1) mod N on rank r holds the sum of s+2 ranks'
  //    contributions (ranks r-s-1 .. r); after N-1 steps, chunk (r+1) mod N holds all N.
  for (int s = 0; s < N - 1; ++s) {
    const int send_i = mod(r - s, N), recv_i = mod(r - s - 1, N);
    Tensor in = scratch.narrow(0, ch.size(recv_i));
    exchange(group, chunk(send_i), right, in, left);
    float* acc = chunk(recv_i).f32();
    const float* add = in.f32();
    for (int64_t j = 0; j < in.numel(); ++j) acc[j] += add[j];  // (c_i) += (c_i)
  }

  // 2. All-gather. Rank r starts with the finished chunk (r+1) mod N and passes it on; each
  //    chunk received is final, so it lands straight in data (no addition: every rank ends with
  //    the same bits).
  for (int s = 0; s < N - 1; ++s) {
    const int send_i = mod(r + 1 - s, N), recv_i = mod(r - s, N);
    Tensor in = chunk(recv_i);
    exchange(group, chunk(send_i), right, in, left);
  }
}

}  // namespace llmp
