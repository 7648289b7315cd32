// resolve_backend and the NCCL backend's registration (backend.h).
#include "common/comm/backend.h"

#include "common/runtime/check.h"

namespace llmp {
namespace {
NcclGroupMaker& maker() {
  static NcclGroupMaker m = nullptr;
  return m;
}
}  // namespace

std::string resolve_backend(const std::string& asked, bool nccl_linked, int world_size,
                            int local_size, int device_count, std::string* why) {
  const bool one_gpu_each = device_count > 0 && local_size <= device_count;
  if (asked == "mpi") return "mpi";
  if (asked == "auto") return nccl_linked && world_size > 1 && one_gpu_each ? "nccl" : "mpi";
  if (asked != "nccl") {
    *why = "--backend " + asked + ": expected auto, mpi or nccl";
    return "";
  }
  if (!nccl_linked) {
    *why =
        "--backend nccl: this binary has no NCCL (built without the CUDA toolkit); use "
        "--backend mpi";
    return "";
  }
  if (!one_gpu_each) {
    *why = "--backend nccl: " + std::to_string(local_size) + " ranks on this node share " +
           std::to_string(device_count) +
           " GPU(s), and NCCL needs one GPU per rank; use --backend mpi (host staging) or fewer "
           "ranks";
    return "";
  }
  return "nccl";
}

void register_nccl_backend(NcclGroupMaker make) { maker() = make; }

bool nccl_linked() { return maker() != nullptr; }

std::shared_ptr<ProcessGroup> make_nccl_group(ProcessGroup& host_group) {
  if (!maker()) fail_at(__FILE__, __LINE__, "make_nccl_group: NCCL is not linked in");
  return maker()(host_group);
}

}  // namespace llmp
