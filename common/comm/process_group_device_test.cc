// The MPI backend on device tensors (process_group_staging.h), on a FakeDevice: host memory
// registered as Device::kCUDA that counts copies by direction (common/testing/fake_device.h).
//
// Each test runs one operation twice, on host tensors over group `host` and on device copies of
// the same tensors over group `dev` (a duplicate of the same ranks), and asserts:
//   1. the device results, copied back, are bit-identical to the host results (memcmp);
//   2. the two groups' CommStats are identical (staging changes no collective byte count);
//   3. the FakeDevice saw exactly the copies the operation must make (header of
//      process_group_staging.h): all_reduce S down + S up, all_gather input down + output up,
//      send S down + 0 up, ...; and dev->staging_stats() counted those same bytes.
// Inputs are rank-valued with fractions (x_r[i] = r/3 + 0.1·i + 1) so that sums round and a
// result computed elsewhere than in MPI's order would differ in its bits.
//
// Glossary: N ranks, r this rank, k elements per chunk, S bytes of the full tensor;
// "down" = device -> host (d2h), "up" = host -> device (h2d).
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "common/comm/process_group.h"
#include "common/comm/process_group_staging.h"
#include "common/testing/fake_device.h"

namespace llmp {
namespace {

Tensor make(int64_t n, int r, DType dtype = DType::kF32) {
  Tensor f = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) f.f32()[i] = r / 3.0f + 0.1f * i + 1;
  if (dtype == DType::kF32) return f;
  Tensor h = Tensor::empty({n}, DType::kBF16);  // bf16 by its upper 16 bits (truncation)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &f.f32()[i], 4);
    h.data<uint16_t>()[i] = uint16_t(u >> 16);
  }
  return h;
}

// Bytes one operation moved: measured on the FakeDevice and as the group counted them.
struct Moved {
  int64_t down = 0, up = 0;                  // FakeDevice d2h, h2d
  int64_t staged_down = 0, staged_up = 0;    // dev->staging_stats() to_host, to_device
};

class DeviceCommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_comm_timeout(30);  // a planted bug that desynchronises ranks ends the job, not hangs
    host = ProcessGroup::world();
    dev = host->duplicate();
    N = host->size();
    r = host->rank();
  }
  // A device tensor holding `h`'s bytes (its copy is set up here, outside any measurement).
  Tensor to_dev(const Tensor& h) {
    Tensor d = Tensor::empty(h.shape(), h.dtype(), MemCategory::kOther, Device::kCUDA);
    d.copy_from(h);
    return d;
  }
  static Tensor to_host(const Tensor& d) {
    Tensor h = Tensor::empty(d.shape(), d.dtype());
    h.copy_from(d);
    return h;
  }
  // The copies `op` makes, and what the group counted for them.
  Moved measure(const std::function<void()>& op) {
    const int64_t d2h = fake.d2h_bytes(), h2d = fake.h2d_bytes();
    const StagingStats s = dev->staging_stats();
    op();
    Moved m;
    m.down = fake.d2h_bytes() - d2h;
    m.up = fake.h2d_bytes() - h2d;
    m.staged_down = dev->staging_stats().to_host_bytes - s.to_host_bytes;
    m.staged_up = dev->staging_stats().to_device_bytes - s.to_device_bytes;
    return m;
  }
  static void expect_moved(const Moved& m, int64_t down, int64_t up) {
    EXPECT_EQ(m.down, down) << "bytes copied device -> host";
    EXPECT_EQ(m.up, up) << "bytes copied host -> device";
    EXPECT_EQ(m.staged_down, m.down) << "staging_stats().to_host_bytes against the device's count";
    EXPECT_EQ(m.staged_up, m.up) << "staging_stats().to_device_bytes against the device's count";
  }
  static void expect_same_bits(const Tensor& host_result, const Tensor& dev_result) {
    Tensor back = to_host(dev_result);
    ASSERT_EQ(back.nbytes(), host_result.nbytes());
    EXPECT_EQ(std::memcmp(back.raw(), host_result.raw(), back.nbytes()), 0)
        << "device result differs from the host result, " << back.describe();
  }
  void expect_same_stats() const {
    EXPECT_EQ(dev->stats().bytes, host->stats().bytes);
    EXPECT_EQ(dev->stats().calls, host->stats().calls);
    EXPECT_DOUBLE_EQ(dev->stats().total_bytes(), host->stats().total_bytes());
  }

  testing::FakeDevice fake;
  std::shared_ptr<ProcessGroup> host, dev;
  int N = 1, r = 0;
};

