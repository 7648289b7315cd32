// ExpertParallelComm (expert_parallel_comm.h).
#include "stages/moe/expert_parallel_comm.h"

namespace llmp {

Tensor ExpertParallelComm::all_to_all(const Tensor& in) {
  Tensor out = Tensor::empty(in.shape(), in.dtype(), MemCategory::kCommBuffers);
  group_.all_to_all(in, out);  // chunk j of in to rank j; chunk i of out from rank i
  return out;
}

}  // namespace llmp
