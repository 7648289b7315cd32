// NcclProcessGroup against the MPI backend: every collective on device tensors over NCCL gives
// the result the MPI backend gives on the same host tensors, and the same CommStats. Inputs are
// small integers (x_r[i] = r + 1 + i mod 7), so every sum is exact in f32 whatever order NCCL or
// MPI adds in, and the comparison is equality.
//
// Needs one GPU per rank (2 ranks, 2 GPUs): with fewer (one, or none, or no driver) every test is
// SKIPPED with the reason printed. THIS TEST HAS NEVER RUN ON A GPU: it was only compiled, on a
// machine with the CUDA toolkit and no GPU, where it skips. Its emulated twin
// (nccl_process_group_emulated_test, common/comm/BUILD) runs it on the CUDA emulator's NCCL.
//
// Glossary: N ranks, r this rank, k elements per chunk.
#include "common/comm/nccl_process_group.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "common/comm/device_for_rank.h"
#include "common/comm/local_rank.h"
#ifdef LLMP_CUDA_EMULATOR
#include "kernels/cuda/emulator/api_counts.h"
#endif

namespace llmp {
namespace {

Tensor make(int64_t n, int r) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = float(r + 1 + i % 7);
  return t;
}

Tensor on_device(const Tensor& h) {
  Tensor d = Tensor::empty(h.shape(), h.dtype(), MemCategory::kOther, Device::kCUDA);
  d.copy_from(h);
  return d;
}

void expect_equal(const Tensor& host, const Tensor& dev) {
  Tensor back = Tensor::empty(dev.shape(), dev.dtype());
  back.copy_from(dev);
  for (int64_t i = 0; i < host.numel(); ++i)
    EXPECT_EQ(back.f32()[i], host.f32()[i]) << "element " << i;
}

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_comm_timeout(60);  // a deadlock ends the job naming the wait (exit 124), not a hang
    mpi = ProcessGroup::world();
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    cudaGetLastError();
    if (err != cudaSuccess)
      GTEST_SKIP() << "no CUDA device (" << cudaGetErrorName(err)
                   << "): NcclProcessGroup needs one GPU per rank";
    if (count < mpi->size())
      GTEST_SKIP() << "NcclProcessGroup needs one GPU per rank: " << mpi->size() << " ranks, "
                   << count << " GPU(s)";
    const LocalRank l = node_local_rank();
    ASSERT_EQ(cudaSetDevice(device_for_rank(l.rank, l.size, count)), cudaSuccess);
    nccl = NcclProcessGroup::create(*mpi);
    N = mpi->size();
    r = mpi->rank();
  }
  void TearDown() override { set_comm_timeout(0); }
  void expect_same_stats() const {
    EXPECT_EQ(nccl->stats().bytes, mpi->stats().bytes);
    EXPECT_EQ(nccl->stats().calls, mpi->stats().calls);
  }
  std::shared_ptr<ProcessGroup> mpi, nccl;
  int N = 1, r = 0;
};

TEST_F(NcclTest, AllReduceSumAvgMax) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    Tensor h = make(1000, r), d = on_device(h);
    mpi->all_reduce(h, op);
    nccl->all_reduce(d, op);
    expect_equal(h, d);
  }
  expect_same_stats();
}

TEST_F(NcclTest, ReduceScatterAllGatherInPlace) {
  const int64_t k = 33;
  Tensor in = make(N * k, r), out = Tensor::zeros({k}), din = on_device(in), dout = on_device(out);
  mpi->reduce_scatter(in, out);
  nccl->reduce_scatter(din, dout);
  expect_equal(out, dout);
  Tensor flat = make(N * k, 50), dflat = on_device(flat);
  Tensor shard = flat.narrow(r * k, k), dshard = dflat.narrow(r * k, k);
  mpi->all_gather(shard, flat);
  nccl->all_gather(dshard, dflat);
  expect_equal(flat, dflat);
  expect_same_stats();
}

TEST_F(NcclTest, UnevenFormsAndAllToAll) {
  std::vector<int64_t> counts(N);
  int64_t total = 0;
  for (int i = 0; i < N; ++i) total += counts[i] = i == 1 ? 0 : 5 + i;
  Tensor in = make(total, r), out = Tensor::zeros({counts[r]});
  Tensor din = on_device(in), dout = on_device(out);
  mpi->reduce_scatter_v(in, out, counts, ReduceOp::kAvg);
  nccl->reduce_scatter_v(din, dout, counts, ReduceOp::kAvg);
  expect_equal(out, dout);
  Tensor gin = make(counts[r], r), gout = Tensor::zeros({total});
  Tensor dgin = on_device(gin), dgout = on_device(gout);
  mpi->all_gather_v(gin, gout, counts);
  nccl->all_gather_v(dgin, dgout, counts);
  expect_equal(gout, dgout);
  Tensor a = make(4 * N, 10 * r), b = Tensor::zeros({4 * N}), da = on_device(a), db = on_device(b);
  mpi->all_to_all(a, b);
  nccl->all_to_all(da, db);
  expect_equal(b, db);
  expect_same_stats();
}

