#!/usr/bin/env bash
# What one training step asks of the GPU, measured on the CUDA emulator by counting the calls the
# GPU path makes (tools/gpu_step_counts.sh; kernels/cuda/emulator/api_counts.h), against what the
# project claims of it. No GPU needed: these properties do not depend on the hardware, and on a
# GPU they are what MFU rests on.
#
#   gpu_step_counts_test.sh COUNTS BASELINE DDP ONE_F_ONE_B ULYSSES SEQUENCE_PARALLEL MOE
#     COUNTS             tools/gpu_step_counts.sh
#     BASELINE           stages/baseline/train_emulated
#     DDP                stages/ddp/train_emulated (2 ranks, 2 emulated GPUs, --backend nccl)
#     ONE_F_ONE_B        stages/1f1b/train_emulated (the same)
#     ULYSSES            stages/ulysses/train_emulated (the same)
#     SEQUENCE_PARALLEL  stages/sequence_parallel/train_emulated (the same)
#     MOE                stages/moe/train_emulated (the same, 4 experts)
#
# Claims checked (each from the counted calls, per step, tiny at L = 2 and L = 4):
#  1. 16-bit products. Under --precision bf16 every cuBLAS FLOP has bf16 operands (README "Built
#     since that run" items 1-2: the linear layers, the head and all six attention products on
#     bf16 tensor cores; none left in fp32 on CUDA cores, which was 52 of 127 ms on the H100).
#     In fp32 none is on TF32 unless --tf32 (the equivalence tests' bound assumes TF32 off), and
#     with --tf32 every one is.
#  2. The FLOPs the trainer reports (its FLOP/token: what the kernels declare, the MFU numerator)
#     are the products cuBLAS ran, less exactly what the causal mask makes useless: cuBLAS
#     computes each of attention's four triangle products (P V forward; dP, dQ, dK backward:
#     kernels/cpu/flops.h counts their lower triangles) as a full T × T square, so per step
#        executed − reported = 4 products · L · B · C · T(T − 1)
#     (per head and product: 2·hs·(T² − T(T+1)/2) = hs·T(T − 1), and H·hs = C). A product
#     counted but not run, or run but not counted, breaks the equality.
#  3. Host waits do not grow with depth or micro-batches. A call that makes the host wait for
#     the GPU drains its queue; one per layer (as Tensor::fill's device synchronise was under
#     --attention flash) shows as more waits at L = 4 than at L = 2, one per micro-batch (as the
#     token ids' cudaMemcpy was on a pipeline's first stage) as more on 1F1B's rank 0 at 8
#     micro-batches than at 4. Today's waiting calls per step, at most kMaxWaits: the loss read
#     back (a cudaMemcpyAsync into pageable memory, then cudaStreamSynchronize:
#     kernels/cuda/cross_entropy.cu). The ids go up through pinned memory (upload_ring.h).
#  4. --attention flash launches no softmax over (B, H, T, T) scores: no P in memory.
#  5. DDP over NCCL all-reduces each rank's whole gradient once per step: the bytes handed to
#     ncclAllReduce equal the gradient bytes its report measures.
#  6. The head's cross-entropy passes over the logits (the largest activation: 1.6 GB per pass at
#     gpt2's vocabulary and batch 8 × 1024) on one rank holding the whole vocabulary: one launch
#     of max_sums_kernel (the row max and Σ exp in one read) and one of loss_kernel (the gradient
#     written, rounded to bf16 as it is written) per logits chunk; none of the split vocabulary's
#     row_max_kernel and exp_sums_kernel, which read the logits once more (kernels/cuda/
#     cross_entropy.h).
#  7. AdamW updates the whole model in one launch per step (kernels/cuda/adamw.h: the runs of
#     constant weight decay in the kernel's parameters), at L = 2 as at L = 4; a launch per run
#     was 8L + 2.
#  8. Re-layouts of activations (Ulysses' head split, sequence parallelism's gather and
#     reduce_scatter, a mixture of experts' expert-buffer swap) are one strided copy each, and a
#     mixture of experts' token permutations one permute_rows launch each (4 per MoE block), not
#     a copy per row: the device-to-device copies per step are the same at global batch 8 and 16.
set -u
counts=$1 baseline=$2 ddp=$3 one_f_one_b=$4 ulysses=$5 sequence_parallel=$6 moe=$7
readonly kMaxWaits=2
export LLMP_CUDA_EMULATOR_DEVICES=2  # one per rank of the DDP run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--model tiny --heads 4 --global_batch 8)
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# step NAME TRAINER FLAGS...: one step's counts in $tmp/NAME.tsv, the model and done lines in
# $tmp/NAME.log; 1 (and a failure) if the run fails.
step() {
  local name=$1 trainer=$2
  shift 2
  if ! "$counts" "$trainer" "${common[@]}" "$@" >"$tmp/$name.tsv" 2>"$tmp/$name.log"; then
    fail "$name: $trainer $* did not run:"
    cat "$tmp/$name.log"
    return 1
  fi
  echo "== $name: $*"
  awk -F'\t' '$1 ~ /^(category|gemm|sync|nccl)$/ {
    printf "%-9s %-45s %8s %10s %14s\n", $1, $2, $3, $4, $5 }' "$tmp/$name.tsv"
  return 0  # the listing is for the log; the checks read the file
}

