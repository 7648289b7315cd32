#!/usr/bin/env bash
# --clip_grad on every stage (each takes it), run as a user runs it: the global gradient norm each
# stage prints per step is the baseline's, and it trains to the baseline's parameters with
# clipping active. Each stage owns its gradient differently (common/optim/grad_clip.h), so each
# has its own way to get the norm wrong:
#   ZeRO at 3 ranks          shards (the last one padded) summed over dp; a missing all_reduce
#                            leaves each rank with ~1/√3 of the norm
#   pipelines                stages summed over pp; wte's copy on the last stage counted once
#                            (4 stages: ranks 0 and 3 hold it), Chimera's replicas counted once
#   tensor parallel          slices summed over tp; the replicated LayerNorms, biases and wpe
#                            counted once, not t times
#   context parallel         (Ulysses, ring attention, ring self-attention) the whole gradient
#                            on every rank after its all_reduce: clipped like a replica's; a
#                            norm taken before the all_reduce would be one rank's tokens' only
#   2D, 2.5D, 3D tensor      blocks summed over every rank; a vector block replicated over a
#   parallel                 column group (2D), the depth layers (2.5D) or a plane (3D) counted
#                            once
#   hybrid 3D (dp×pp×tp)     the owned elements in each rank's ZeRO-1/-2 shard, over the world:
#                            wte's copy, the tp-replicated tensors and the dp replicas once each
#   mixture of experts       (against a moe-tiny baseline) dense tensors on rank 0, each expert
#                            on the first rank holding it (--ep 2 at 4 ranks: two hold each)
#   16 bits                  (bf16, fp16: ZeRO-2, 1F1B, tensor parallel, Ulysses against the
#                            16-bit baseline) the norm of the unscaled gradient (fp16's S
#                            divided out) of the 16-bit gradients each rank owns
# (PipeDream-2BW clips too, but its stale weights keep it from the baseline's parameters: its
# norms and parameters are checked against the delayed-update reference in
# stages/pipedream_2bw:pipedream_2bw_test.)
#
#   clip_grad_test.sh COMPARE BASELINE [EMULATED]
#     COMPARE    tools/compare_checkpoints
#     BASELINE   stages/baseline/train; every other stage's binary is at ../<stage>/train
#     EMULATED   stages/baseline/train_emulated (stages/trainer.bzl): with it, the GPU path on the
#                CUDA emulator too: the baseline with --device cuda (the norm's Σ g² a device
#                reduction, kernels/cuda/reduce.cu) against the CPU's, and zero2 --device cuda
#                --offload optimizer at 2 ranks (the norm of host shards of device gradients)
#                against that device baseline
#
# Each run: tiny (L = 4, H = 4), global batch 12 (3 divides it), 5 steps, --clip_grad 0.5, which
# clips every step here (the norms are 0.9 to 1.7), with a coefficient that changes from step to
# step: AdamW's m/√v is blind to a constant factor, not to one that changes. Checks:
#   norms      the 5 per-step norms of rank 0's progress lines ("grad norm X", 6 significant
#              digits) within kNorm of the baseline's
#   params     max |a − b| / max |b| ≤ kSameDevice against the clipping baseline
#   control    the baseline without clipping differs from the clipping baseline by more than
#              kSameDevice (else the params check could not see a stage that ignores the
#              coefficient), and the norms the unclipped run prints are other norms
# Bounds: kSameDevice = 1e-4, as tests/stage_equivalence_test.sh; kNorm = 2e-5 relative: the
# printed norms carry 6 digits (5e-6 relative rounding) and the stages sum their products in
# another order (the tensor-parallel stages' parameters differ by 8e-6 at step 5 without
# clipping). A rank that skips the all_reduce is off by 40% (ZeRO at 3 ranks); the wte copy
# counted twice moves tiny's norm by > 1e-3.
set -u
compare=$1 stages=$(dirname "$(dirname "$2")") emulated=${3:-}
readonly kSameDevice=1e-4 kCrossDevice=1e-3 kNorm=2e-5 kClip=0.5 kPrecisionNorm=5e-3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--layers 4 --heads 4 --global_batch 12 --eval_every 0 --log_every 1 --timeout 120
        --steps 5)
failures=()

