// UnitGatherer: ZeRO-3's parameter partitioning seen from one rank. The parameters live only as
// shards; a unit's full parameters exist only while some computation needs them.
//
// Rajbhandari et al. 2020, §5.3 (P_p: "the parameters ... are broadcast/all-gathered before the
// forward and backward of each layer and discarded after"); PyTorch FSDP (Zhao et al. 2023,
// "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", §3.2) calls the same two
// moves unshard and reshard, and the early start of the next unit's all-gather prefetching.
//
// A unit u is the contiguous range [a, a + n_u) of the flat buffer (GPTLayout: 0 embeddings,
// 1..L blocks, L+1 final LayerNorm). Shard i holds [i·S, i·S + count(i)), so the unit is the
// concatenation, in rank order, of its intersections with the shards: one all_gather_v with
// counts = ShardLayout::split_range(a, a + n_u) rebuilds it (ranks whose shard misses the unit
// contribute 0 elements).
//
// It is the walk's ParamSource (common/nn/unit_runner.h): before each step of the walk it starts
// the all-gathers of that step's units and of the next step's (prefetch: communication overlaps
// computation), and after the step it frees the step's units unless the next step reads them
// too. So a rank holds at most the units of two consecutive steps.
//
// Memory: a gathered unit is a model state, so it is counted as MemCategory::kParameters from
// the moment its receive buffer is allocated (prefetch) until release().
//
// Mixed precision: a 16-bit shard is gathered as 16 bits (2 bytes per element on the wire and in
// the gathered unit, kParameters); get() widens the unit to an fp32 copy for the walk (exact;
// MemCategory::kOther, "conversion scratch", as FlatParams does), freed with the unit.
//
// Device: a gathered unit (and its widened copy) is allocated on the shard's device, so on a GPU
// the walk reads device memory and the all-gather takes device tensors (the MPI backend stages
// them through host buffers, common/comm/process_group_staging.h).
//
// Glossary: N ranks, Ψ parameters, S = ⌈Ψ/N⌉ shard size, r this rank, n_u elements of unit u.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/train/dp_util.h"

namespace llmp {

class UnitGatherer : public ParamSource {
 public:
  /// `shard`: this rank's S parameters (its valid part is read by every gather). All references
  /// must outlive the gatherer; the shard must not change while a gather is in flight.
  UnitGatherer(const GPTLayout& layout, const ShardLayout& shards, ProcessGroup& dp,
               const Tensor& shard);
  /// Releases every held unit (waiting for gathers still in flight).
  ~UnitGatherer() override;

  /// Starts the all-gather of unit u unless it is already held or in flight. Collective: every
  /// rank must prefetch the same units in the same order. sends (N-1)/N · b·n_u, b the shard's
  /// bytes per element (4, or 2 for 16-bit).
  void prefetch(int u);
  /// Unit u's n_u parameters in fp32, waiting for its gather (starting it first if nobody
  /// prefetched it); a 16-bit unit is widened once, on the first get().
  const float* get(int u) override;
  /// The shard's dtype: a 16-bit shard's units are widened 16-bit values.
  DType values() const override { return shard_.dtype(); }
  /// Prefetches the units of step k and of step k+1 (collective, the same on every rank).
  void before_step(const std::vector<WalkStep>& steps, size_t k) override;
  /// Releases the units of step k that step k+1 does not read ("reshard").
  void after_step(const std::vector<WalkStep>& steps, size_t k) override;
  /// Frees unit u's gathered copy ("reshard"); a no-op when it is not held.
  void release(int u);

  /// Elements currently held (gathered or in flight), over all units.
  int64_t held_numel() const;
  /// all-gathers issued for unit u since construction.
  int gathers(int u) const;

 private:
  struct Held {
    Tensor params;                  // (n_u), kParameters, in the shard's dtype
    Tensor widened;                 // (n_u) fp32, kOther: a 16-bit unit as the walk reads it
    std::shared_ptr<Work> pending;  // the all_gather_v in flight, null once waited
  };
  const GPTLayout& layout_;
  const ShardLayout& shards_;
  ProcessGroup& dp_;
  Tensor shard_;
  std::map<int, Held> held_;
  std::map<int, int> gathers_;
};

}  // namespace llmp
