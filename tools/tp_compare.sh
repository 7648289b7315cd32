#!/usr/bin/env bash
# tp_compare.sh: 1D, 2D, 2.5D and 3D tensor parallelism side by side, measured, as one Markdown
# table.
#
#   tools/tp_compare.sh                          mini, P = 4 and 8 (builds the trainers first)
#   tools/tp_compare.sh --preset tiny --sizes 4  the tiny model, P = 4 only
#   tools/tp_compare.sh --bin_dir DIR -- --heads 4
#                                                trainers already built under DIR/<stage>/train;
#                                                flags after -- go to every trainer
#
# Each method is its stage's train binary (1D: stages/tensor_parallel, Megatron-LM, Shoeybi et
# al. 2019; 2D: stages/tp_2d, Optimus, Xu et al. 2021; 2.5D: stages/tp_2p5d, Tesseract, Wang et
# al. 2021; 3D: stages/tp_3d, Bian et al. 2021), run for 2 steps with
#   --model PRESET --steps 2 --eval_every 0 --world_size P [--depth d] --quiet --oversubscribe
# The values are rank 0's, read from the report's "(exact bytes: what V, ...)" line: parameters,
# activations per block, the sum of every "sent per step (<group>)" row (bytes sent per step), and
# "collective calls per step". A stage that is not built prints "(not built)"; a run that fails
# prints "(failed: exit N)" and its last error line; a shape the method cannot take says why.
#
# The last column is Colossal-AI's asymptotic per-rank cost of one linear layer (Bian et al.
# 2021, Table 1; Wang et al. 2021, §3), relative to one rank's whole layer, evaluated at the grid:
#   method  parameters  activations  bandwidth              latency (messages)
#   1D      1/P         1            2(P-1)/P               2(P-1)
#   2D      1/q²        1/q²         6(q-1)/q               6(q-1)
#   2.5D    1/q²        1/(dq²)      3(q-1)(d+1)/(dq)       6(q-1)
#   3D      1/q³        1/q³         6(q-1)/q³              6(q-1)
# and "vs 1D" divides each measured value by 1D's at the same P (n/a where 1D cannot run at P:
# 1D needs P | H, and the 1D row then says so).
#
# Exit status: 0 when the table is printed (rows may say "(not built)"), 2 on bad arguments, 1
# when a build fails.
#
# Glossary: P ranks, q grid side, d depth (2.5D), H heads, t 1D tensor-parallel size.
set -u

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

preset=mini
sizes="4 8"
bin_dir=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=${2:-}; shift 2 || { echo "error: --preset needs a value" >&2; exit 2; } ;;
    --sizes) sizes=${2:-}; shift 2 || { echo "error: --sizes needs a value" >&2; exit 2; } ;;
    --bin_dir) bin_dir=${2:-}; shift 2 || { echo "error: --bin_dir needs a value" >&2; exit 2; } ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "error: tp_compare.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

# Heads of the preset (common/nn/gpt_layout.cc), or --heads among the trainers' flags.
case "$preset" in
  tiny) H=2 ;;
  mini) H=4 ;;
  *) echo "error: tp_compare.sh: --preset '$preset' (expected tiny or mini)" >&2; exit 2 ;;