// Sum, mean and max, f32 and bf16 (the 16-bit op of mpi_float16.h), small then larger: the
// second call reuses the first's buffer only if it holds enough bytes.
TEST_F(DeviceCommTest, AllReduceSumAvgMax) {
  struct Case { int64_t n; ReduceOp op; DType dtype; };
  for (Case c : {Case{37, ReduceOp::kSum, DType::kF32}, Case{100, ReduceOp::kAvg, DType::kF32},
                 Case{64, ReduceOp::kMax, DType::kF32}, Case{50, ReduceOp::kSum, DType::kBF16},
                 Case{90, ReduceOp::kAvg, DType::kBF16}}) {
    Tensor h = make(c.n, r, c.dtype), d = to_dev(h);
    host->all_reduce(h, c.op);
    expect_moved(measure([&] { dev->all_reduce(d, c.op); }), h.nbytes(), h.nbytes());
    expect_same_bits(h, d);
  }
  expect_same_stats();
}

TEST_F(DeviceCommTest, ReduceScatterAndV) {
  const int64_t k = 6;
  Tensor in = make(N * k, r), out = Tensor::zeros({k}), din = to_dev(in), dout = to_dev(out);
  host->reduce_scatter(in, out, ReduceOp::kAvg);
  expect_moved(measure([&] { dev->reduce_scatter(din, dout, ReduceOp::kAvg); }), in.nbytes(),
               out.nbytes());
  expect_same_bits(out, dout);
  expect_same_bits(in, din);  // the input is read, never written
  std::vector<int64_t> counts(N);
  for (int i = 0; i < N; ++i) counts[i] = i == 1 ? 0 : 3 + 2 * i;  // ragged, one empty
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor vin = make(total, r), vout = Tensor::zeros({counts[r]});
  Tensor dvin = to_dev(vin), dvout = to_dev(vout);
  host->reduce_scatter_v(vin, vout, counts);
  expect_moved(measure([&] { dev->reduce_scatter_v(dvin, dvout, counts); }), vin.nbytes(),
               vout.nbytes());
  expect_same_bits(vout, dvout);
  expect_same_stats();
}

TEST_F(DeviceCommTest, AllGatherAndInPlace) {
  const int64_t k = 5;
  Tensor in = make(k, r), out = Tensor::zeros({N * k}), din = to_dev(in), dout = to_dev(out);
  host->all_gather(in, out);
  expect_moved(measure([&] { dev->all_gather(din, dout); }), in.nbytes(), out.nbytes());
  expect_same_bits(out, dout);
  // ZeRO's in-place form: the shard is chunk r of the flat buffer; the other chunks hold stale
  // values that the gather must overwrite. Only the shard goes down. New values (not the first
  // gather's): the reused staging buffer still holds that gather's output, which must not pass.
  Tensor in2 = make(k, 10 + r), out2 = Tensor::zeros({N * k});
  host->all_gather(in2, out2);
  Tensor flat = make(N * k, -3), dflat = to_dev(flat);
  Tensor shard = flat.narrow(r * k, k), dshard = dflat.narrow(r * k, k);
  shard.copy_from(in2);
  dshard.copy_from(to_dev(in2));
  host->all_gather(shard, flat);
  expect_moved(measure([&] { dev->all_gather(dshard, dflat); }), k * 4, N * k * 4);
  expect_same_bits(flat, dflat);
  expect_same_bits(out2, dflat);  // in place or not, the same gather
  dev->all_gather(din, dout);     // keeps the two groups' call counts equal
  expect_same_stats();
}

TEST_F(DeviceCommTest, AllGatherVRaggedAndInPlace) {
  std::vector<int64_t> counts(N);
  for (int i = 0; i < N; ++i) counts[i] = i == 1 ? 0 : 2 + i;
  int64_t total = 0, before = 0;
  for (int i = 0; i < N; ++i) total += counts[i], before += i < r ? counts[i] : 0;
  Tensor in = make(counts[r], r), out = Tensor::zeros({total});
  Tensor din = to_dev(in), dout = to_dev(out);
  host->all_gather_v(in, out, counts);
  expect_moved(measure([&] { dev->all_gather_v(din, dout, counts); }), in.nbytes(), out.nbytes());
  expect_same_bits(out, dout);
  // In place, with new values: the reused staging buffer still holds the first gather's output.
  Tensor in2 = make(counts[r], 10 + r), flat = make(total, -3), dflat = to_dev(flat);
  Tensor shard = flat.narrow(before, counts[r]), dshard = dflat.narrow(before, counts[r]);
  if (counts[r] > 0) shard.copy_from(in2), dshard.copy_from(to_dev(in2));
  host->all_gather_v(shard, flat, counts);
  expect_moved(measure([&] { dev->all_gather_v(dshard, dflat, counts); }), in.nbytes(),
               out.nbytes());
  expect_same_bits(flat, dflat);
  expect_same_stats();
}

