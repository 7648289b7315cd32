// KernelOps: the one door from the model to the math, chosen by the device the tensors live on.
//
// The model's unit functions (common/nn: embed, attention, MLP, head, and the mixed-precision
// views) never name a device's kernels. They ask for the kernels of their activations' device,
//
//   KernelOps& ops = kernel_ops(x.device());      // x: the unit's input activation
//   ops.layernorm_forward(y, mean, rstd, x, w, b, N, C);
//
// and get kernels/cpu's functions for Device::kCPU (built in, CpuKernelOps below) or the CUDA
// twins for Device::kCUDA (kernels/cuda:ops, registered when linked, as the device allocator
// is). So every stage runs on either device without GPU code of its own: the same walk, with
// other kernels behind this table. PyTorch's dispatcher does this per operator and per dispatch
// key; here it is one virtual table per device, with exactly the kernels the GPT needs.
//
// Every method has the signature and the semantics of the kernels/cpu function of the same name
// (read that header for shapes, what is overwritten and what accumulated), except that some
// activations are passed as stored (Act / ActIn below: f32, f16 or bf16); pointers are memory
// of the table's device. Results a kernel returns to the host (cross_entropy_loss's sum) are
// host values on every device.
//
// Glossary: N rows (tokens), C channels, OC output channels, B batch, T sequence, H heads,
// V vocabulary, Vr the vocabulary rows this rank holds (v0 the first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/convert.h"

namespace llmp {

/// An activation as the model stores it, for the entries that read or write activations in their
/// own dtype: its memory (of the table's device) and dtype (f32, f16 or bf16). A float* converts
/// to an f32 Act, so fp32 callers pass their pointers as they are; the model's walk passes its
/// 16-bit tensors with as_stored(). A table whose kernels compute on fp32 only (kernels/cpu)
/// reads and writes a 16-bit one through an fp32 copy (Fp32Copy below), which is bit for bit
/// what the walk's F32In / F32Out views do (common/nn/f32_view.h); a GPU's kernels load and store
/// the 16 bits themselves, so no fp32 copy of the activation exists.
struct Act {
  void* p = nullptr;
  DType dtype = DType::kF32;
  Act(float* f32) : p(f32) {}  // NOLINT: an fp32 buffer is an f32 activation
  Act(void* data, DType d) : p(data), dtype(d) {}
};
/// The read-only form of Act (a const float* converts to an f32 one; so does an Act).
struct ActIn {
  const void* p = nullptr;
  DType dtype = DType::kF32;
  ActIn(const float* f32) : p(f32) {}  // NOLINT
  ActIn(const void* data, DType d) : p(data), dtype(d) {}
  ActIn(Act a) : p(a.p), dtype(a.dtype) {}  // NOLINT
};
/// t's memory and dtype as an Act.
inline Act as_stored(const Tensor& t) { return Act(t.raw(), t.dtype()); }

class KernelOps {
 public:
  virtual ~KernelOps() = default;
  /// The device whose memory every pointer given to this table is in.
  virtual Device device() const = 0;

