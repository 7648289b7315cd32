// Gradient buckets: the flat gradient buffer cut into contiguous ranges of whole units, in the
// order backward finishes them, so that each range can be all-reduced as soon as it is final.
//
// Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
// VLDB, §3.2: gradient bucketing and overlapping computation with communication.
// One all_reduce per parameter is latency-bound (the paper measures it: small all_reduces waste
// bandwidth); one all_reduce of everything cannot start before backward ends. Buckets of about
// `cap` bytes sit between the two. The paper's rule, used here: walk the parameters in reverse
// order (≈ the order their gradients become ready), put them into the current bucket, close it
// once it holds ≥ cap bytes.
//
// Here the unit of readiness is a GPT unit (common/nn/unit_runner.h): forward_backward reports them in
// the order L+1, L, ..., 1, 0. Units are contiguous in the flat buffer, ordered 0..L+1, so a
// run of consecutive units in reverse order is ONE contiguous range and a bucket is a view
// (narrow) of the gradient buffer: no copy in or out (PyTorch's gradient_as_bucket_view=True).
//
//   flat buffer:  [ unit 0 | unit 1 | ... | unit L | unit L+1 ]
//   buckets:        bucket n-1  ...   bucket 1   |  bucket 0       (bucket 0 is launched first)
//
// A bucket is ready when its LOWEST unit is; unit 0 (the embeddings with the tied wte, which also
// gets the LM head's gradient first) is ready last, so the last bucket always ends the backward.
//
// Glossary: L layers, Ψ parameter count, cap bucket capacity in bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/gpt.h"

namespace llmp {

/// One bucket: elements [offset, offset + numel) of the flat gradient buffer, made of the whole
/// units first_unit ≥ u ≥ last_unit.
struct Bucket {
  int64_t offset = 0;  ///< first element (= unit_offset(last_unit))
  int64_t numel = 0;   ///< elements
  int first_unit = 0;  ///< highest unit: its gradient is final first
  int last_unit = 0;   ///< lowest unit: when it is final, the bucket's all_reduce can start
};

/// Buckets in launch order (bucket 0 holds unit L+1). Every bucket but the last holds ≥
/// cap_bytes; together they partition [0, Ψ). elem_bytes: bytes per gradient element (4 fp32).
/// Throws std::invalid_argument when cap_bytes < 1 or elem_bytes < 1.
std::vector<Bucket> make_buckets(const GPTLayout& layout, double cap_bytes, int elem_bytes = 4);

/// For each unit u, the index of the bucket whose all_reduce starts when u is ready, or -1 when
/// u is not the last unit of its bucket. Size: layout.num_units().
std::vector<int> launch_unit_table(const std::vector<Bucket>& buckets, int num_units);

}  // namespace llmp