# total NAME CATEGORY REGEX COLUMN: the sum of COLUMN (3 calls, 4 bytes, 5 flops) over NAME's rows
# of CATEGORY whose name matches REGEX.
total() {
  awk -F'\t' -v c="$2" -v re="$3" -v col="$4" \
    'NR > 1 && $1 == c && $2 ~ re { s += $col } END { printf "%.0f\n", s }' "$tmp/$1.tsv"
}

# model NAME KEY: L, C, H or T from NAME's model line; flop_per_token NAME: its FLOP/token.
model() { sed -nE "s/.* $2=([0-9]+)[ )].*/\1/p" "$tmp/$1.log" | head -1; }
flop_per_token() { sed -nE 's/.* ([0-9.e+]+) FLOP\/token.*/\1/p' "$tmp/$1.log" | head -1; }

# ---- 1, 2, 3: bf16, materialized attention -------------------------------------------------
for L in 2 4; do
  step "bf16_L$L" "$baseline" --precision bf16 --layers "$L" || continue
  all=$(total "bf16_L$L" gemm . 5) bf16=$(total "bf16_L$L" gemm '^bf16 operands$' 5)
  [ "$all" -gt 0 ] || fail "bf16_L$L: no cuBLAS product counted"
  [ "$bf16" = "$all" ] || fail "bf16_L$L: $bf16 of $all cuBLAS FLOPs on bf16 operands"
  Lm=$(model "bf16_L$L" L) C=$(model "bf16_L$L" C) T=$(model "bf16_L$L" T) B=8
  per_token=$(flop_per_token "bf16_L$L")
  awk -v e="$all" -v r="$per_token" -v L="$Lm" -v B="$B" -v C="$C" -v T="$T" 'BEGIN {
        reported = r * B * T; masked = 4 * L * B * C * T * (T - 1)
        printf "   executed %d, reported %.6g, masked triangles %d\n", e, reported, masked
        # the reported FLOP/token has 6 significant digits
        exit !(e - reported - masked <= 1e-5 * e && reported + masked - e <= 1e-5 * e) }' ||
    fail "bf16_L$L: cuBLAS ran $all FLOPs; the trainer reports $per_token FLOP/token × $B × $T" \
      "plus 4·L·B·C·T(T−1) masked (L=$Lm C=$C T=$T)"
done
# ---- 7: AdamW's launches ---------------------------------------------------------------------
for L in 2 4; do
  [ -f "$tmp/bf16_L$L.tsv" ] || continue
  adamw=$(total "bf16_L$L" launch '^adamw' 3)
  echo "   AdamW launches per step at L = $L: $adamw"
  [ "$adamw" = 1 ] || fail "bf16_L$L: $adamw AdamW launches per step (one for the whole model)"