  // ---- matmul.h: y = x @ W + b and its backward, and the transposed-weight (tied head) form.
  // The linear layers' activations are passed as stored (Act / ActIn: x, y, dy, dx; a 16-bit dx
  // is the product rounded once); weights, biases and weight gradients stay fp32 (W, bias: the
  // widened parameters, FlatParams). A 16-bit activation under a 16-bit declaration of the same
  // dtype (MatmulOperands below) is a GPU product's operand or result as it is, without an fp32
  // copy; the bias then is one of the declared values too (the CPU checks it, as it checks x
  // and W). Throws std::invalid_argument naming an Act dtype that is none of f32, f16, bf16.
  virtual void matmul_forward(Act y, ActIn x, const float* W, const float* bias, int N, int C,
                              int OC) = 0;
  virtual void matmul_backward_input(Act dx, ActIn dy, const float* W, int N, int C, int OC) = 0;
  virtual void matmul_backward_weight(float* dW, float* db, ActIn dy, ActIn x, int N, int C,
                                      int OC) = 0;
  virtual void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C,
                                 int OC) = 0;
  virtual void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x,
                                  const float* Wt, int N, int C, int OC) = 0;

  // ---- attention.h: causal multi-head self-attention on qkv (B,T,3C). P (B,H,T,T), the largest
  // activation the model keeps, is an Act: written by the forward and read by the backward in
  // its dtype (a 16-bit att holds P rounded to it). So are out, qkv, dout and dqkv (f32 or att's
  // dtype: the model keeps every activation in one dtype; a 16-bit att promises that qkv and
  // dout hold values of its dtype even when passed as fp32, and a 16-bit out or dqkv is the fp32
  // result rounded once). probs_dtype: P and dS rounded to it before their products
  // (kernels/cpu/attention.h; f32: not rounded). Throws std::invalid_argument naming a dtype
  // that is none of f32, f16, bf16.
  virtual void attention_forward(Act out, Act att, ActIn qkv, int B, int T, int C, int H,
                                 DType probs_dtype = DType::kF32) = 0;
  virtual void attention_probs(Act att, ActIn qkv, int B, int T, int C, int H,
                               DType probs_dtype = DType::kF32) = 0;
  virtual void attention_backward(Act dqkv, ActIn dout, ActIn qkv, ActIn att, float* scratch,
                                  int B, int T, int C, int H,
                                  DType probs_dtype = DType::kF32) = 0;

  // ---- attention_block.h: ring attention's blockwise online softmax, one ring step per call
  // over every (b, h), on strided (B,Tl,·) rows (common/cp/ring_attention.cc).
  virtual void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                                       const float* q, int ld_q, const float* k, const float* v,
                                       int ld_kv, int B, int H, int Tl, int hs,
                                       cpu::BlockPairs pairs) = 0;
  virtual void attention_block_finalize(float* o, int ld_o, float* lse, const float* m,
                                        const float* l, int B, int H, int Tl, int hs) = 0;
  virtual void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o,
                                      int B, int H, int Tl, int hs) = 0;
  virtual void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P,
                                        float* dS, const float* q, int ld_q, const float* k,
                                        const float* v, int ld_kv, const float* dout, int ld_o,
                                        const float* lse, const float* D, int B, int H, int Tl,
                                        int hs, cpu::BlockPairs pairs) = 0;
  virtual void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows,
                            int cols) = 0;

  // ---- permute_rows.h: a mixture of experts' token permutations (into the experts' capacity
  // slots and back), every assignment in one call; slots is memory of the table's device.
  virtual void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k,
                            int64_t row_j, int64_t row_t, bool to_slots, int64_t row_bytes) = 0;

  // ---- ring_self_block.h: ring self-attention's block products (row-major, strided-batched:
  // cublasSgemmStridedBatched's shape) and its causal softmax of whole rows by global position
  // (common/cp/ring_self_attention.cc).
  virtual void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                    const float* A, int lda, int64_t stride_a, const float* B,
                                    int ldb, int64_t stride_b, float beta, float* C, int ldc,
                                    int64_t stride_c, int batch) = 0;
  virtual void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) = 0;
  virtual void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl,
                                            int T, int g0, float scale) = 0;

  // ---- layernorm.h, gelu.h, residual.h: the element-wise and per-row layers. The forwards read
  // and write activations as stored (Act; mean, rstd, w, b stay fp32); the backwards read them
  // as stored (ActIn) and write fp32 gradients, except two dx written as stored (a 16-bit dx:
  // rounded once): gelu_backward's, gelu'(x)·dy (dy fp32, the product's unrounded output; an f32
  // dx may alias dy), and layernorm_backward's, dx = dres + ∂L/∂x, the residual path's gradient
  // dres (of dx's dtype) plus LayerNorm's (dres may be dx itself: accumulated in place).
  virtual void layernorm_forward(Act y, float* mean, float* rstd, ActIn x, const float* w,
                                 const float* b, int N, int C) = 0;
  virtual void layernorm_backward(Act dx, ActIn dres, float* dw, float* db, ActIn dy, ActIn x,
                                  const float* w, const float* mean, const float* rstd, int N,
                                  int C) = 0;
  virtual void layernorm_backward_weight(float* dw, float* db, ActIn dy, ActIn x,
                                         const float* mean, const float* rstd, int N, int C) = 0;
  virtual void gelu_forward(Act y, ActIn x, long N) = 0;
  virtual void gelu_backward(Act dx, ActIn x, const float* dy, long N) = 0;
  virtual void residual_bias_add(Act out, ActIn x, ActIn y, const float* b, long N, int C) = 0;
  virtual void residual_bias_backward(float* db, ActIn dy, long N, int C) = 0;

  // ---- embedding.h: token rows [v0, v0 + Vr) of wte, positions of wpe. tokens/positions are
  // memory of this device too.
  virtual void token_embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                       int v0, int Vr, int N, int C) = 0;
  virtual void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                        int v0, int Vr, int N, int C) = 0;
  virtual void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0,
                                          int C) = 0;
  virtual void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0,
                                           int C) = 0;
  /// The same with the positions of each of the Tl rows given (context parallelism's rows).
  virtual void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                             const int* positions, int C) = 0;
  virtual void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                              const int* positions, int C) = 0;

  // ---- cross_entropy.h: the steps of a (vocabulary-sharded) cross-entropy; max_sums is steps 1
  // and 2 in one pass where the rank holds the whole vocabulary.
  virtual void cross_entropy_row_max(float* m, const float* z, int N, int Vr) = 0;
  virtual void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0,
                                      int N, int Vr, const float* m) = 0;
  virtual void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y,
                                      int v0, int N, int Vr) = 0;
  /// grad_dtype: the dtype whose values the gradient written over z is rounded to (f32: none).
  virtual double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr,
                                    const float* m, const float* sums, float dloss,
                                    bool backward, DType grad_dtype) = 0;

  // ---- convert.h: fp32 <-> 16-bit storage (mixed precision). RoundStats is a host result; a
  // table that cannot count (CUDA) throws std::invalid_argument when given one, so a count is
  // never silently wrong (common/train/mixed_precision.h: the counts are off on a device).
  virtual void widen(const void* src, DType src_dtype, float* dst, int64_t n) = 0;
  virtual void round_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                        cpu::RoundStats* stats = nullptr) = 0;
  virtual void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                             cpu::RoundStats* stats = nullptr) = 0;

  // ---- adamw.h: the optimizer's update of a span [0, span_of(runs)) in runs of constant λ
  // (cpu::DecayRun), one call per step and span: a GPU launches once (or once per
  // kMaxRunsPerLaunch runs, kernels/cuda/adamw.h). Both throw std::invalid_argument for runs whose
  // ends do not increase (cpu::span_of). Each gradient is multiplied by s.grad_scale as it is
  // read (1/S and the clipping coefficient; 1: as it is).
  virtual void adamw_update(float* p, const float* g, float* m, float* v,
                            const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s) = 0;
  /// Mixed precision's update (Micikevicius et al. 2018 §3.1; common/optim/adamw.h step_mixed):
  /// g = widen(grads16[i])·s.grad_scale (grads in grad_dtype: f32, f16 or bf16; grad_scale: 1/S
  /// times the clipping coefficient), adamw_update's element update of the fp32 master[i] with
  /// m[i], v[i], then params16[i] = round(master[i]) in param_dtype (to nearest even). Throws
  /// std::invalid_argument naming a dtype that is none of f32, f16, bf16.
  virtual void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16,
                                  DType grad_dtype, float* master, float* m, float* v,
                                  const std::vector<cpu::DecayRun>& runs,
                                  const cpu::AdamWStep& s) = 0;

  // ---- reduce: the loss scaler's overflow check (common/optim/loss_scaler.h) and the gradient
  // norm of --clip_grad (common/optim/grad_clip.h).
  /// The number of infinite or NaN elements of x[0..n) (fp32), returned to the host.
  virtual int64_t count_nonfinite(const float* x, int64_t n) = 0;
  /// Σ_i x_i² over x[0..n) (f32, f16 or bf16, widened exactly), accumulated in double, returned
  /// to the host (kernels/cpu/grad_norm.h; a GPU synchronises its stream to return it). Throws
  /// std::invalid_argument naming any other dtype.
  virtual double sum_of_squares(ActIn x, int64_t n) = 0;

  // ---- 2D / 2.5D tensor parallelism (kernels/cpu/tp_grid.h): SUMMA's accumulation, a bias on
  // a product's rows, and the LayerNorm of rows split over a group, in the passes between which
  // common/tp_grid all-reduces partial row sums.
  virtual void add_to(float* y, const float* x, int64_t n) = 0;
  virtual void bias_add(float* y, const float* b, long N, int C) = 0;
  virtual void layernorm_partial_sum(float* s, const float* x, long N, int Cl) = 0;
  virtual void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl,
                                    int C) = 0;
  virtual void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                                   const float* w, const float* b, const float* mean,
                                   const float* s, long N, int Cl, int C) = 0;
  virtual void layernorm_backward_partial(float* s, const float* dy, const float* x,
                                          const float* w, const float* mean, const float* rstd,
                                          long N, int Cl) = 0;
  virtual void layernorm_backward_apply(float* dx, const float* s, const float* dy,
                                        const float* x, const float* w, const float* mean,
                                        const float* rstd, long N, int Cl, int C) = 0;
  // ---- end of 2D / 2.5D tensor parallelism.
  // ---- mixed precision's rounding statistics on any device (the mixed_precision stage's
  // report). The counts of a rounding, taken apart from it: a device's round_to and
  // accumulate_to count nothing (CUDA throws when given a RoundStats), so round_counted below
  // asks this first, then rounds.
  /// What round_to (accumulate false) or accumulate_to (true) of src[0..n) into dst (dtype
  /// dst_dtype: f32, f16 or bf16) would count, WITHOUT writing dst: per element
  /// x = src[i] (accumulate: widen(dst[i]) + src[i]) and h = round(x) to nearest even; nonzero
  /// counts x != 0, underflow x != 0 with h == 0, overflow x finite with h = ±inf, nonfinite h
  /// inf or nan; elements = n (kernels/cpu/convert.h's RoundStats, the same counts as its
  /// round_to/accumulate_to). A host result. Throws std::invalid_argument naming another dtype.
  virtual cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype,
                                         int64_t n, bool accumulate) = 0;

  /// "" when the device can run these kernels now, else why not ("no CUDA device
  /// (cudaGetDeviceCount: ...)"): a table can be linked into a binary on a machine without its
  /// device. The CPU's always can.
  virtual std::string unavailable_reason() const { return ""; }
  /// Devices of this kind this process can see (1 for the CPU).
  virtual int device_count() const { return 1; }
  /// Makes device `index` (0-based, < device_count()) the one this process's later allocations
  /// and kernels use (cudaSetDevice for CUDA; nothing for the CPU). train_main calls it once per
  /// rank with device_for_rank(local rank, local size, device_count()) (common/comm).
  virtual void set_device(int index) { (void)index; }
  /// fp32 matrix products on TF32 tensor cores (inputs rounded to 10-bit mantissas, fp32
  /// accumulation; NVIDIA A100/H100) when `on`; off by default, so results match kernels/cpu
  /// within fp32 rounding. Nothing for the CPU. train_main calls it for --tf32.
  virtual void set_tf32(bool on) { (void)on; }
  /// The largest logits chunk, in elements (rows·V/t), that the head computes at a time
  /// (common/nn/gpt_embed_head.cc): 2²² (16 MiB of fp32) on the CPU, where it bounds the
  /// activation memory and nothing is lost by chunking. A GPU pays per chunk (the chunk's small
  /// GEMM underfills the chip, its loss is read back to the host, the (V/t, C) wte gradient is
  /// read and written once per chunk), so CUDA asks for 2²⁸ (1 GiB: 5,341 rows of GPT-2's 50,257
  /// logits, two chunks for 8 sequences of 1,024).
  virtual int64_t logits_chunk_elements() const { return int64_t{1} << 22; }

  // ---- mixed precision's matrix products (Micikevicius et al. 2018 §3: 16-bit operands, fp32
  // accumulation). The model's linear layers under bf16/fp16 hand the matmul_* entries their
  // 16-bit activations as stored (Act) and fp32 copies of their 16-bit weights (FlatParams); the
  // tied head, fp32 copies of both (f32_view.h): every operand (x, W or Wt, dy) is then EXACTLY
  // a bf16 (or fp16) value. Such values are also exact in TF32 (8 exponent bits, 10 mantissa bits:
  // bf16's 7 and fp16's 10 fit, and fp16's range and subnormals are normal TF32 numbers), so a
  // GPU may run those products on TF32 tensor cores and compute the same products as fp32, only
  // summed in another order; or copy them to bf16 (fp16), exactly, and run them on 16-bit
  // tensor cores, twice TF32's rate. The walk declares it with the scope MatmulOperands below;
  // CUDA then runs the matmul_* entries on their operands in 16 bits (as stored, their noted
  // sources, or exact copies: context.h SixteenBitOperands, whatever set_tf32 says), and the
  // CPU, which has no tensor cores, CHECKS the promise instead: every operand of a matmul_* call
  // (and matmul_forward's bias) under a 16-bit declaration must round-trip through that dtype,
  // else std::logic_error naming the entry, the operand and the element ("matmul_forward:
  // x[17] = 0.1 is not a bf16 value ...").
  // So the CPU tests of every 16-bit run prove what the GPU relies on (cpu::first_inexact, one
  // vectorised pass per operand: ~8% of a bf16 step of mini on the CPU, 7,670 against 8,350
  // tokens/s measured side by side). The declaration covers the attention entries' inputs too
  // (qkv; dout and the kept att in the backward). With P kept in fp32, CUDA runs the products
  // among them (Q Kᵀ, dY Vᵀ, Pᵀ dY) on TF32, and P V, dS K and dSᵀ Q too when P and dS are rounded
  // to bf16 (probs_dtype above; common/nn/sublayer.h rounded_products), else in fp32; with P
  // stored in 16 bits it runs them on 16-bit tensor cores (kernels/cuda/attention.h).
  /// Declares the operands of the following matmul_* calls: f32 (the default: any fp32
  /// values) or f16 / bf16 (values of that dtype, see above). std::invalid_argument for others.
  virtual void set_matmul_operands(DType d);
  DType matmul_operands() const { return matmul_operands_; }

  /// f32[0..n) holds exactly widen(src[0..n)) (src: f16 or bf16 memory of this device) until
  /// forget_source(f32): Fp32Copy (F32In's among them) and FlatParams say so of the fp32 copies
  /// they widen to read. A table whose products read 16-bit operands (CUDA, under a 16-bit
  /// declaration) then reads an operand inside such a copy from its source instead of rounding
  /// it again (sixteen_bit_sources.h). The caller forgets before freeing f32. Default (the CPU):
  /// nothing.
  virtual void note_source(const float* f32, const void* src, DType dtype, int64_t n) {
    (void)f32, (void)src, (void)dtype, (void)n;
  }
  virtual void forget_source(const float* f32) { (void)f32; }

 private:
  DType matmul_operands_ = DType::kF32;
};

