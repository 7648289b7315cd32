// AttentionCore: causal multi-head attention between c_attn and c_proj when every sequence is
// split over p ranks for the whole model (context parallelism). The one seam of the long-sequence
// stages (stages/ring_self_attention, stages/ring_attention, stages/ulysses).
//
// A rank of such a stage holds Tl = T/p positions of every sequence (positions(T)): its residual
// stream is (B,Tl,C), and every per-token piece of the model (embeddings, LayerNorms, the linear
// layers, the MLP, the head's cross-entropy) runs on those rows alone, with the whole replicated
// weights. Only attention mixes positions: a query attends to every earlier key of its sequence,
// wherever that key lives. The core is that mixing, between the model's c_attn (which made this
// rank's q|k|v) and c_proj (which takes this rank's attention output):
//
//   qkv (B,Tl,3A)  ->  core.forward  ->  out (B,Tl,A)          A = C channels, H heads of A/H
//   dout (B,Tl,A)  ->  core.backward ->  dqkv (B,Tl,3A)
//
// How the keys and values of other ranks reach the queries is the technique:
//   ring self-attention (Li et al. 2021)   key chunks, then value chunks, passed around a ring
//   ring attention (Liu et al. 2023)        key/value blocks around a ring, online softmax
//   Ulysses (Jacobs et al. 2023)            all_to_all to a head split, local attention, and back
// Without a core (GPT::attention_core() == nullptr, every other stage) the attention sub-layer
// runs the device's attention kernels (kernel_ops.h) on whole sequences, as before.
//
// The layout of qkv is kernels/cpu/attention.h's: row (b, j) holds q at [0,A), k at [A,2A), v at
// [2A,3A); head h owns channels [h·A/H, (h+1)·A/H) of each. Row j of this rank is global position
// positions(T)[j]. The causal mask is by global positions: query i sees key i' iff i' <= i.
// Scaling 1/√(A/H) as in the kernel.
//
// The closed forms (bytes_per_block, ...) are the stage README's derivations, written from the
// algorithm, not from the code: the strategy prints each next to what the run measured
// (ProcessGroup byte counts, MemoryTracker's MemTag::kAttentionScores, the FLOP counter).
//
// Glossary: B sequences, T positions of a sequence, Tl = T/p held here, A channels, H heads,
// hs = A/H, p ranks, L blocks.
#pragma once

#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

/// A fresh attention-score tensor (f32 unless the activations are stored in 16 bits): counted as
/// activations and tagged MemTag::kAttentionScores, so the MemoryTracker measures the T² term
/// apart (memory.h). Every score, probability or score-gradient buffer of the model is made here.
/// `device`: where the model's activations are (the CPU unless the walk runs on a GPU).
inline Tensor attention_scores(std::vector<int64_t> shape, DType dtype = DType::kF32,
                               Device device = Device::kCPU) {
  return Tensor::empty_tagged(std::move(shape), dtype, MemCategory::kActivations,
                              MemTag::kAttentionScores, device);
}

/// What a core's forward keeps for its backward (kActivations; scores tagged). Which tensors and
/// shapes is the core's business (probabilities, a row statistic, a head-split copy).
struct AttentionKeep {
  Tensor a, b;
  int64_t bytes() const { return a.nbytes() + b.nbytes(); }
};

class AttentionCore {
 public:
  virtual ~AttentionCore() = default;

  /// "ring self-attention", "ring attention", "Ulysses": for messages and report rows.
  virtual std::string name() const = 0;
  /// p: the ranks every sequence is split over.
  virtual int shards() const = 0;
  /// This rank's index in [0, p).
  virtual int rank() const = 0;
  /// Whether forward/backward take device tensors (qkv, out, dout, dqkv on a GPU, their math
  /// through kernel_ops(qkv.device()), kernels/ops/kernel_ops.h). False (the default): the core
  /// reads its tensors on the host, and GPT::with_attention_core refuses it for a model on a
  /// device. A core switches itself on by overriding this (Ulysses does).
  virtual bool supports_device() const { return false; }
  /// Whether forward/backward take q|k|v, out, dout and dqkv stored in 16 bits (bf16 / fp16
  /// mixed precision: the walk hands the core its activations as stored, common/nn/f32_view.h)
  /// and move them in 16 bits. False (the default): f32 only; ContextParallelStrategy then runs
  /// the core inside a WidenedCore (common/cp/widened_core.h: fp32 copies in, results rounded
  /// out). The three cores override it: Ulysses' all_to_alls carry whatever dtype they get, the
  /// ring cores' K and V travel in it (their products stay fp32).
  virtual bool takes_16bit() const { return false; }
  /// The dtype of the activations the core is handed (f32, or the 16-bit storage of mixed
  /// precision), which the closed forms below count in bytes per element. Set by the strategy
  /// before the first step; f32 until then.
  void set_storage(DType dtype) { storage_ = dtype; }
  DType storage() const { return storage_; }
  /// The global positions of the Tl = T/p rows of every sequence this rank holds, ascending.
  /// Throws std::invalid_argument with one line naming T and p when the split is impossible
  /// ("ring attention: T=30 is not divisible by 2p=8 (the balanced causal split)").
  virtual std::vector<int> positions(int T) const = 0;
  /// Collective over the core's group. out (B,Tl,A) = causal attention of this rank's queries
  /// over all keys of their sequences; qkv (B,Tl,3A). Fills *keep for the backward.
  virtual void forward(const Tensor& qkv, Tensor& out, int B, int T, int H,
                       AttentionKeep* keep) = 0;
  /// Collective. dqkv (B,Tl,3A) OVERWRITTEN with ∂L/∂qkv from dout (B,Tl,A), the forward's qkv,
  /// out and keep. Frees *keep.
  virtual void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        AttentionKeep* keep, Tensor& dqkv, int B, int T, int H) = 0;

  // ---- Closed forms (per rank, in storage()'s bytes where a tensor is stored in it; derived in
  //      the stage's README) ----

  /// Bytes this rank sends for one block's attention in one training step (forward + backward).
  virtual double bytes_per_block(int B, int T, int A, int H) const = 0;
  /// The formula's text, e.g. "4(p-1)·4bTh/p".
  virtual std::string bytes_formula_text() const = 0;
  /// Collective calls (sends, all_to_alls) this rank makes for one block in one training step.
  virtual int calls_per_block() const = 0;
  /// Of bytes_per_block and calls_per_block, what one forward sends and calls: what a block's
  /// forward run again costs (full recomputation, common/nn/recompute.h, reruns the core's
  /// forward with its communication before the block's backward).
  virtual double forward_bytes_per_block(int B, int T, int A, int H) const = 0;
  virtual int forward_calls_per_block() const = 0;
  /// Bytes of *keep after one block's forward.
  virtual double kept_bytes_per_block(int B, int T, int A, int H) const = 0;
  /// Peak bytes of MemTag::kAttentionScores on this rank during one training step of L blocks.
  virtual double peak_score_bytes(int B, int T, int A, int H, int L) const = 0;
  virtual std::string peak_score_formula_text() const = 0;
  /// Attention FLOPs this rank computes in one block's forward (kernels/cpu/flops.h convention:
  /// 2 per multiply-add actually performed).
  virtual double forward_flops_per_block(int B, int T, int A, int H) const = 0;

 protected:
  /// Bytes of one stored activation element: 4 (f32) or 2 (bf16, f16).
  double stored_bytes() const { return static_cast<double>(dtype_size(storage_)); }

 private:
  DType storage_ = DType::kF32;
};

}  // namespace llmp
