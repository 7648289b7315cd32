// Lab ddp_buckets: your implementation. Read README.md first, then ddp_buckets.h (the full
// spec); run the tests with
//     bazel test //labs/ddp_buckets:student_test
// They fail until the three functions below are done. Add members to State and helpers here as
// you like; the tests only call GradBucketer's public functions.
//
// What you may use: ProcessGroup::all_reduce_async with ReduceOp::kAvg and Work::wait
// (common/comm/process_group.h), Tensor::narrow (common/tensor/tensor.h). What you may not: the
// blocking all_reduce (a rank would wait inside on_grad_ready for the others: the tests see it),
// any other communication (they count the calls and the bytes), or MPI directly.
//
// Glossary: P parameters, Ψ elements, b bucket index, cap the bucket capacity in bytes.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "labs/ddp_buckets/ddp_buckets.h"

namespace llmp::lab {

// TODO(lab ddp_buckets): what a GradBucketer keeps. For example: the group and grads; per
// parameter its bucket; per bucket its range of grads (begin, numel) and how many of its
// parameters are not ready yet this step; the next bucket to start; this step's Works (and the
// views they reduce, which must stay alive until waited for).
struct GradBucketer::State {};

// TODO(lab ddp_buckets): check the arguments (the messages in ddp_buckets.h), then make the
// buckets: parameters P-1 down to 0, a bucket closing once it holds >= cap_bytes (4 bytes an
// element), the last one holding the rest.
GradBucketer::GradBucketer(ProcessGroup& dp, Tensor& grads, const std::vector<int64_t>& sizes,
                           int64_t cap_bytes)
    : s_(std::make_unique<State>()) {
  (void)dp, (void)grads, (void)sizes, (void)cap_bytes;  // TODO(lab ddp_buckets): remove
}

GradBucketer::~GradBucketer() = default;

// TODO(lab ddp_buckets): check i (the messages in ddp_buckets.h); mark it ready; then start, in
// bucket order, every bucket from the next one on whose parameters are all ready: an
// all_reduce_async(view, ReduceOp::kAvg) of its range of grads. Do not wait here.
void GradBucketer::on_grad_ready(int i) {
  (void)i;  // TODO(lab ddp_buckets): remove
}

// TODO(lab ddp_buckets): refuse a step with parameters not ready (std::logic_error, the message
// in ddp_buckets.h); wait for this step's all_reduces; reset for the next step.
void GradBucketer::finish() {}

}  // namespace llmp::lab