/// set_matmul_operands(d) on `ops` for the scope's lifetime, then the previous declaration.
/// Opened by UnitRunner::run (common/nn/unit_runner.cc) with d = the walk's 16-bit dtype when its
/// parameters and activations share it. The head's dlogits and attention's P and dS are not
/// among the declared values: the model rounds them itself, to bf16 only (sublayer.h
/// rounded_products), and CUDA's products with them read 16-bit copies only then.
class MatmulOperands {
 public:
  MatmulOperands(KernelOps& ops, DType d) : ops_(ops), previous_(ops.matmul_operands()) {
    ops_.set_matmul_operands(d);
  }
  ~MatmulOperands() { ops_.set_matmul_operands(previous_); }
  MatmulOperands(const MatmulOperands&) = delete;
  MatmulOperands& operator=(const MatmulOperands&) = delete;

 private:
  KernelOps& ops_;
  DType previous_;
};

/// The fp32 values of n elements at p (dtype f32, f16 or bf16, memory of `device`) for one call
/// of a kernel that computes on fp32, as common/nn/f32_view.h does for tensors; used by the tables
/// whose attention kernels compute on an fp32 P (kernels/cpu) when the model stores P in 16 bits.
/// f32: p itself. Otherwise an fp32 Tensor on `device` (MemCategory::kOther, the f32_view.h
/// copies' category), widened from p first when `load`, rounded back into p (once) by store() or
/// the destructor when `store`; store() frees the copy, so get() is not to be used after it. The
/// widening and the rounding are kernel_ops(device)'s. An input copy (load, not store) is noted
/// as p's exact widening while it lives (KernelOps::note_source, forgotten by the destructor),
/// so a GPU's 16-bit products read p itself where they meet the copy. common/nn/f32_view.h's
/// views are these.
class Fp32Copy {
 public:
  Fp32Copy(const void* p, DType dtype, int64_t n, Device device, bool load, bool store);
  /// An output (widened first when `load`: updated in place), rounded back.
  Fp32Copy(Act a, int64_t n, Device device, bool load = false)
      : Fp32Copy(a.p, a.dtype, n, device, load, /*store=*/true) {}
  /// An input: widened, never written back.
  Fp32Copy(ActIn a, int64_t n, Device device)
      : Fp32Copy(a.p, a.dtype, n, device, /*load=*/true, /*store=*/false) {}
  /// An output that starts from `initial`'s values (widened; `initial` may be `a` itself), for a
  /// kernel that accumulates into it, rounded back into a (layernorm_backward's dx = dres + ...).
  Fp32Copy(Act a, ActIn initial, int64_t n, Device device);
  ~Fp32Copy();
  Fp32Copy(const Fp32Copy&) = delete;
  Fp32Copy& operator=(const Fp32Copy&) = delete;
  float* get() const { return f32_; }
  void store();

