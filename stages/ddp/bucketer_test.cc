// The buckets partition the flat gradient buffer, in reverse unit order, by the capacity rule.
// Single process: no MPI.
#include "stages/ddp/bucketer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

#include "stages/ddp/ddp.h"

namespace llmp {
namespace {

// Checks every property a bucket list must have; returns the number of buckets.
size_t check_partition(const GPTLayout& lay, double cap_bytes) {
  const std::vector<Bucket> b = make_buckets(lay, cap_bytes);
  EXPECT_FALSE(b.empty());
  if (b.empty()) return 0;
  // Bucket 0 ends at Ψ and starts with the last unit; the last bucket starts at 0 with unit 0.
  EXPECT_EQ(b.front().first_unit, lay.num_units() - 1);
  EXPECT_EQ(b.front().offset + b.front().numel, lay.num_params());
  EXPECT_EQ(b.back().last_unit, 0);
  EXPECT_EQ(b.back().offset, 0);
  int64_t total = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_GE(b[i].first_unit, b[i].last_unit);
    // Whole units: the range is exactly units last_unit..first_unit.
    EXPECT_EQ(b[i].offset, lay.unit_offset(b[i].last_unit));
    EXPECT_EQ(b[i].offset + b[i].numel,
              lay.unit_offset(b[i].first_unit) + lay.unit_numel(b[i].first_unit));
    // Reverse order, no gap, no overlap: bucket i+1 holds the units just below bucket i's.
    if (i + 1 < b.size()) {
      EXPECT_EQ(b[i + 1].first_unit, b[i].last_unit - 1);
      EXPECT_EQ(b[i + 1].offset + b[i + 1].numel, b[i].offset);
      EXPECT_GE(4.0 * b[i].numel, cap_bytes) << "only the last bucket may be under capacity";
    }
    // Closed as soon as it reached the capacity: without its last unit it was under it.
    if (b[i].first_unit != b[i].last_unit) {
      EXPECT_LT(4.0 * (b[i].numel - lay.unit_numel(b[i].last_unit)), cap_bytes);
    }
    total += b[i].numel;
  }
  EXPECT_EQ(total, lay.num_params());
  // The launch table: bucket i starts when its lowest unit is ready, and at no other unit.
  const std::vector<int> at = launch_unit_table(b, lay.num_units());
  int launches = 0;
  for (int u = 0; u < lay.num_units(); ++u)
    if (at[u] >= 0) {
      ++launches;
      EXPECT_EQ(b[at[u]].last_unit, u);
    }
  EXPECT_EQ(launches, static_cast<int>(b.size()));
  return b.size();
}

TEST(Bucketer, MiniWithTheDefaultCapacityHasSeveralBuckets) {
  const GPTLayout lay(GPTConfig::preset("mini"));
  const double cap = DDPOptions{}.bucket_mb * 1024 * 1024;
  const std::vector<Bucket> b = make_buckets(lay, cap);
  for (size_t i = 0; i < b.size(); ++i)
    std::printf("mini bucket %zu: units %d..%d, %lld elements (%.0f KiB) at offset %lld\n", i,
                b[i].first_unit, b[i].last_unit, static_cast<long long>(b[i].numel),
                4.0 * b[i].numel / 1024, static_cast<long long>(b[i].offset));
  EXPECT_GT(check_partition(lay, cap), 1u);
  // ln_f alone is 1 KiB: it shares bucket 0 with block L; then one block per bucket, then unit 0.
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].first_unit, 5);
  EXPECT_EQ(b[0].last_unit, 4);
}

TEST(Bucketer, PartitionsForEveryCapacity) {
  for (const char* preset : {"tiny", "mini"}) {
    const GPTLayout lay(GPTConfig::preset(preset));
    // One unit per bucket, something in between, one bucket for everything.
    EXPECT_EQ(check_partition(lay, 1), static_cast<size_t>(lay.num_units())) << preset;
    check_partition(lay, 0.04 * 1024 * 1024);
    check_partition(lay, 0.25 * 1024 * 1024);
    EXPECT_EQ(check_partition(lay, 4.0 * lay.num_params()), 1u) << preset;
  }
}

TEST(Bucketer, RejectsANonPositiveCapacity) {
  const GPTLayout lay(GPTConfig::preset("tiny"));
  EXPECT_THROW(make_buckets(lay, 0), std::invalid_argument);
  EXPECT_THROW(make_buckets(lay, -1), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
