// setup_device (device_setup.h).
#include "common/train/device_setup.h"

#include "common/comm/backend.h"
#include "common/comm/device_for_rank.h"
#include "common/comm/local_rank.h"
#include "common/runtime/check.h"
#include "common/runtime/log.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

std::shared_ptr<ProcessGroup> setup_device(const TrainConfig& cfg,
                                           std::shared_ptr<ProcessGroup> world) {
  KernelOps& ops = kernel_ops(Device::kCUDA);
  const LocalRank local = node_local_rank();  // collective over the world
  const int D = ops.device_count();
  ops.set_device(device_for_rank(local.rank, local.size, D));
  ops.set_tf32(cfg.tf32);

  std::string why;
  const std::string here =
      resolve_backend(cfg.backend, nccl_linked(), world->size(), local.size, D, &why);
  all_ranks_ok(why.empty(), why);  // --backend nccl on a node where it cannot run
  // auto: nccl only if every rank's node allows it (nodes may differ in GPUs per rank).
  Tensor wants_mpi = Tensor::zeros({1}, DType::kF32);
  wants_mpi.f32()[0] = here == "mpi" ? 1.0f : 0.0f;
  world->duplicate()->all_reduce(wants_mpi);  // not counted in the world's own CommStats
  const bool nccl = wants_mpi.f32()[0] == 0.0f;
  log_info("device: cuda, {} GPU(s) and {} rank(s) on rank 0's node", D, local.size);
  return nccl ? make_nccl_group(*world) : world;
}

}  // namespace llmp
