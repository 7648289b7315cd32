// ZeRO-Offload's host side (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model
// Training", §4), shared by zero2 and zero3 (--device cuda --offload optimizer; the flag:
// offload_flag.h). The GPU keeps the working parameters and runs forward and backward; the host
// keeps this rank's gradient shard (the reduce-scatter writes it there: the gradients copied
// down), an fp32 master copy of the rank's parameter shard, and AdamW's m and v, and steps AdamW
// on the CPU; the updated shard is copied up into the device parameters.
//
//   fp32:      device model states  ZeRO-2  4Ψ + 12⌈Ψ/N⌉  ->  4Ψ
//                                   ZeRO-3  16⌈Ψ/N⌉       ->  4⌈Ψ/N⌉
//              host model states    0 -> 4⌈Ψ/N⌉ master + 4⌈Ψ/N⌉ gradients + 8⌈Ψ/N⌉ m, v
//              copies per step      4⌈Ψ/N⌉ up (the updated shard), the gradients down (4 bytes
//                                   per element) inside the reduce-scatter
//   bf16/fp16: device model states  ZeRO-2  2Ψ + 2⌈Ψ/N⌉ + 12⌈Ψ/N⌉  ->  2Ψ
//                                   ZeRO-3  16⌈Ψ/N⌉              ->  2⌈Ψ/N⌉
//              host model states    0 -> 12⌈Ψ/N⌉ fp32 master, m, v + 2⌈Ψ/N⌉ 16-bit gradients
//              copies per step      2⌈Ψ/N⌉ up (the updated shard in 16 bits), the gradients
//                                   down in 16 bits (2 bytes per element) inside the
//                                   reduce-scatter
//
// In 16 bits this is the paper's setting (§4.1, its Figure 2 dataflow): fp16 parameters and
// gradients on the GPU, and on the CPU the fp32 master weights with Adam's m and v. The 16-bit
// gradient shard is what the reduce-scatter writes on the host (2 bytes per element crossed);
// it is widened to fp32 (and unscaled by 1/S) element by element inside the host AdamW kernel
// (kernels/cpu adamw_update_mixed via AdamW::step_mixed), never stored in fp32. The updated
// master is ROUNDED ON THE HOST, into a 16-bit scratch, and those 2 bytes per element are what
// is copied up (the paper's float2half on the CPU side: the PCIe transfer up is half the
// size of copying fp32 up and rounding on the GPU, and the GPU never holds an fp32 copy).
// The arithmetic is the stage's without offload (the same 16-bit reduce-scatter, the same
// mixed AdamW kernel on the same values, round to nearest even either side), so the results
// are bit-identical to it in the same precision.
// fp16's loss scaler: the overflow check runs on the HOST gradient shard after it was copied
// down (MixedPrecision::optimizer_step: has_nonfinite, then the agreement over the group), so an
// overflow on any rank skips the step on every rank; a skipped step copies nothing up.
//
// In fp32 the device keeps fp32 parameters and the host master copy holds the same numbers:
// results are bit-identical to the stage without offload.
//
// Glossary: Ψ parameters, N data-parallel ranks, S = ⌈Ψ/N⌉ the padded shard.
#pragma once

#include <string>
#include <vector>

#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// The host side of one rank's parameter shard, whose working copy is on a device.
class OffloadedShard {
 public:
  /// `device_shard`: this rank's valid parameters (count elements, f32, f16 or bf16), a view of
  /// device memory kept for the strategy's lifetime. f32: allocates the host's master copy
  /// (`padded` f32 elements, kParameters) and copies the shard down into it (4·count bytes).
  /// 16-bit: the fp32 master copy is the host AdamW's own (AdamW::master(), optimizer state,
  /// initialised on the host from the fp32 initialisation): nothing allocated, nothing copied.
  /// Throws std::invalid_argument for another dtype or count > padded.
  OffloadedShard(const Tensor& device_shard, int64_t padded);

  /// AdamW on the host (`opt` on the CPU) with the host gradient shard (`grad_shard`, padded
  /// elements of the shard's dtype; its first count are used), then the updated shard copied up:
  /// f32, the master copy (4·count bytes); 16-bit, the master rounded on the host into a 16-bit
  /// scratch (kOther, freed here) and that copied up (2·count bytes). fp16's overflow check is
  /// MixedPrecision::optimizer_step's on the host shard, agreed over the group: a skipped step
  /// copies nothing. `clip`: --clip_grad's, its norm taken on the host shard. Returns whether the
  /// step was applied.
  bool step(MixedPrecision& mp, AdamW& opt, const Tensor& grad_shard, int64_t t,
            GradClip* clip = nullptr);
  /// After set_state overwrote the device shard. f32: the master copy from it again (4·count
  /// bytes down). 16-bit: nothing: set_state wrote the fp32 master (AdamW's) on the host and
  /// rounded the device shard from it; refreshing from the 16-bit values would drop the
  /// master's low bits.
  void refresh();

 private:
  Tensor device_shard_;  // view of the device parameters: count
  Tensor master_;        // f32 only, host: padded, the first count valid
};

/// "" when a stage may offload its optimizer from a model on `device`; else the one-line reason,
/// prefixed with `stage` ("Zero2Strategy"): ZeRO-Offload moves the optimizer off a GPU, so it
/// needs a device. Any precision (fp32, bf16, fp16).
std::string offload_error(const std::string& stage, Device device);

/// The report's model-state rows per device, measured by the MemoryTracker's per-device counts:
/// on `gpu` the parameters (`device_params` bytes, shown as `device_params_text`) and no
/// gradients or optimizer state between steps; on the host, for `dtype` f32, the master shard
/// and the gradient shard (4·padded bytes each) and m, v (8·padded); for 16-bit, no
/// parameters, the 16-bit gradient shard (2·padded) and the fp32 master, m and v as AdamW's
/// optimizer state (12·padded).
std::vector<ReportRow> offload_memory_rows(Device gpu, double device_params,
                                           const std::string& device_params_text,
                                           int64_t padded, DType dtype);

}  // namespace llmp