// The root's tensor is only read, the others' only written; a reduce writes only the root's.
TEST_F(DeviceCommTest, BroadcastAndReduceCopyOnlyWhatChanges) {
  const int root = N - 1;
  const int64_t n = 9;
  Tensor b = make(n, r == root ? 7 : -1), db = to_dev(b);
  host->broadcast(b, root);
  Moved m = measure([&] { dev->broadcast(db, root); });
  expect_moved(m, r == root ? n * 4 : 0, r == root ? 0 : n * 4);
  expect_same_bits(b, db);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    Tensor t = make(n, r), dt = to_dev(t);
    host->reduce(t, root, op);
    expect_moved(measure([&] { dev->reduce(dt, root, op); }), n * 4, r == root ? n * 4 : 0);
    expect_same_bits(t, dt);  // the root's result, and the others' unchanged input
  }
  expect_same_stats();
}

TEST_F(DeviceCommTest, AllToAll) {
  const int64_t k = 3;
  Tensor in = make(N * k, r), out = Tensor::zeros({N * k}), din = to_dev(in), dout = to_dev(out);
  host->all_to_all(in, out);
  expect_moved(measure([&] { dev->all_to_all(din, dout); }), in.nbytes(), out.nbytes());
  expect_same_bits(out, dout);
  expect_same_stats();
}

// A ring, posted non-blocking: a send copies down only, a receive up only, on completion.
TEST_F(DeviceCommTest, SendRecvRing) {
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  const int64_t n = 1000;
  Tensor out = make(n, r), in = Tensor::zeros({n}), dout = to_dev(out), din = to_dev(in);
  auto hr = host->irecv(in, prev, 5);
  host->isend(out, next, 5)->wait();
  hr->wait();
  std::shared_ptr<Work> rw;
  Moved recv_posted = measure([&] { rw = dev->irecv(din, prev, 5); });
  expect_moved(recv_posted, 0, 0);  // nothing moves before the message arrives
  expect_moved(measure([&] { dev->isend(dout, next, 5)->wait(); }), n * 4, 0);
  expect_moved(measure([&] { rw->wait(); }), 0, n * 4);
  expect_same_bits(in, din);
  expect_same_stats();
}

// The async forms copy up when the Work completes (test() true or wait()), once; three buckets
// in flight hold three buffers at once.
TEST_F(DeviceCommTest, AsyncFormsCopyBackOnCompletion) {
  std::vector<Tensor> hb, db;
  std::vector<std::shared_ptr<Work>> work;
  for (int b = 0; b < 3; ++b) {
    hb.push_back(make(40 * (b + 1), r + b));
    db.push_back(to_dev(hb.back()));
    host->all_reduce_async(hb.back(), ReduceOp::kAvg)->wait();
  }
  Moved issued = measure([&] {
    for (int b = 0; b < 3; ++b) work.push_back(dev->all_reduce_async(db[b], ReduceOp::kAvg));
  });
  expect_moved(issued, 4 * 240, 0);  // all down at issue, nothing up yet
  EXPECT_GE(dev->staging_stats().buffers, 3);
  Moved done = measure([&] {
    while (!work[1]->test()) sched_yield();
    work[2]->wait();
    work[0]->wait();
    for (auto& w : work) w->wait();  // idempotent: copies up once
  });
  expect_moved(done, 0, 4 * 240);
  for (int b = 0; b < 3; ++b) expect_same_bits(hb[b], db[b]);

  std::vector<int64_t> counts(N, 4);
  Tensor in = make(4 * N, r), out = Tensor::zeros({4}), gin = make(4, r), gout = Tensor::zeros({4 * N});
  Tensor din = to_dev(in), dout = to_dev(out), dgin = to_dev(gin), dgout = to_dev(gout);
  host->reduce_scatter_v_async(in, out, counts)->wait();
  host->all_gather_v_async(gin, gout, counts)->wait();
  std::shared_ptr<Work> w1, w2;
  expect_moved(measure([&] {
    w1 = dev->reduce_scatter_v_async(din, dout, counts);
    w2 = dev->all_gather_v_async(dgin, dgout, counts);
  }), in.nbytes() + gin.nbytes(), 0);
  expect_moved(measure([&] { w2->wait(), w1->wait(); }), 0, out.nbytes() + gout.nbytes());
  expect_same_bits(out, dout);
  expect_same_bits(gout, dgout);
  expect_same_stats();
}