esac
for ((a = 0; a < ${#extra[@]}; a++)); do
  if [ "${extra[$a]}" = "--heads" ] && [ $((a + 1)) -lt ${#extra[@]} ]; then
    case "${extra[$((a + 1))]}" in ''|*[!0-9]*|0) ;; *) H=${extra[$((a + 1))]} ;; esac
  fi
done
for P in $sizes; do
  case "$P" in ''|*[!0-9]*|0) echo "error: tp_compare.sh: --sizes '$sizes': $P is not a positive integer" >&2; exit 2 ;; esac
done

stages=(tensor_parallel tp_2d tp_2p5d tp_3d)
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$bin_dir" ]; then
  targets=()
  for s in "${stages[@]}"; do
    [ -f "$root/stages/$s/BUILD" ] && targets+=("//stages/$s:train")
  done
  (cd "$root" && bazel build "${targets[@]}") >&2 || { echo "error: tp_compare.sh: bazel build ${targets[*]} failed" >&2; exit 1; }
  bin_dir="$root/bazel-bin/stages"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# int_root N K: the integer r with r^K = N, or nothing.
int_root() {
  local n=$1 k=$2 r
  for ((r = 1; r <= n; r++)); do
    local p=1 e
    for ((e = 0; e < k; e++)); do p=$((p * r)); done
    [ "$p" -eq "$n" ] && { echo "$r"; return; }
    [ "$p" -gt "$n" ] && return
  done
}

# run STAGE P [--depth d]: runs the trainer; sets `vals` to "params act bytes calls" (a "—" where
# the report has no such row) or `why` to why there are none.
run() {
  local stage=$1 P=$2
  shift 2
  vals="" why=""
  local bin="$bin_dir/$stage/train"
  if [ ! -x "$bin" ]; then why="(not built)"; return; fi
  "$bin" --model "$preset" --steps 2 --eval_every 0 --world_size "$P" "$@" --quiet \
    --oversubscribe "${extra[@]}" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    why="(failed: exit $rc: $(grep -m1 '^error' "$tmp/err" | cut -c1-80))"
    return
  fi
  local line
  line=$(grep -m1 '(exact bytes: ' "$tmp/out")
  if [ -z "$line" ]; then why="(no \"(exact bytes: ...)\" line in its report)"; return; fi
  # "(exact bytes: parameters 123, gradients 123, sent per step (row group) 45, ... on rank 0)"
  vals=$(echo "$line" | sed -e 's/.*(exact bytes: //' -e 's/ on rank 0).*//' | tr ',' '\n' | awk '
    { sub(/^ +/, ""); v = $NF; $NF = ""; sub(/ +$/, ""); what = $0 }
    what == "parameters" { p = v }
    what == "activations per block" { a = v }
    what ~ /^sent per step \(/ { b += v; nb++ }
    what == "collective calls per step" { c = v }
    END { printf "%s %s %s %s\n", (p == "" ? "—" : p), (a == "" ? "—" : a), (nb ? b : "—"),
                                  (c == "" ? "—" : c) }')
}

# The asymptotic column: "params · activations · bandwidth · latency" at this grid.
asym() {
  awk -v m="$1" -v P="$2" -v q="$3" -v d="$4" 'BEGIN {
    if (m == "1D") printf "1/P=%.3g · 1 · 2(P−1)/P=%.3g · 2(P−1)=%d", 1/P, 2*(P-1)/P, 2*(P-1)
    if (m == "2D") printf "1/q²=%.3g · 1/q²=%.3g · 6(q−1)/q=%.3g · 6(q−1)=%d", 1/q^2, 1/q^2, 6*(q-1)/q, 6*(q-1)
    if (m == "2.5D") printf "1/q²=%.3g · 1/(dq²)=%.3g · 3(q−1)(d+1)/(dq)=%.3g · 6(q−1)=%d", 1/q^2, 1/(d*q^2), 3*(q-1)*(d+1)/(d*q), 6*(q-1)
    if (m == "3D") printf "1/q³=%.3g · 1/q³=%.3g · 6(q−1)/q³=%.3g · 6(q−1)=%d", 1/q^3, 1/q^3, 6*(q-1)/q^3, 6*(q-1)
  }'
}

# ratio A B: A/B to 3 significant digits, or n/a.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "—" || b == "—" || b == "" || b + 0 == 0) print "n/a"; else printf "%.3g", a / b }'; }

echo "| method | P | grid | parameters/rank (bytes) | activations per block/rank (bytes) | bytes sent/step/rank | collective calls/step | Colossal-AI asymptotic (params · act · bandwidth · latency) | vs 1D at the same P (params, act, bytes, calls) |"
echo "|---|---|---|---|---|---|---|---|---|"
for P in $sizes; do
  # 1D at P when P divides H; otherwise at the largest t < P that does, and said so.
  t=$P
  while [ "$t" -gt 1 ] && [ $((H % t)) -ne 0 ]; do t=$((t - 1)); done
  base=""
  for m in 1D 2D 2.5D 3D; do
    grid="" args=() stage="" q=1 d=1 runP=$P note=""
    case $m in
      1D) stage=tensor_parallel runP=$t grid="t=$t"
          if [ "$t" -ne "$P" ]; then
            [ "$H" -lt "$P" ] && why1="H=$H < P=$P" || why1="P=$P does not divide H=$H"
            grid="t=$t (not possible at P=$P: $why1; ran at the largest t ≤ P that divides H)"
          fi ;;
      2D) stage=tp_2d q=$(int_root "$P" 2)
          [ -z "$q" ] && note="not possible: $P is not a square" || grid="q=$q ($q×$q)" ;;
      2.5D) stage=tp_2p5d
          # P = q²·d with the largest q > 1 and d > 1 (P = 8: q = 2, d = 2); P = 4: q = 2, d = 1.
          q=""
          for ((c = 1; c * c <= P; c++)); do [ $((P % (c * c))) -eq 0 ] && [ "$c" -gt 1 ] && q=$c; done
          if [ -z "$q" ]; then note="not possible: P=$P has no square factor q² > 1"
          else d=$((P / (q * q))); grid="q=$q, d=$d ($q×$q×$d)"; args=(--depth "$d"); fi ;;
      3D) stage=tp_3d q=$(int_root "$P" 3)
          [ -z "$q" ] && note="not possible: $P is not a cube" || grid="q=$q ($q×$q×$q)" ;;
    esac
    if [ -z "$grid" ]; then
      echo "| $m | $P | — | $note | | | | | |"
      continue
    fi
    run "$stage" "$runP" "${args[@]}"
    if [ -n "$why" ]; then
      echo "| $m | $runP | $grid | $why | | | | $(asym "$m" "$runP" "$q" "$d") | |"
      continue
    fi
    read -r p a b c <<<"$vals"
    if [ "$m" = 1D ]; then
      [ "$t" -eq "$P" ] && base="$p $a $b $c"
      vs=$([ "$t" -eq "$P" ] && echo "1, 1, 1, 1" || echo "n/a")
    elif [ -n "$base" ]; then
      read -r bp ba bb bc <<<"$base"
      vs="$(ratio "$p" "$bp"), $(ratio "$a" "$ba"), $(ratio "$b" "$bb"), $(ratio "$c" "$bc")"
    else
      vs="n/a (no 1D run at P=$P)"
    fi
    echo "| $m | $runP | $grid | $p | $a | $b | $c | $(asym "$m" "$runP" "$q" "$d") | $vs |"
  done
done
