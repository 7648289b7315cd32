// device_for_rank: l mod D, with the argument checks. See the header.
#include "common/comm/device_for_rank.h"

#include <stdexcept>
#include <string>

namespace llmp {

namespace {
void check_sizes(int local_size, int device_count) {
  if (device_count <= 0)
    throw std::invalid_argument("no CUDA device on this node (device count " +
                                std::to_string(device_count) +
                                "): run on the CPU or on a node with a GPU");
  if (local_size <= 0)
    throw std::invalid_argument("local size " + std::to_string(local_size) +
                                " must be >= 1 (ranks on this node)");
}
}  // namespace

int device_for_rank(int local_rank, int local_size, int device_count) {
  check_sizes(local_size, device_count);
  if (local_rank < 0 || local_rank >= local_size)
    throw std::invalid_argument("local rank " + std::to_string(local_rank) +
                                " is outside [0, " + std::to_string(local_size) + ")");
  return local_rank % device_count;  // l < D when L <= D: one rank per GPU
}

bool ranks_share_devices(int local_size, int device_count) {
  check_sizes(local_size, device_count);
  return local_size > device_count;
}

}  // namespace llmp
