// The expert-parallel group behind the MoE layer's ExpertComm interface (common/nn/moe.h): its
// all_to_all is ProcessGroup::all_to_all over the ep ranks that share the experts of one copy of
// the model (GShard, Lepikhin et al. 2020, §2.3: dispatch and combine are all_to_alls).
//
//   all_to_all   (ep chunks of E/ep·G·cap·C floats) chunk j -> rank j     sends (ep-1)/ep·S
//
// Glossary: ep expert-parallel ranks, E experts, G sequences per rank, cap slots, C channels,
// S bytes of the whole buffer.
#pragma once

#include "common/comm/process_group.h"
#include "common/nn/moe.h"

namespace llmp {

class ExpertParallelComm : public ExpertComm {
 public:
  /// `group` (the expert-parallel group) must outlive this object; its CommStats count the
  /// all_to_alls.
  explicit ExpertParallelComm(ProcessGroup& group) : group_(group) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  /// The output is a fresh kCommBuffers tensor of in's shape on in's device. Collective over the
  /// group.
  Tensor all_to_all(const Tensor& in) override;

 private:
  ProcessGroup& group_;
};

}  // namespace llmp