done

# ---- 6: the head's passes over the logits -----------------------------------------------------
if [ -f "$tmp/bf16_L2.tsv" ]; then
  one_pass=$(total bf16_L2 launch '^max_sums_kernel$' 3)
  loss=$(total bf16_L2 launch '^loss_kernel$' 3)
  split=$(total bf16_L2 launch '^(row_max|exp_sums)_kernel$' 3)
  echo "   cross-entropy per step: max_sums $one_pass, loss $loss, row_max + exp_sums $split"
  [ "$one_pass" -gt 0 ] && [ "$one_pass" = "$loss" ] ||
    fail "bf16_L2: $one_pass max_sums_kernel launches for $loss loss_kernel launches"
  [ "$split" = 0 ] || fail "bf16_L2: $split launches of the split vocabulary's steps on one rank"
fi
if [ -f "$tmp/bf16_L2.tsv" ] && [ -f "$tmp/bf16_L4.tsv" ]; then
  w2=$(total bf16_L2 sync . 3) w4=$(total bf16_L4 sync . 3)
  [ "$w2" = "$w4" ] || fail "bf16: $w2 host waits per step at L = 2, $w4 at L = 4"
  [ "$w4" -le "$kMaxWaits" ] || fail "bf16: $w4 host waits per step (at most $kMaxWaits)"
fi

# ---- 1: fp32 without and with TF32 ---------------------------------------------------------
if step fp32 "$baseline" --layers 2; then
  all=$(total fp32 gemm . 5) plain=$(total fp32 gemm '^fp32 operands$' 5)
  [ "$all" -gt 0 ] && [ "$plain" = "$all" ] ||
    fail "fp32: $plain of $all cuBLAS FLOPs on fp32 operands without TF32"
fi
if step fp32_tf32 "$baseline" --layers 2 --tf32; then
  all=$(total fp32_tf32 gemm . 5) tf32=$(total fp32_tf32 gemm '^fp32 operands, TF32$' 5)
  [ "$all" -gt 0 ] && [ "$tf32" = "$all" ] || fail "--tf32: $tf32 of $all cuBLAS FLOPs on TF32"
fi

# ---- 3, 4: flash attention -----------------------------------------------------------------
for L in 2 4; do
  step "flash_L$L" "$baseline" --precision bf16 --attention flash --layers "$L" || continue
  softmax=$(total "flash_L$L" launch 'softmax' 3)
  blocks=$(total "flash_L$L" launch '^forward_kernel$' 3)
  [ "$blocks" -gt 0 ] || fail "flash_L$L: no launch of the blockwise forward_kernel counted"
  [ "$softmax" = 0 ] || fail "flash_L$L: $softmax softmax launches (P materialized)"
  all=$(total "flash_L$L" gemm . 5) bf16=$(total "flash_L$L" gemm '^bf16 operands$' 5)
  [ "$all" -gt 0 ] && [ "$bf16" = "$all" ] ||
    fail "flash_L$L: $bf16 of $all cuBLAS FLOPs on bf16 operands"
done
if [ -f "$tmp/flash_L2.tsv" ] && [ -f "$tmp/flash_L4.tsv" ]; then
  w2=$(total flash_L2 sync . 3) w4=$(total flash_L4 sync . 3)
  [ "$w2" = "$w4" ] || fail "flash: $w2 host waits per step at L = 2, $w4 at L = 4"
  [ "$w4" -le "$kMaxWaits" ] || fail "flash: $w4 host waits per step (at most $kMaxWaits)"
fi

# ---- 3: a pipeline's first stage (rank 0 of 1F1B) ------------------------------------------
for m in 4 8; do
  step "1f1b_m$m" "$one_f_one_b" --layers 4 --world_size 2 --backend nccl --micro_batches "$m"
