// ExpertParallelComm (expert_parallel_comm.h).
#include "stages/moe/expert_parallel_comm.h"

namespace llmp {

Tensor ExpertParallelComm::all_to_all(const Tensor& in) {
  // On in's device: a device buffer's all_to_all is staged through the host by the backend.
  Tensor out = Tensor::empty(in.shape(), in.dtype(), MemCategory::kCommBuffers, in.device());
  group_.all_to_all(in, out);  // chunk j of in to rank j; chunk i of out from rank i
  return out;
}

}  // namespace llmp
