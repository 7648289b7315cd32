#!/usr/bin/env bash
# GPU benchmark (issue 16), on a machine with a GPU: the gpt2 preset (124M, T = 1024) on one GPU.
#
#   tools/gpu_bench.sh            bf16 tokens/s and MFU (as it is: the linear layers' and the
#                                 head's products on bf16 tensor cores, kernel_ops.h
#                                 MatmulOperands, attention's on TF32; with every 16-bit operand
#                                 copied instead of read from its source; and with --tf32), fp32
#                                 tokens/s with TF32 on and off, bf16, bf16 --tf32 and fp32 TF32
#                                 with the vocabulary padded to 50,304
#                                 (--make_vocab_size_divisible_by 128), bf16 padded with
#                                 --attention flash (on tensor cores, on CUDA cores, and at a
#                                 larger batch), and the data-parallel stages at world size 1
#                                 against the baseline
#
# MFU = FLOP/token × tokens/s / peak, where FLOP/token is what the kernels executed per token in
# the timed steps (train_main's "done:" line; kernels/cpu/flops.h counts with the same formulas
# on both devices: no recomputation here, so these are the model's FLOPs) and peak the GPU's dense
# bf16 tensor-core rate from its data sheet: H100 SXM 989.4 TFLOP/s, H100 NVL 835, H100 PCIe
# 756, H200 989.4, A100 312 (set GPU_PEAK_TFLOPS for another GPU; MFU is left out without one).
# GPU_BENCH_BATCH (8 sequences), GPU_BENCH_BIG_BATCH (32: one flash attention row),
# GPU_BENCH_STEPS (20; the first is not timed), GPU_BENCH_BIN (a folder of prebuilt
# <stage>/train, as the GPU kit's stages/ (tools/gpu_kit.sh); default: build them with Bazel and
# run bazel-bin's).
#
# Prints one markdown table, ready for the README's "On a GPU" section. Without a GPU it says so
# and exits 2 (nothing is measured).
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${GPU_BENCH_BATCH:-8}
big_batch=${GPU_BENCH_BIG_BATCH:-32}  # the flash attention row's larger batch
steps=${GPU_BENCH_STEPS:-20}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "error: no GPU visible (nvidia-smi -L failed): nothing measured" >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
peak=${GPU_PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
  case "$gpu" in
    *H100*NVL*) peak=835 ;;
    *H100*PCIe*) peak=756 ;;
    *H100*|*H200*) peak=989.4 ;;
    *A100*) peak=312 ;;
  esac
fi

stages=(baseline naive_dp ddp zero1 zero2 zero3)
targets=()
for s in "${stages[@]}"; do targets+=("//stages/$s:train"); done
bin=${GPU_BENCH_BIN:-}
if [ -z "$bin" ]; then
  bazel build "${targets[@]}" >/dev/null 2>&1 || bazel build "${targets[@]}"
  bin=bazel-bin/stages
fi

# run STAGE ARGS...: prints "tokens/s FLOP/token" of one run on the GPU (world size 1).
run() {
  local stage=$1
  shift
  local out line
  out=$("$bin/$stage/train" --device cuda --world_size 1 --model gpt2 \
    --global_batch "$batch" --steps "$steps" --eval_every 0 --log_every 1000 "$@" 2>&1) || {
    echo "$out" >&2
    echo "error: $stage $* failed" >&2
    return 1
  }
  line=$(grep -m1 'done:' <<<"$out")
  echo "$(sed -E 's/.* ([0-9.]+) tokens\/s.*/\1/' <<<"$line") \
$(sed -E 's/.* ([0-9.e+]+) FLOP\/token.*/\1/' <<<"$line")"
}

mfu() {  # tokens/s FLOP/token -> percent of the peak, or "-"
  [ -n "$peak" ] || { echo "-"; return; }
  awk -v t="$1" -v f="$2" -v p="$peak" 'BEGIN { printf "%.1f%%", 100 * t * f / (p * 1e12) }'
}

