// device_for_rank against its definition, case by case (no MPI, no GPU): one rank per GPU when
// L <= D, round-robin sharing when L > D, and the errors.
// Glossary: l local rank, L ranks on the node, D devices on the node.
#include "common/comm/device_for_rank.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

namespace llmp {
namespace {

TEST(DeviceForRank, OneRankPerGpu) {
  // 4 ranks, 4 GPUs: each its own; 2 ranks on 8 GPUs: devices 0 and 1.
  for (int l = 0; l < 4; ++l) EXPECT_EQ(device_for_rank(l, 4, 4), l);
  EXPECT_EQ(device_for_rank(0, 2, 8), 0);
  EXPECT_EQ(device_for_rank(1, 2, 8), 1);
  EXPECT_FALSE(ranks_share_devices(4, 4));
  EXPECT_FALSE(ranks_share_devices(2, 8));
}

TEST(DeviceForRank, RoundRobinSharing) {
  // 4 ranks on 1 GPU: all on device 0. 5 ranks on 2 GPUs: 0 1 0 1 0, device 0 serves 3.
  for (int l = 0; l < 4; ++l) EXPECT_EQ(device_for_rank(l, 4, 1), 0);
  const int expected[5] = {0, 1, 0, 1, 0};
  std::map<int, int> load;
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(device_for_rank(l, 5, 2), expected[l]) << l;
    load[device_for_rank(l, 5, 2)] += 1;
  }
  EXPECT_EQ(load[0], 3);
  EXPECT_EQ(load[1], 2);
  EXPECT_TRUE(ranks_share_devices(4, 1));
  EXPECT_TRUE(ranks_share_devices(5, 2));
}

std::string error_of(int l, int L, int D) {
  try {
    device_for_rank(l, L, D);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceForRank, ErrorsNameTheValue) {
  EXPECT_EQ(error_of(0, 2, 0),
            "no CUDA device on this node (device count 0): run on the CPU or on a node with a GPU");
  EXPECT_NE(error_of(0, 1, -1).find("device count -1"), std::string::npos);
  EXPECT_EQ(error_of(2, 2, 4), "local rank 2 is outside [0, 2)");
  EXPECT_EQ(error_of(-1, 2, 4), "local rank -1 is outside [0, 2)");
  EXPECT_EQ(error_of(0, 0, 4), "local size 0 must be >= 1 (ranks on this node)");
  EXPECT_THROW(ranks_share_devices(3, 0), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
