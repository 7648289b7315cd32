// DeepSpeed-Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses: System Optimizations for Enabling
// Training of Extreme Long Sequence Transformer Models", §3, Figure 2): attention over a sequence
// split across p ranks by changing WHAT is split, not by passing keys around.
//
//   rank r holds positions [r·Tl, (r+1)·Tl) of every sequence, all H heads   (sequence split)
//        |  all_to_all #1: q|k|v of head group j -> rank j        (B,Tl,3A) -> (B,T,3A/p)
//        v
//   rank r holds ALL T positions, heads [r·H/p, (r+1)·H/p)                     (head split)
//        |  ordinary causal attention, local (kernel_ops(device): the model's own kernels)
//        |  all_to_all #2: the output rows back to their positions' ranks    (B,T,A/p) -> (B,Tl,A)
//        v
//   rank r holds positions [r·Tl, (r+1)·Tl) again, every head's output
//
// The backward is the mirror: all_to_all of dout to the head split, the local attention
// backward, all_to_all of dqkv back to the sequence split. Heads are independent, so attention
// on a head group needs nothing from the other ranks once each rank has its heads' whole
// sequences: 4 all_to_alls per block and step, each moving (p-1)/p of its input, the same at
// every p (the message per rank shrinks as p grows: Ulysses' claim of constant communication
// volume when p and T grow together). The limit: p must divide H.
//
// On a device (--device cuda; supports_device()): every buffer is allocated beside qkv, the
// re-layouts are device-to-device copies and the attention is kernel_ops(device)'s; the MPI
// backend stages each all_to_all through the host, its input down and its output up: per block
// and step e·(3+1+1+3)·B·Tl·A = 8e·B·Tl·A bytes each way (whole buffers, own chunk included;
// e bytes per stored element, below).
//
// Closed forms (per rank and block, e bytes per stored element: 4 in fp32, 2 in bf16/fp16;
// A channels, hs = A/H, Tl = T/p; ProcessGroup counts an all_to_all of an S-byte input as
// (p-1)/p·S):
//   bytes per step    (p-1)/p · e·(3 + 1 + 1 + 3)·B·Tl·A = 8e(p-1)·B·Tl·A/p
//                     (q|k|v and out forward, dout and dq|dk|dv backward)
//   calls per step    4 all_to_alls
//   kept              P (B,H/p,T,T) and the head-split q|k|v (B,T,3A/p): e·B·T·(H·T + 3A)/p
//   peak scores       L·e·B·(H/p)·T² (every block's P at the end of the forward) + 4T² (the
//                     backward's dP of one head, fp32 in every precision)
//   forward FLOPs     B·(H/p)·(2T²·hs + T(T+1)·hs)     (the kernel's convention, flops.h)
//
// Glossary: B sequences, T positions, Tl = T/p held, A channels (C), H heads, hs head size,
// p ranks of the group, r this rank, L blocks, P softmax probabilities.
#pragma once

#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/attention_core.h"

namespace llmp {

class UlyssesAttention : public AttentionCore {
 public:
  /// All traffic over `group` (p = its size), which must outlive the core.
  explicit UlyssesAttention(ProcessGroup& group) : group_(group) {}

  /// The one line why sequences of T positions with H heads cannot go over p ranks ("" when
  /// they can): p must divide T (the sequence split) and H (the head split).
  static std::string split_error(int T, int H, int p);

  std::string name() const override { return "Ulysses"; }
  int shards() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  /// True: tensors on any device, copies and attention through that device (ulysses.cc).
  bool supports_device() const override { return true; }
  /// True: q|k|v, out, dout and dqkv in any dtype; the all_to_alls carry that dtype.
  bool takes_16bit() const override { return true; }
  /// Contiguous: [r·T/p, (r+1)·T/p). Throws std::invalid_argument when p ∤ T.
  std::vector<int> positions(int T) const override;
  /// Throws std::invalid_argument("Ulysses: p=3 does not divide H=4 heads ...") when p ∤ H.
  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H, AttentionKeep* keep) override;
  void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, AttentionKeep* keep,
                Tensor& dqkv, int B, int T, int H) override;

  double bytes_per_block(int B, int T, int A, int H) const override;
  std::string bytes_formula_text() const override;
  int calls_per_block() const override { return 4; }
  /// The forward's two all_to_alls (q|k|v to the head split, out back): (p-1)/p·e·4·B·Tl·A.
  double forward_bytes_per_block(int B, int T, int A, int H) const override;
  int forward_calls_per_block() const override { return 2; }
  double kept_bytes_per_block(int B, int T, int A, int H) const override;
  double peak_score_bytes(int B, int T, int A, int H, int L) const override;
  std::string peak_score_formula_text() const override;
  double forward_flops_per_block(int B, int T, int A, int H) const override;

 private:
  ProcessGroup& group_;
};

}  // namespace llmp