echo "GPU: $gpu (dense bf16 peak: ${peak:-unknown} TFLOP/s); gpt2, T = 1024, batch $batch, $steps steps"
echo
echo "| run | tokens/s | FLOP/token | MFU (of the bf16 peak) |"
echo "|---|---|---|---|"
read -r tok flop < <(run baseline --precision bf16)
echo "| baseline, bf16 (linear layers and head on bf16 tensor cores, attention on TF32) | $tok | $flop | $(mfu "$tok" "$flop") |"
# The same with every 16-bit operand copied, none read from its widened source (context.h
# sixteen_bit_sources_enabled): what the sources save, measured in this sitting.
read -r tok flop < <(LLMP_CUDA_COPY_16BIT_OPERANDS=1 run baseline --precision bf16)
echo "| baseline, bf16, every 16-bit operand copied (LLMP_CUDA_COPY_16BIT_OPERANDS=1) | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r tok flop < <(run baseline --precision bf16 --tf32)
echo "| baseline, bf16 with --tf32 (every product on tensor cores) | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r tok flop < <(run baseline --tf32)
echo "| baseline, fp32 with TF32 | $tok | $flop | $(mfu "$tok" "$flop") |"
# Megatron's padded vocabulary (--make_vocab_size_divisible_by 128: 50,257 -> 50,304 rows of wte,
# the 47 pad columns of the logits masked; the same model): aligned logits rows for the head's
# three products. FLOP/token then counts the pad columns' products too: 6·C·47 = 216,576 per
# token, 0.03% of it.
read -r tok flop < <(run baseline --precision bf16 --make_vocab_size_divisible_by 128)
echo "| baseline, bf16, vocabulary padded to 50,304 | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r tok flop < <(run baseline --precision bf16 --tf32 --make_vocab_size_divisible_by 128)
echo "| baseline, bf16 with --tf32, vocabulary padded to 50,304 | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r tok flop < <(run baseline --tf32 --make_vocab_size_divisible_by 128)
echo "| baseline, fp32 with TF32, vocabulary padded to 50,304 | $tok | $flop | $(mfu "$tok" "$flop") |"
# Flash attention (common/nn/flash_attention.h): lse kept, not P; ring attention's blockwise
# kernels, on bf16 tensor cores under bf16 (kernels/cuda/attention_block_tc.h), then forced onto
# the CUDA-core kernels (LLMP_CUDA_BLOCKWISE_CUDA_CORES=1) for the A/B in one sitting. FLOP/token
# is what those kernels count: 3/4 of T² per attention product.
read -r tok flop < <(run baseline --precision bf16 --make_vocab_size_divisible_by 128 \
  --attention flash)
echo "| baseline, bf16, padded, --attention flash | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r tok flop < <(LLMP_CUDA_BLOCKWISE_CUDA_CORES=1 run baseline --precision bf16 \
  --make_vocab_size_divisible_by 128 --attention flash)
echo "| the same on CUDA cores (LLMP_CUDA_BLOCKWISE_CUDA_CORES=1) | $tok | $flop | $(mfu "$tok" "$flop") |"
# Without P in memory a larger global batch fits (the issue: "global batch ... as memory allows").
read -r tok flop < <(batch=$big_batch run baseline --precision bf16 \
  --make_vocab_size_divisible_by 128 --attention flash)
echo "| baseline, bf16, padded, --attention flash, global batch $big_batch | $tok | $flop | $(mfu "$tok" "$flop") |"
read -r base flop < <(run baseline)
echo "| baseline, fp32 (TF32 off) | $base | $flop | $(mfu "$base" "$flop") |"
for s in "${stages[@]:1}"; do
  read -r tok flop < <(run "$s")
  ratio=$(awk -v a="$tok" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
  echo "| $s, fp32, world size 1 (× baseline: $ratio) | $tok | $flop | $(mfu "$tok" "$flop") |"
done
