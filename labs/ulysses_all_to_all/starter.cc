// Lab ulysses_all_to_all: your implementation. Read README.md first, then ulysses_all_to_all.h
// (the full spec); run the tests with
//     bazel test //labs/ulysses_all_to_all:student_test
// They fail until the three functions below are done. Add helpers here as you like; the tests
// only call these three.
//
// What you may use: ProcessGroup::all_to_all (common/comm/process_group.h: chunk j of the input
// goes to rank j, chunk i of the output comes from rank i), Tensor::empty / view / dim / f32
// (common/tensor/tensor.h), std::memcpy. What you may not: any other communication (the tests
// count the calls and the bytes), or MPI directly.
//
// Glossary: p ranks, r this rank, Tl positions per rank, T = p·Tl, H heads, Hp = H/p, hs head
// size; (Tl, H, hs) is row-major: position, head, channel.
#include "labs/ulysses_all_to_all/ulysses_all_to_all.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace llmp::lab {

// TODO(lab ulysses_all_to_all): check x (3-D; H divisible by p: the header's messages), then
//   - pack a send buffer of p chunks of (Tl, Hp, hs): chunk j = this rank's positions of heads
//     [j·Hp, (j+1)·Hp), copied out of x row by row;
//   - all_to_all it into the (T, Hp, hs) output (viewed flat): chunk i arrives from rank i and
//     holds its positions, rows [i·Tl, (i+1)·Tl), of this rank's heads.
Tensor seq_to_heads(ProcessGroup& cp, const Tensor& x) {
  (void)cp, (void)x;  // TODO(lab ulysses_all_to_all): remove
  return Tensor();    // until then: no tensor at all
}

// TODO(lab ulysses_all_to_all): the mirror image: check y (3-D; T divisible by p), all_to_all
// y's rows as they are (chunk j = rows [j·Tl, (j+1)·Tl), for rank j), then unpack chunk i (this
// rank's positions of head group i) into heads [i·Hp, (i+1)·Hp) of a (Tl, H, hs) output.
Tensor heads_to_seq(ProcessGroup& cp, const Tensor& y) {
  (void)cp, (void)y;  // TODO(lab ulysses_all_to_all): remove
  return Tensor();
}

// TODO(lab ulysses_all_to_all): q, k and v to the head split (in the same order on every rank),
// attend once, the result back to the sequence split.
Tensor ulysses_attention(ProcessGroup& cp, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttendFn& attend) {
  (void)cp, (void)q, (void)k, (void)v, (void)attend;  // TODO(lab ulysses_all_to_all): remove
  return Tensor();
}

}  // namespace llmp::lab
