// TensorParallelComm (see tensor_parallel_comm.h): each point of the model is one region operator.
#include "common/tp/tensor_parallel_comm.h"

#include "common/tp/mappings.h"

namespace llmp {

TensorParallelComm::TensorParallelComm(ProcessGroup& tp, bool sequence_parallel,
                                       ProcessGroup* regather, ProcessGroup* checkpoints)
    : tp_(tp),
      sp_(sequence_parallel),
      regather_(regather ? *regather : tp),
      checkpoints_(checkpoints ? *checkpoints : tp) {}

Tensor TensorParallelComm::enter_forward(const Tensor& x) {
  return sp_ ? tp::GatherFromSequenceRegion::forward(x, tp_) : tp::CopyToTpRegion::forward(x, tp_);
}

Tensor TensorParallelComm::enter_backward(Tensor d) {
  return sp_ ? tp::GatherFromSequenceRegion::backward(d, tp_)
             : tp::CopyToTpRegion::backward(std::move(d), tp_);
}

Tensor TensorParallelComm::exit_forward(Tensor y) {
  return sp_ ? tp::ReduceScatterToSequenceRegion::forward(y, tp_)
             : tp::ReduceFromTpRegion::forward(std::move(y), tp_);
}

Tensor TensorParallelComm::exit_backward(const Tensor& dy) {
  return sp_ ? tp::ReduceScatterToSequenceRegion::backward(dy, tp_)
             : tp::ReduceFromTpRegion::backward(dy, tp_);
}

Tensor TensorParallelComm::regather(const Tensor& x) {
  return sp_ ? tp::GatherFromSequenceRegion::forward(x, regather_) : x;
}

Tensor TensorParallelComm::partition_checkpoint(const Tensor& x) {
  const int t = tp_.size();
  if (t == 1 || sp_) return x;
  const int64_t part = x.numel() / t;  // t | C (t divides H, H divides C), so t | B·T·C
  Tensor mine = Tensor::empty({part}, x.dtype(), MemCategory::kActivations, x.device());
  mine.copy_from(x.view({x.numel()}).narrow(tp_.rank() * part, part));
  return mine;
}

Tensor TensorParallelComm::gather_checkpoint(const Tensor& part, const std::vector<int64_t>& shape) {
  if (tp_.size() == 1 || sp_) return part;
  Tensor whole = Tensor::empty(shape, part.dtype(), MemCategory::kActivations, part.device());
  Tensor flat = whole.view({whole.numel()});
  checkpoints_.all_gather(part, flat);  // rank r's part lands at [r·n/t, (r+1)·n/t)
  return whole;
}

void TensorParallelComm::all_reduce_max(Tensor& t) { tp_.all_reduce(t, ReduceOp::kMax); }

void TensorParallelComm::all_reduce_sum(Tensor& t) { tp_.all_reduce(t, ReduceOp::kSum); }

}  // namespace llmp
