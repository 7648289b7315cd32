// TpModel (see tp_model.h).
#include "common/tp/tp_model.h"

namespace llmp {

TpModel::TpModel(const GPTConfig& cfg, ProcessGroup& tp, bool sequence_parallel, Device device,
                 DType act)
    : regather_group(tp.duplicate()),
      grad_group(tp.duplicate()),
      checkpoint_group(tp.duplicate()) {
  comm = std::make_unique<TensorParallelComm>(tp, sequence_parallel, regather_group.get(),
                                              checkpoint_group.get());
  // Throws when t does not divide H, 4C or V (GPTLayout).
  slice = std::make_unique<GPT>(GPT(cfg, *comm, act).with_device(device));
}

void all_reduce_packed(ProcessGroup& g, const Tensor& buf,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t n = 0;
  for (auto [at, len] : ranges) n += len;
  Tensor packed = Tensor::empty({n}, buf.dtype(), MemCategory::kCommBuffers, buf.device());
  int64_t k = 0;
  for (auto [at, len] : ranges) packed.narrow(k, len).copy_from(buf.narrow(at, len)), k += len;
  g.all_reduce(packed, ReduceOp::kSum);
  k = 0;
  for (auto [at, len] : ranges) buf.narrow(at, len).copy_from(packed.narrow(k, len)), k += len;
}

}  // namespace llmp