done
if [ -f "$tmp/1f1b_m4.tsv" ] && [ -f "$tmp/1f1b_m8.tsv" ]; then
  w4=$(total 1f1b_m4 sync . 3) w8=$(total 1f1b_m8 sync . 3)
  [ "$w4" = "$w8" ] || fail "1f1b rank 0: $w4 host waits per step at m = 4, $w8 at m = 8"
  [ "$w8" -le "$kMaxWaits" ] || fail "1f1b rank 0: $w8 host waits per step (at most $kMaxWaits)"
fi

# ---- 5: DDP's gradient all-reduce over NCCL ------------------------------------------------
if step ddp "$ddp" --precision bf16 --layers 2 --world_size 2 \
     --backend nccl; then
  reduced=$(total ddp nccl '^ncclAllReduce$' 4)
  # the report's exact gradient bytes: "(exact bytes: parameters P, gradients G, ...)"
  grads=$("$ddp" "${common[@]}" --precision bf16 --layers 2 --world_size 2 --backend nccl \
            --device cuda --steps 1 --eval_every 0 --quiet 2>&1 </dev/null |
          sed -nE 's/.*exact bytes:.* gradients ([0-9]+),.*/\1/p' | head -1)
  [ -n "$grads" ] && [ "$reduced" = "$grads" ] ||
    fail "ddp: $reduced bytes all-reduced over NCCL per step; the report's gradients: ${grads:-?}"
fi

# ---- 8: re-layouts of activations are one call each, not one per row ----------------------
# Ulysses' head split (common/cp/ulysses.cc), sequence parallelism's gather and reduce_scatter
# (common/tp/mappings.cc) and a mixture of experts' expert-buffer swap (common/nn/moe.cc) move
# activation rows between layouts on the device: each is a copy_strided (common/tensor/tensor.h),
# one cudaMemcpy2DAsync per head group and part, or per rank, however many rows. The MoE token
# permutations (into the experts' capacity slots and back) are one permute_rows launch each
# (kernels/cuda/permute_rows.h). A copy per row (as the re-layouts were: p·B·T/p·k cudaMemcpy
# calls per head split, about one per token and permutation in MoE) would grow with the batch,
# so the device-to-device copies per step must be the same at global batch 8 and 16.
for stage in ulysses sequence_parallel moe; do
  extra=()
  case $stage in
    ulysses) trainer=$ulysses ;;
    sequence_parallel) trainer=$sequence_parallel ;;
    moe) trainer=$moe extra=(--experts 4) ;;
  esac
  for b in 8 16; do
    saved=("${common[@]}")
    common=(--model tiny --heads 4 --global_batch "$b")
    step "${stage}_b$b" "$trainer" --layers 2 --world_size 2 --backend nccl "${extra[@]}"
    common=("${saved[@]}")
  done
  if [ -f "$tmp/${stage}_b8.tsv" ] && [ -f "$tmp/${stage}_b16.tsv" ]; then
    c8=$(total "${stage}_b8" copy 'D2D' 3) c16=$(total "${stage}_b16" copy 'D2D' 3)
    strided=$(total "${stage}_b8" copy '^cudaMemcpy2DAsync D2D$' 3)
    echo "   $stage rank 0: $c8 device-to-device copies per step at B = 8 ($strided strided)," \
      "$c16 at B = 16"
    [ "$strided" -gt 0 ] || fail "$stage: no strided copy (cudaMemcpy2DAsync) counted"
    if [ "$stage" = moe ]; then  # the token permutations: one launch each, 4 per MoE block
      permutes=$(total moe_b8 launch '^permute_rows_kernel' 3)
      echo "   moe rank 0: $permutes permute_rows launches per step"
      [ "$permutes" = 8 ] || fail "moe: $permutes permute_rows launches per step (4 per MoE block, 2 blocks)"
    fi
    [ "$c8" = "$c16" ] ||
      fail "$stage: $c8 device-to-device copies per step at B = 8, $c16 at B = 16 (one per row?)"
  fi
done

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
