// The emulated NCCL (include/nccl.h) at 2 ranks, on what NCCL's documentation promises and a GPU
// run would show: two ranks on one device refused; a send on a stream holding back what is queued
// behind it until the peer receives (the issue-order deadlock), and the same exchange completing
// in one group; host buffers refused; ncclAvg as a pre-multiplied sum; 16-bit sums rounded once
// per addition. Run with LLMP_CUDA_EMULATOR_DEVICES=2 (BUILD).
//
// Glossary: r this rank, peer the other one.
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <cfloat>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/emulator/nccl_internal.h"

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A communicator over both ranks, each on `device` (its own when -1: device r).
ncclResult_t make_comm(ncclComm_t* comm, int device = -1) {
  const int r = world_rank();
  EXPECT_EQ(cudaSetDevice(device < 0 ? r : device), cudaSuccess);
  ncclUniqueId id;
  if (r == 0) {
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return ncclCommInitRank(comm, 2, id, r);
}

template <typename T>
T* device_array(size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return p;
}

TEST(EmulatedNccl, TwoRanksOnOneDeviceAreRefusedAsNcclDoes) {
  ncclComm_t comm = nullptr;
  EXPECT_EQ(make_comm(&comm, /*device=*/0), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("Duplicate GPU detected"),
            std::string::npos)
      << ncclGetLastError(nullptr);
}

TEST(EmulatedNccl, SendQueuedAheadOfRecvWaitsForThePeerButAGroupCompletes) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_comm(&comm), ncclSuccess);
  const int r = world_rank(), peer = 1 - r;
  const size_t n = 64;
  float* out = device_array<float>(n);
  float* in = device_array<float>(n);
  float host[64];
  for (size_t i = 0; i < n; ++i) host[i] = float(10 * r + i);
  cudaMemcpy(out, host, sizeof(host), cudaMemcpyHostToDevice);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);

  // Both send first, on one stream: each receive is queued behind a send the peer cannot take.
  ASSERT_EQ(ncclSend(out, n, ncclFloat32, peer, comm, s), ncclSuccess);
  ASSERT_EQ(ncclRecv(in, n, ncclFloat32, peer, comm, s), ncclSuccess);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << "a send completed with no receiver";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // "Not ready" stays the last error until cleared (note_not_ready: the stricter assumption).
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // cuda::event_done (cuda_check.h), as the NCCL backend's Work::test polls an operation: false
  // while the exchange hangs, with no "not ready" left behind for a launch check to report.
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_FALSE(llmp::cuda::event_done(ev));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "event_done left its not-ready behind";
  MPI_Barrier(MPI_COMM_WORLD);
  // Unstick it by hand, under the emulation: take the peer's send, then send what its queued
  // receive waits for.
  float scratch[64];
  MPI_Recv(scratch, n, MPI_FLOAT, peer, 0, comm->mpi, MPI_STATUS_IGNORE);
  MPI_Send(scratch, n, MPI_FLOAT, peer, 0, comm->mpi);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(llmp::cuda::event_done(ev));
  cudaEventDestroy(ev);

  // The same exchange in one group completes, with the peer's data.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(out, n, ncclFloat32, peer, comm, s), ncclSuccess);
  ASSERT_EQ(ncclRecv(in, n, ncclFloat32, peer, comm, s), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaMemcpy(host, in, sizeof(host), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(host[i], float(10 * peer + i)) << i;
  cudaStreamDestroy(s);
  ncclCommDestroy(comm);
}

TEST(EmulatedNccl, HostBuffersAreRefused) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_comm(&comm), ncclSuccess);
  float host[4] = {1, 2, 3, 4};
  EXPECT_EQ(ncclAllReduce(host, host, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("is not device memory"), std::string::npos)
      << ncclGetLastError(comm);
  ncclCommDestroy(comm);
}

TEST(EmulatedNccl, AvgIsAPreMultipliedSumAndEventsOrderStreams) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_comm(&comm), ncclSuccess);
  // FLT_MAX on both ranks: the sum then 1/2 overflows to inf; NCCL's x/2 + y/2 is FLT_MAX.
  float* x = device_array<float>(1);
  const float big = FLT_MAX;
  cudaMemcpy(x, &big, sizeof(big), cudaMemcpyHostToDevice);
  cudaStream_t s, after;
  cudaStreamCreate(&s);
  cudaStreamCreate(&after);
  cudaEvent_t done;
  cudaEventCreate(&done);
  ASSERT_EQ(ncclAllReduce(x, x, 1, ncclFloat32, ncclAvg, comm, s), ncclSuccess);
  cudaEventRecord(done, s);
  cudaStreamWaitEvent(after, done);
  // A copy on `after` waits for the all_reduce on `s` (through the event).
  float got = 0;
  ASSERT_EQ(cudaMemcpyAsync(&got, x, sizeof(got), cudaMemcpyDeviceToHost, after), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(got, FLT_MAX);
  cudaEventDestroy(done);
  cudaStreamDestroy(s);
  cudaStreamDestroy(after);
  ncclCommDestroy(comm);
}

TEST(EmulatedNccl, Bf16SumsRoundAtEachAddition) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_comm(&comm), ncclSuccess);
  // bf16 bits: 1.0 = 0x3F80, 2^-8 = 0x3B80. 1 + 2^-8 is half an ulp of 1: ties to even, 1.0.
  const uint16_t mine = world_rank() == 0 ? 0x3F80 : 0x3B80;
  uint16_t* d = device_array<uint16_t>(1);
  cudaMemcpy(d, &mine, 2, cudaMemcpyHostToDevice);
  ASSERT_EQ(ncclAllReduce(d, d, 1, ncclBfloat16, ncclSum, comm, nullptr), ncclSuccess);
  uint16_t got = 0;
  cudaMemcpy(&got, d, 2, cudaMemcpyDeviceToHost);  // legacy default stream: waits for it
  EXPECT_EQ(got, 0x3F80);
  ncclCommDestroy(comm);
}

}  // namespace
