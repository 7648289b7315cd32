// GPTPartition: which units of the GPT each pipeline rank holds, and where they live in its
// local parameter buffer.
//
// The L blocks are divided evenly over p·v virtual stages (Narayanan et al. 2021, "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §2.2.2): virtual stage
// s = c·p + r is chunk c of rank r, and holds blocks [s·k, (s+1)·k), k = L/(p·v). Virtual stage
// 0 also holds unit 0 (embeddings), the last one (p·v - 1) also unit L+1 (final LayerNorm). In
// the flat layout of GPTLayout, virtual stage s is then ONE contiguous range of units:
//
//   units [s == 0 ? 0 : 1 + s·k,  s == p·v-1 ? L + 2 : 1 + (s+1)·k)
//
// Worked example, L = 8, p = 2, v = 2 (k = 2):
//   virtual stage:  0            1        2        3
//   (rank, chunk):  (0,0)        (1,0)    (0,1)    (1,1)
//   units:          0,1,2        3,4      5,6      7,8,9
//   so rank 0 holds units {0,1,2,5,6}, rank 1 {3,4,7,8,9}.
//
// The tied LM head (Press & Wolf 2017) needs wte on the LAST virtual stage although wte is unit 0
// of the first. As in Megatron-LM, the rank of the last virtual stage keeps its own copy of wte
// after its chunks ("the wte copy"); the gradients of the two copies are summed over the
// embedding group {first rank, last rank} before the optimizer step, so both stay identical.
//
// A rank's local buffer is its chunks' ranges in model order, then the wte copy (if any):
//   rank 1 above: [units 3,4 | units 7,8,9 | wte copy]
//
// Chimera (two pipelines, schedule.h's Placement): the model is cut into p stages, and rank r
// holds stage r (down, chunk 0) and stage p-1-r (up, chunk 1). Every stage sits on two ranks,
// and ranks r and p-1-r hold the SAME two stages; in model order their local buffers have the
// same layout, so the replicas' gradients are all-reduced as one buffer. The ranks holding the
// last stage (p-1 and 0) also hold the first, so no wte copy is needed.
//
// Glossary: L layers, p pipeline stages (ranks), v chunks per rank, k blocks per virtual stage,
// s virtual stage, r rank, c chunk, V vocab, C channels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/pipeline/schedule.h"

namespace llmp {

/// One contiguous range of the global flat parameter buffer held by a rank.
struct ParamSegment {
  int64_t global_offset = 0;  ///< elements into the full Ψ-element buffer
  int64_t local_offset = 0;   ///< elements into the rank's local buffer
  int64_t numel = 0;
  bool wte_copy = false;      ///< the last stage's copy of wte (not owned: rank 0 owns wte)
  int chunk = -1;             ///< the chunk this segment is (-1 for the wte copy)
};

/// What one virtual stage computes.
struct VirtualStage {
  int index = 0;         ///< s = chunk·p + rank
  int rank = 0, chunk = 0;
  int first_block = 0;   ///< block l (unit 1 + l) of the model
  int num_blocks = 0;    ///< k
  bool first = false;    ///< holds the embeddings (unit 0)
  bool last = false;     ///< holds the final LayerNorm and the head (unit L+1)
};

class GPTPartition {
 public:
  /// The first problem with (L, p, v, pipelines) as one line, or "" when fine
  /// (check_layers_divisible's message of schedule.h: "layers 6 not divisible by p·v = 4 (p=2,
  /// v=2)").
  static std::string check(int layers, int p, int v, int pipelines = 1);

  /// Throws std::invalid_argument with check()'s message when (L, p, v) do not fit.
  /// pipelines = 2: Chimera's placement (v must be 2).
  GPTPartition(const GPTLayout& layout, int layers, int p, int v, int pipelines = 1);

  int p() const { return p_; }
  int v() const { return v_; }
  const Placement& placement() const { return pl_; }
  /// Virtual stages per pipeline: p·v, or p for Chimera.
  int num_virtual_stages() const { return pl_.num_stages(); }
  /// Blocks per virtual stage: k = L / num_virtual_stages().
  int blocks_per_stage() const { return k_; }
  /// Chunk c of rank r (virtual stage c·p + r; Chimera: Placement::stage).
  VirtualStage stage(int rank, int chunk) const;
  /// Rank and chunk of virtual stage s of pipeline 0 (the one forward_only uses).
  int rank_of(int s) const { return pl_.where(s).rank; }
  int chunk_of(int s) const { return pl_.where(s).chunk; }

  /// Units [begin, end) of virtual stage s.
  int unit_begin(int s) const;
  int unit_end(int s) const;

  /// The rank's segments in local-buffer order (chunks 0..v-1, then the wte copy).
  const std::vector<ParamSegment>& segments(int rank) const { return segments_.at(rank); }
  /// Elements in rank r's local buffer (including the wte copy).
  int64_t local_numel(int rank) const;
  /// The segment of chunk c on rank r.
  const ParamSegment& chunk_segment(int rank, int chunk) const;
  /// Local offset of chunk c's first element on rank r.
  int64_t chunk_local_offset(int rank, int chunk) const { return chunk_segment(rank, chunk).local_offset; }
  /// Local offset of wte on rank r: 0 on the first rank, the copy on the last one, -1 elsewhere.
  int64_t wte_local_offset(int rank) const;
  /// Local offset of unit u's first element on rank r, for the walk's ParamSource/GradSink
  /// (common/nn/unit_runner.h): the chunk holding u, or, for unit 0 on a rank that holds only
  /// the wte copy, that copy (which is what the tied head reads of unit 0). -1 when not held.
  int64_t unit_local_offset(int rank, int unit) const;
  /// Elements of unit u in rank r's local buffer from unit_local_offset on: the unit's numel
  /// when a chunk of r holds it, wte's (V·C) for unit 0 on a rank holding only the wte copy,
  /// 0 when not held.
  int64_t unit_local_numel(int rank, int unit) const;
  /// Ranks holding wte: {0, p-1} (one rank when p = 1). Their wte gradients are summed.
  std::vector<int> embedding_ranks() const;
  /// True when `rank` holds virtual stage s (of any pipeline) in one of its chunks.
  bool holds_stage(int rank, int s) const;

 private:
  const GPTLayout& layout_;
  int L_, p_, v_, k_;
  Placement pl_;
  std::vector<std::vector<ParamSegment>> segments_;  // per rank
};

}  // namespace llmp