// Buffers are reused across calls (grow-only) and counted in the MemoryTracker under kOther.
TEST_F(DeviceCommTest, StagingBuffersReusedAndTracked) {
  auto g = host->duplicate();
  const int64_t before = MemoryTracker::instance().current(MemCategory::kOther);
  Tensor big = to_dev(make(256, r)), small = to_dev(make(16, r));
  const int64_t tensors = MemoryTracker::instance().current(MemCategory::kOther) - before;
  g->all_reduce(big);
  EXPECT_EQ(g->staging_stats().buffers, 1);
  EXPECT_EQ(g->staging_stats().buffer_bytes, 256 * 4);
  for (int i = 0; i < 5; ++i) g->all_reduce(small);  // fits in the first buffer
  Tensor in = small.narrow(0, 4), out = big.narrow(0, 4 * N);
  g->all_gather(in, out);
  EXPECT_EQ(g->staging_stats().buffers, 2);  // the gather holds its input and output at once
  EXPECT_EQ(MemoryTracker::instance().current(MemCategory::kOther) - before - tensors,
            g->staging_stats().buffer_bytes);
  const int64_t held = g->staging_stats().buffer_bytes;
  for (int i = 0; i < 3; ++i) g->all_reduce(big);
  EXPECT_EQ(g->staging_stats().buffer_bytes, held);  // nothing new for sizes seen before
}

// A host allocator counting what it hands out, standing in for cudaMallocHost.
class CountingHostAllocator : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    allocated += bytes, live += bytes;
    return std::malloc(static_cast<size_t>(bytes > 0 ? bytes : 1));
  }
  void deallocate(void* p, int64_t bytes) override {
    live -= bytes;
    std::free(p);
  }
  int64_t allocated = 0, live = 0;
};

// With a pinned allocator registered, the staging buffers come from it (and go back to it when
// the group goes); host tensors made meanwhile do not.
TEST_F(DeviceCommTest, StagingBuffersComeFromThePinnedAllocator) {
  CountingHostAllocator pinned;
  register_pinned_host_allocator(&pinned);
  {
    auto g = host->duplicate();
    Tensor d = to_dev(make(300, r));
    g->all_reduce(d);
    Tensor host_tensor = Tensor::empty({64});
    EXPECT_EQ(pinned.allocated, 300 * 4);
    EXPECT_EQ(pinned.live, g->staging_stats().buffer_bytes);
  }
  register_pinned_host_allocator(nullptr);
  EXPECT_EQ(pinned.live, 0);  // freed by the allocator that made them
}

// One tensor on the host, one on the device: each is staged on its own.
TEST_F(DeviceCommTest, MixedDevicesInOneOperation) {
  const int64_t k = 7;
  Tensor in = make(N * k, r), out = Tensor::zeros({k}), dout = to_dev(out);
  Tensor hout = Tensor::zeros({k});
  host->reduce_scatter(in, hout);
  expect_moved(measure([&] { dev->reduce_scatter(in, dout); }), 0, k * 4);
  expect_same_bits(hout, dout);
  expect_same_stats();
}

// A group of one rank: local_copy on the device (d2d), nothing staged, 0 bytes counted.
TEST_F(DeviceCommTest, GroupOfOneCopiesOnTheDevice) {
  auto self = host->split(/*color=*/r, /*key=*/0);
  Tensor t = to_dev(make(8, r)), out = to_dev(Tensor::zeros({8}));
  const int64_t d2d = fake.d2d_bytes();
  self->all_gather(t, out);
  self->reduce_scatter(t, out);
  EXPECT_EQ(fake.d2d_bytes() - d2d, 2 * 8 * 4);
  expect_same_bits(make(8, r), out);
  EXPECT_EQ(self->staging_stats().to_host_bytes, 0);
  EXPECT_DOUBLE_EQ(self->stats().total_bytes(), 0.0);
}

}  // namespace
}  // namespace llmp