# train NAME STAGE WORLD [FLAGS...]: saved to $tmp/NAME.safetensors, the per-step norms to
# $tmp/NAME.norms; 1 on failure. $trainer: the binary's name (train, or train_emulated).
trainer=train
train() {
  local name=$1 stage=$2 world=$3
  shift 3
  local model=(--model tiny)  # unless the flags name another (moe-tiny)
  [[ " $* " == *" --model "* ]] && model=()
  if ! "$stages/$stage/$trainer" "${common[@]}" "${model[@]}" --world_size "$world" "$@" \
       --save "$tmp/$name.safetensors" </dev/null >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: $stage --world_size $world $* exited non-zero:"
    tail -5 "$tmp/$name.log"
    failures+=("$name")
    return 1
  fi
  sed -n 's/^step [0-9]*\/[0-9]* |.*| grad norm \([0-9.e+-]*\).*/\1/p' "$tmp/$name.log" \
    >"$tmp/$name.norms"
}

# norms_match NAME REF [BOUND]: the same number of norms, each within BOUND (kNorm) relative of
# REF's.
norms_match() {
  local verdict bound=${3:-$kNorm}
  verdict=$(paste "$tmp/$1.norms" "$tmp/$2.norms" | awk -v bound="$bound" '
    { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r }
    END { if (n != 5) { print "bad " n " norms"; exit }
          printf "%s %.2e\n", (worst <= bound ? "ok" : "bad"), worst }')
  if [ "${verdict%% *}" = ok ]; then
    echo "ok   $1 norms vs $2: largest relative difference ${verdict#* } (bound $bound):" \
         "$(tr '\n' ' ' <"$tmp/$1.norms")"
  else
    echo "FAIL $1 norms vs $2 ($verdict; bound $bound): $(tr '\n' ' ' <"$tmp/$1.norms") vs" \
         "$(tr '\n' ' ' <"$tmp/$2.norms")"
    failures+=("$1 (norms)")
  fi
}

# params_match NAME REF [BOUND] [differ]: NAME's parameters within BOUND (kSameDevice) of REF's;
# with "differ", beyond it (the control).
params_match() {
  local line bound=${3:-$kSameDevice}
  line=$("$compare" "$tmp/$1.safetensors" "$tmp/$2.safetensors" --max_rel "$bound" 2>&1)
  local rc=$?
  if [ "${4:-}" = differ ]; then
    if [ $rc -eq 1 ]; then echo "ok   $1 differs from $2 beyond $bound: ${line%%$'\n'*}"
    else echo "FAIL $1 vs $2: expected a difference beyond $bound: $line"; failures+=("$1"); fi
  elif [ $rc -eq 0 ]; then
    echo "ok   $1 vs $2: ${line%%$'\n'*} (bound $bound)"
  else
    echo "FAIL $1 vs $2 (bound $bound): $line"
    failures+=("$1")
  fi
}

train base baseline 1 --clip_grad "$kClip" || exit 1
if [ "$(wc -l <"$tmp/base.norms")" -ne 5 ] || [ "$(grep -c '(clipped)' "$tmp/base.log")" -ne 5 ]; then
  echo "FAIL the baseline printed $(wc -l <"$tmp/base.norms") norms, $(grep -c '(clipped)' \
    "$tmp/base.log") clipped, of 5 steps (--clip_grad $kClip must clip every step):"
  grep '^step' "$tmp/base.log"
  exit 1
fi
echo "ok   baseline --clip_grad $kClip: norms $(tr '\n' ' ' <"$tmp/base.norms")(every step clipped)"

# The control: clipping changes training beyond the bound, and no norm is printed without it.
if train unclipped baseline 1; then
  params_match unclipped base "$kSameDevice" differ
  if [ -s "$tmp/unclipped.norms" ]; then
    echo "FAIL the baseline without --clip_grad printed norms"
    failures+=(unclipped)
  fi
fi

while read -r stage world flags; do
  [ -z "$stage" ] && continue
  name=$stage${flags:+_$(tr -c 'a-z0-9' '_' <<<"$flags" | sed 's/^_*//; s/_*$//; s/__*/_/g')}_$world
  # shellcheck disable=SC2086  # flags are words
  if train "$name" "$stage" "$world" --clip_grad "$kClip" $flags; then
    norms_match "$name" base
    params_match "$name" base
  fi
done <<'EOF'
naive_dp 2
ddp 3
zero1 3
zero2 3
zero3 3
naive_pp 2
gpipe 2 --micro_batches 4
1f1b 4 --micro_batches 4
interleaved_1f1b 2 --chunks 2 --micro_batches 4
zero_bubble 2 --micro_batches 4
chimera 2 --micro_batches 4
tensor_parallel 2
sequence_parallel 2
tp_2d 4
tp_2p5d 8
tp_3d 8
hybrid_3d 8 --micro_batches 3
hybrid_3d 8 --micro_batches 3 --zero 2 --sequence_parallel
ulysses 2
ring_attention 2
ring_self_attention 2
EOF

# A mixture of experts against its own baseline (moe-tiny on one rank): the dense tensors are
# replicated on every rank, each expert on the ranks of its expert-data-parallel group.
if train moe_base baseline 1 --model moe-tiny --clip_grad "$kClip"; then
  while read -r world flags; do
    name=moe_$world${flags:+_ep2}
    # shellcheck disable=SC2086
    if train "$name" moe "$world" --model moe-tiny --clip_grad "$kClip" $flags; then
      norms_match "$name" moe_base
      params_match "$name" moe_base
    fi
  done <<'EOF'
2
4 --ep 2
EOF
fi

# 16-bit training with the same clipping, one stage of each way of owning the gradient. The norm
# must be the unscaled gradient's: fp16's gradients are S·g (S = 65536 at the start), so a norm
# taken before S is divided out (MixedPrecision::optimizer_step, shared by the baseline and every
# 16-bit stage) is 2^16 times the fp32 baseline's, and its coefficient clips every update to
# ~nothing; each stage's against the 16-bit baseline's then: it is taken of the 16-bit gradients
# each rank owns (ZeRO's 16-bit shards, a pipeline's fp32 stage gradients,
# tensor parallelism's 16-bit slices, the context-parallel replicas). Bounds, from these runs
# (deterministic: the same on every run here): the norms within 7.6e-4 relative of the bf16
# baseline's (zero2), 6.7e-5 of the fp16 baseline's (zero2): the stages round their partial
# gradients to 16 bits where the baseline rounds the whole batch's once (bf16 keeps 8 bits of
# mantissa, fp16 11); the bounds are 3× those. The parameters (the fp32 master weights --save
# writes): ≤ 2.2e-3 (bf16, tensor_parallel) and ≤ 1.7e-3 (fp16, tensor_parallel); bounds 1e-2
# (naive DP's bf16 bound, stages/naive_dp/naive_dp_test.cc) and 4e-3 (2× the measured: the
# clipping coefficient, a function of the rounded norm, adds to naive DP's 2e-3 in fp16).
for precision in bf16 fp16; do
  if [ "$precision" = bf16 ]; then norm16=2.3e-3 params16=1e-2; else norm16=2e-4 params16=4e-3; fi
  train "base_$precision" baseline 1 --precision "$precision" --clip_grad "$kClip" || continue
  # The 16-bit baseline's norms against fp32's: a norm taken of S·g (fp16) is 2^16 times
  # theirs. Measured: bf16 1.5e-3, fp16 2.8e-4 relative; bound kPrecisionNorm = 5e-3.
  norms_match "base_$precision" base "$kPrecisionNorm"
  while read -r stage world flags; do
    [ -z "$stage" ] && continue
    name=${stage}_${precision}_$world
    # shellcheck disable=SC2086
    if train "$name" "$stage" "$world" --precision "$precision" --clip_grad "$kClip" $flags; then
      norms_match "$name" "base_$precision" "$norm16"
      params_match "$name" "base_$precision" "$params16"
    fi
  done <<'EOF'
zero2 3
1f1b 4 --micro_batches 4
tensor_parallel 2
ulysses 2
EOF
done

# The GPU path on the CUDA emulator: the norm's sums on the device (and, offloaded, on the host).
if [ -n "$emulated" ]; then
  trainer=$(basename "$emulated")
  if train base_cuda baseline 1 --device cuda --clip_grad "$kClip"; then
    norms_match base_cuda base
    params_match base_cuda base "$kCrossDevice"
    if train zero2_offload_cuda zero2 2 --device cuda --offload optimizer --clip_grad "$kClip"; then
      norms_match zero2_offload_cuda base_cuda
      params_match zero2_offload_cuda base_cuda
    fi
  fi
  trainer=train
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "${#failures[@]} failed: ${failures[*]}"
  exit 1
fi
echo "every check passed"
