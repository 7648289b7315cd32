#!/usr/bin/env bash
# Every stage's binary, run as a user runs it, ends where the baseline ends: the same parameters
# after the same steps, on the CPU or on a GPU (issue 16: "every stage trains on the GPU and
# matches the GPU baseline"). Each stage trains tiny (L = 4, H = 4) for 5 steps from the same
# seed on the same global batches, --save's its checkpoint, and tools/compare_checkpoints
# measures max |a − b| / max |b| over all parameters against the baseline's (tests/equivalence.h's
# measure; the in-process stage tests check the same inside one binary, this checks the binaries:
# their flags, data slicing and checkpoint gathering).
#
#   stage_equivalence_test.sh DEVICE COMPARE BASELINE [BACKEND]
#     DEVICE     cpu or cuda (every run gets --device DEVICE)
#     COMPARE    tools/compare_checkpoints
#     BASELINE   stages/baseline/train (or train_emulated): every other stage's binary is beside
#                it, at ../<stage>/ under the same name (bazel-bin's layout, and the GPU kit's:
#                tools/gpu_kit.sh). train_emulated (stages/trainer.bzl) runs `--device cuda` on
#                the CUDA emulator: the GPU path's kernels and cuBLAS calls on the CPU.
#     BACKEND    --backend of every cuda run: auto (the default), mpi or nccl. The emulated test
#                passes nccl with 8 emulated GPUs, so every multi-rank stage runs over NCCL.
#
# Bounds.
#   kSameDevice = 1e-4  a stage against the baseline on the same device. On the CPU the largest
#                       seen is 8.2e-6 (hybrid_3d; tensor_parallel 8.1e-6: the tensor-parallel
#                       stages split every product's sum over ranks); 12× headroom.
#   kCrossDevice = 1e-3 the GPU baseline against the CPU baseline (cuda only), and pipedream_2bw
#                       on the GPU against itself on the CPU. cuBLAS and the CUDA reductions
#                       sum in another order in EVERY kernel (Eigen's blocks vs cuBLAS's tiles,
#                       warp shuffles vs a serial loop), TF32 off, so the difference is of the
#                       kind the tensor-parallel stages show at 8e-6, compounded over all ops:
#                       allowed 100×, and still 6× below 6.5e-3, the smallest algorithmic change
#                       this check meets (one step of PipeDream-2BW's weight staleness).
# A padded vocabulary (--make_vocab_size_divisible_by 96: tiny's 256 rows of wte become 288, the
# logits' last 32 columns masked) is checked against the UNPADDED baseline: its checkpoint holds
# the 256 real rows (checkpoint_io.h), so it must be the same model. On the baseline itself, on
# two tensor-parallel ranks (rank 1 holds rows 144-287, 32 of them padding), on a pipeline (wte
# tied across the first and last stages) and under Ulysses (the context-parallel embedding).
# Flash attention (--attention flash, common/nn/flash_attention.h) is the same model attending in
# another order: checked against the materialized baseline on one rank, a pipeline, two
# tensor-parallel ranks (each rank's heads) and the 2D grid's own walk (with its full
# recomputation too). On a GPU it runs ring attention's blockwise kernels.
# The check can fail: pipedream_2bw (stale weights by design) must DIFFER from the baseline by
# more than kSameDevice on either device (a negative control of the comparison and its bound).
#
# Not here: long_sequences and recompute (drivers that run other stages), mixed_precision (it
# trains four precisions itself), bf16 / fp16 (c_attn.bias's key part is amplified rounding
# noise at 16 bits: zero2 vs baseline in bf16 differ by 3.4e-3, as much as bf16 vs fp32, so this
# measure cannot tell a bug from rounding there; stages/*/..._mixed_precision_test check them).
#
# DEVICE cuda without a GPU (or in a binary built without CUDA): the baseline's refusal names the
# reason; the test prints it, writes a skipped test case to $XML_OUTPUT_FILE and exits 0, as the
# GPU twin tests do. Any other refusal on a machine with a GPU fails.
set -u
source "$(dirname "$0")/skip_without_gpu.sh"
device=$1 compare=$2 stages=$(dirname "$(dirname "$3")") trainer=$(basename "$3")
backend=${4:-auto}
readonly kSameDevice=1e-4 kCrossDevice=1e-3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--layers 4 --heads 4 --global_batch 8 --eval_every 0 --quiet --timeout 120)
model=(--model tiny)  # train's default; the mixture of experts passes its own
failures=()

# train NAME STAGE DEVICE WORLD [FLAGS...]: 5 steps, saved to $tmp/NAME.safetensors; 1 on failure.
# FLAGS may name --model (else tiny).
train() {
  local name=$1 stage=$2 dev=$3 world=$4
  shift 4
  local m=("${model[@]}") b=()
  [[ " $* " == *" --model "* ]] && m=()
  [ "$dev" = cuda ] && b=(--backend "$backend")
  if ! "$stages/$stage/$trainer" "${common[@]}" "${m[@]}" --steps 5 --device "$dev" "${b[@]}" \
       --world_size "$world" "$@" --save "$tmp/$name.safetensors" </dev/null \
       >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: $stage --device $dev --world_size $world $* exited non-zero:"
    tail -5 "$tmp/$name.log"
    failures+=("$name")
    return 1
  fi
}

# check NAME REF BOUND: NAME's parameters within BOUND of REF's.
check() {
  local line
  if line=$("$compare" "$tmp/$1.safetensors" "$tmp/$2.safetensors" --max_rel "$3" 2>&1); then
    echo "ok   $1 vs $2: ${line%%$'\n'*} (bound $3)"
  else
    echo "FAIL $1 vs $2 (bound $3): $line"
    failures+=("$1")
  fi
}

