// WidenedCore: an fp32-only attention core run on 16-bit activations, the simple way: every
// 16-bit tensor the walk hands it is widened into an fp32 copy, the core runs on the copies
// exactly as in an fp32 run (its messages, its kept tensors and its scores all fp32), and its
// results are rounded once into the 16-bit tensors the walk holds:
//
//   forward    qkv (B,Tl,3A) 16-bit --widen--> fp32 --inner.forward--> out fp32 --round--> out
//   backward   dout, qkv, out 16-bit --widen--> fp32 --inner.backward--> dqkv fp32 --round--> dqkv
//
// This is Micikevicius et al. 2018's "compute in fp32 on 16-bit storage" applied to the whole
// core, as f32_view.h applies it to one kernel. What it does not do is save bytes inside the
// core: a wrapped ring would pass fp32 K and V (4 bytes an element, where 16 bits are exact: the
// values are 16-bit numbers). The three cores do better (AttentionCore::takes_16bit: 16-bit
// all_to_alls, 16-bit K and V on the rings) and are not wrapped; it is the fallback for a core
// that does not, and the reference the ring cores' 16-bit runs equal bit for bit (their stage
// tests wrap them on purpose). The closed forms are the inner core's: the fp32 algorithm's bytes.
//
// The fp32 copies are transient (MemCategory::kOther, freed when forward / backward returns): the
// walk keeps the 16-bit q|k|v and out, the core keeps what it keeps (*keep).
//
// Glossary: B sequences, Tl positions held, A channels, "16-bit" bf16 or fp16.
#pragma once

#include "common/cp/forwarding_core.h"

namespace llmp {

class WidenedCore : public ForwardingCore {
 public:
  /// Takes ownership of `inner` (an fp32 core). Throws std::invalid_argument when it is null.
  using ForwardingCore::ForwardingCore;

  bool takes_16bit() const override { return true; }
  /// qkv and out in one dtype (f32 passes straight through to the inner core).
  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H, AttentionKeep* keep) override;
  void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, AttentionKeep* keep,
                Tensor& dqkv, int B, int T, int H) override;
  // The closed forms are the inner core's fp32 ones (ForwardingCore): it runs in fp32.
};

}  // namespace llmp