 private:
  void* p_;
  DType dtype_;
  int64_t n_;
  Tensor tmp_;
  float* f32_ = nullptr;
  bool store_;
  bool noted_ = false;  // an input copy noted as p's widening (forgotten by the destructor)
};

/// The kernels for tensors on `d`: kernels/cpu for Device::kCPU (always there), whatever was
/// registered for Device::kCUDA. Throws std::runtime_error("no kernels for device cuda ...")
/// when none was.
KernelOps& kernel_ops(Device d);

/// Why tensors on `d` cannot be computed on in this process, as one line: no kernels registered
/// (kernel_ops' message), or the table's unavailable_reason() (no GPU, no driver: the runtime's
/// words); "" when they can. What a tool's --device check prints after "--device cuda: ".
std::string device_unavailable_reason(Device d);

/// round_to (accumulate false) or accumulate_to (true) of src[0..n) into dst on ops' device,
/// with `stats` (nullable) counted on any device: the CPU counts while it rounds; another device
/// first counts (ops.count_rounding: one more read of src and dst and a 32-byte result copied to
/// the host, which synchronises), then rounds without counting.
void round_counted(KernelOps& ops, const float* src, void* dst, DType dst_dtype, int64_t n,
                   bool accumulate, cpu::RoundStats* stats);

/// Makes `ops` the kernels of ops->device() (replacing any; nullptr for `d` removes them). The
/// table must outlive its use. kernels/cuda:ops calls it for its CUDA table when linked in.
void register_kernel_ops(Device d, KernelOps* ops);

}  // namespace llmp