TEST_F(NcclTest, BroadcastReduceSendRecvBarrier) {
  Tensor b = make(64, r), db = on_device(b);
  mpi->broadcast(b, N - 1);
  nccl->broadcast(db, N - 1);
  expect_equal(b, db);
  Tensor t = make(64, r), dt = on_device(t);
  mpi->reduce(t, 0);
  nccl->reduce(dt, 0);
  expect_equal(t, dt);
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  Tensor s = make(100, r), h = Tensor::zeros({100}), ds = on_device(s), dh = on_device(h);
  if (r % 2 == 0) {
    nccl->send(ds, next);
    nccl->recv(dh, prev);
  } else {
    nccl->recv(dh, prev);
    nccl->send(ds, next);
  }
  expect_equal(make(100, prev), dh);
  nccl->barrier();
  auto sub = nccl->split(/*color=*/r % 2, /*key=*/-r);  // same parity, in reverse rank order
  std::vector<int> expected;
  for (int q = N - 1; q >= 0; --q)
    if (q % 2 == r % 2) expected.push_back(q);
  EXPECT_EQ(sub->world_ranks(), expected);
  Tensor x = make(16, r), dx = on_device(x);
  mpi->split(r % 2, -r)->all_reduce(x);
  sub->all_reduce(dx);
  expect_equal(x, dx);
  EXPECT_EQ(nccl->stats().calls.at("barrier"), 1);
}

// 1F1B's exchange between neighbours: every rank sends first, then receives (send_forward then
// recv_backward against the peer's send_backward then recv_forward). NCCL's sends wait for their
// receivers, in order on a stream, so this completes only because each direction has a stream
// of its own; the watchdog ends a deadlock (exit 124) instead of hanging the test.
TEST_F(NcclTest, NeighboursSendingFirstDoNotWaitForEachOther) {
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  Tensor s = on_device(make(4096, r)), h = on_device(Tensor::zeros({4096}));
  std::shared_ptr<Work> sent = nccl->isend(s, next);
  std::shared_ptr<Work> got = nccl->irecv(h, prev);
  got->wait();
  sent->wait();
  expect_equal(make(4096, prev), h);
}

// Host tensors (a stage's loss) travel over the MPI twin, and a mixed pair (ZeRO-Offload's device
// gradients into a host shard) over the twin with the device side staged; counted the same.
TEST_F(NcclTest, HostTensorsGoOverTheMpiTwin) {
  Tensor h = make(10, r), hm = make(10, r);
  nccl->all_reduce(h);
  mpi->all_reduce(hm);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(h.f32()[i], hm.f32()[i]);
  expect_same_stats();
}

// ZeRO-Offload's pair: device gradients reduce-scattered into a host shard, even and uneven (a
// unit's range: zero2's reduce_scatter_v, one rank's share empty). NCCL reduces on the devices,
// then each rank's share is copied down: the MPI backend's result and bytes. On the emulator,
// which counts its calls (kernels/cuda/emulator/api_counts.h), also that the reduction ran on
// NCCL and only this rank's share came down (not the whole input staged through the twin).
TEST_F(NcclTest, DeviceToHostReduceScatterReducesOnNcclAndCopiesTheShareDown) {
  std::vector<int64_t> counts(N);
  int64_t total = 0;
  for (int i = 0; i < N; ++i) total += counts[i] = i == 1 ? 0 : 6 + i;
  const int64_t k = 6;
  Tensor in = make(N * k, r), out = Tensor::zeros({k}), din = on_device(in);
  Tensor in_v = make(total, r), out_v = Tensor::zeros({counts[r]}), din_v = on_device(in_v);
  mpi->reduce_scatter(in, out);
  mpi->reduce_scatter_v(in_v, out_v, counts);
#ifdef LLMP_CUDA_EMULATOR
  namespace emu = cuda::emu;
  auto calls = [](emu::CallKind c, const char* name) { return emu::counted_calls(c, name); };
  const double rs0 = calls(emu::CallKind::kNccl, "ncclReduceScatter"),
               reduce0 = calls(emu::CallKind::kNccl, "ncclReduce"),
               down0 = calls(emu::CallKind::kCopy, "cudaMemcpyAsync D2H");
#endif
  Tensor host_out = Tensor::zeros({k}), host_out_v = Tensor::zeros({counts[r]});
  nccl->reduce_scatter(din, host_out);
  nccl->reduce_scatter_v(din_v, host_out_v, counts);
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(host_out.f32()[i], out.f32()[i]) << "element " << i;
  for (int64_t i = 0; i < counts[r]; ++i)
    EXPECT_EQ(host_out_v.f32()[i], out_v.f32()[i]) << "uneven, element " << i;
  expect_same_stats();
#ifdef LLMP_CUDA_EMULATOR
  EXPECT_EQ(calls(emu::CallKind::kNccl, "ncclReduceScatter") - rs0, 1);
  EXPECT_EQ(calls(emu::CallKind::kNccl, "ncclReduce") - reduce0, N - 1)
      << "one per non-empty share";
  EXPECT_EQ(calls(emu::CallKind::kCopy, "cudaMemcpyAsync D2H") - down0, counts[r] > 0 ? 2 : 1)
      << "each non-empty share copied down once";
#endif
}

}  // namespace
}  // namespace llmp