# check_differs NAME REF BOUND: the negative control, NAME beyond BOUND of REF.
check_differs() {
  local line
  line=$("$compare" "$tmp/$1.safetensors" "$tmp/$2.safetensors" --max_rel "$3" 2>&1)
  if [ $? -eq 1 ]; then
    echo "ok   $1 differs from $2 beyond $3, as it must: ${line%%$'\n'*}"
  else
    echo "FAIL $1 vs $2: expected a difference beyond $3 (the check could not fail): $line"
    failures+=("$1")
  fi
}

if [ "$device" = cuda ]; then
  skip_without_gpu stage_equivalence_cuda every_stage_on_the_gpu "$tmp/probe.log" -- \
    "$stages/baseline/$trainer" "${common[@]}" "${model[@]}" --steps 1 --device cuda
fi

# --backend nccl must mean NCCL: without --quiet the trainer names the backend of the world group
# it trains on (train_main asks the group, not the flag).
if [ "$device" = cuda ] && [ "$backend" = nccl ]; then
  "$stages/ddp/$trainer" --model tiny --layers 4 --heads 4 --global_batch 8 --eval_every 0 \
    --steps 1 --device cuda --backend nccl --world_size 2 </dev/null >"$tmp/backend.log" 2>&1
  if grep -q 'collectives of device tensors: NCCL' "$tmp/backend.log"; then
    echo "ok   ddp --backend nccl: $(grep -m1 'collectives of device tensors' "$tmp/backend.log")"
  else
    echo "FAIL ddp --backend nccl did not say it runs over NCCL:"
    tail -5 "$tmp/backend.log"
    failures+=(backend)
  fi
fi

# The references: the baseline on this device (dense and mixture of experts).
train base baseline "$device" 1 || exit 1
train moe_base baseline "$device" 1 --model moe-tiny || exit 1
if [ "$device" = cuda ]; then
  train base_cpu baseline cpu 1 && check base base_cpu "$kCrossDevice"
  train moe_base_cpu baseline cpu 1 --model moe-tiny && check moe_base moe_base_cpu "$kCrossDevice"
fi

# stage world [flags]: every stage equivalent to the baseline (tiny, L = 4 so that interleaved
# 1F1B's 2 × 2 virtual stages divide it, H = 4 so that t = 2 and q = 2 divide it).
while read -r stage world flags; do
  [ -z "$stage" ] && continue
  name=$stage${flags:+_$(tr -c 'a-z0-9' '_' <<<"$flags" | sed 's/^_*//; s/_*$//; s/__*/_/g')}
  # shellcheck disable=SC2086  # flags are words
  train "$name" "$stage" "$device" "$world" $flags && check "$name" base "$kSameDevice"
done <<'EOF'
naive_dp 2
ddp 2
zero1 2
zero2 2
zero3 2
naive_pp 2
gpipe 2
1f1b 2
interleaved_1f1b 2
zero_bubble 2
chimera 2
tensor_parallel 2
sequence_parallel 2
tensor_parallel 2 --recompute full --partition_activations
tp_2d 4
tp_2p5d 8
tp_3d 8
hybrid_3d 8
ulysses 2
ring_attention 2
ring_self_attention 2
ulysses 2 --recompute full
ring_attention 2 --recompute full --recompute_every 2
baseline 1 --make_vocab_size_divisible_by 96
tensor_parallel 2 --make_vocab_size_divisible_by 96
1f1b 2 --make_vocab_size_divisible_by 96
ulysses 2 --make_vocab_size_divisible_by 96
baseline 1 --attention flash
1f1b 2 --attention flash
tensor_parallel 2 --attention flash
tp_2d 4 --attention flash --recompute full
EOF
if [ "$device" = cuda ]; then  # ZeRO-Offload: the optimizer's step on the host
  train zero2_offload zero2 cuda 2 --offload optimizer && check zero2_offload base "$kSameDevice"
  train zero3_offload zero3 cuda 2 --offload optimizer && check zero3_offload base "$kSameDevice"
  # ZeRO-R Pa+cpu: full recomputation with its checkpoints waiting on the host.
  train zero2_cpu_ckpt zero2 cuda 2 --recompute full --cpu_checkpointing && \
    check zero2_cpu_ckpt base "$kSameDevice"
  train tp_pa_cpu_ckpt tensor_parallel cuda 2 --recompute full --partition_activations \
    --cpu_checkpointing && check tp_pa_cpu_ckpt base "$kSameDevice"
  train rsa_cpu_ckpt ring_self_attention cuda 2 --recompute full --cpu_checkpointing && \
    check rsa_cpu_ckpt base "$kSameDevice"
fi
train moe moe "$device" 2 --model moe-tiny && check moe moe_base "$kSameDevice"
# A recomputed MoE block routes and all_to_alls again, to the same result.
train moe_recompute moe "$device" 2 --model moe-tiny --recompute full && \
  check moe_recompute moe_base "$kSameDevice"

# The negative control: PipeDream-2BW's stale weights are not the baseline's.
if train pipedream_2bw pipedream_2bw "$device" 2; then
  check_differs pipedream_2bw base "$kSameDevice"
  if [ "$device" = cuda ]; then
    train pipedream_2bw_cpu pipedream_2bw cpu 2 && \
      check pipedream_2bw pipedream_2bw_cpu "$kCrossDevice"
  fi
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "${#failures[@]} failed: ${failures[*]}"
  exit 1
fi
echo "every stage on $device matches its reference"
