// The routing statistics of a mixture-of-experts run (common/nn/moe.h, MoeStats) summed over the
// ranks and printed as one line: the tokens each expert received (fewest, most), the fraction of
// assignments dropped by the expert capacity, and the load-balancing loss per MoE block
// (Switch Transformer, Fedus et al. 2021, §2.2: 1 when balanced, E when every token picks one
// expert). The baseline and the MoE stage print the same line, so the two can be compared.
//
// Glossary: E experts, k experts per token, L_m MoE blocks, n tokens, c capacity factor.
#pragma once

#include <string>

#include "common/nn/gpt.h"
#include "common/train/dp_util.h"

namespace llmp {

/// Σ over the ranks of `metrics`' group of every count of `local` (collective; bookkeeping,
/// not counted in CommStats).
MoeStats sum_over(MetricsReducer& metrics, const MoeStats& local);

/// "routing (last step): tokens per expert 90..160 of 1024 assignments over 2 MoE blocks,
/// dropped 3.1% (capacity 20 per expert per sequence), load-balancing loss 1.02 per block
/// (1: balanced)".
std::string routing_summary(const MoeStats& s, const GPTConfig& cfg, int T);

}  // namespace llmp
