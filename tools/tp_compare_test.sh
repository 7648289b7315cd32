#!/usr/bin/env bash
# tools/tp_compare.sh on the tiny model at P = 4 (sh_test in tools/BUILD):
#   $1 = tools/tp_compare.sh, $2 = stages/tensor_parallel's train binary.
# The 2D, 2.5D and 3D stages are stood in for by small scripts that check the flags they are given
# and print a report line, so the parsing, the sum of the "sent per step (...)" rows and the
# ratios against 1D are checked whether or not those stages are built.
#
# 1D's row is checked against the closed forms of common/plan/tp_formulas.h, worked by hand for
# tiny with --heads 4 (V = 256, ctx = T = 16, L = 2, C = 32, H = 4), B = 16 (the default global
# batch), t = 4:
#   Ψ_r = VC/t + ctx·C + L·(12C²/t + 7C/t + 6C) + 2C = 2,048 + 512 + 2·(3,072 + 56 + 192) + 64
#       = 9,264 floats: 37,056 bytes
#   activations per block = sbh(16 + 48/t + 4as/(ht)) + 16sb, sbh = 16·16·32 = 8,192:
#       8,192·(16 + 12 + 2) + 16·256 = 249,856 bytes
#   bytes sent = 2(t-1)/t·((4L + 2)·4BTC + 12BT) = 1.5·(10·32,768 + 3,072) = 496,128
#   collective calls = 4L + 2 + 2·1 (one cross-entropy chunk) = 12
set -u
compare=$1 train=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() {  # has NAME TEXT PATTERN: the fixed string PATTERN occurs in TEXT
  if ! grep -qF -- "$3" <<<"$2"; then fail "$1: want '$3' in:"; echo "$2"; fi
}

# A stand-in stage: checks its flags, prints a report line (or fails as told).
stub() {  # stub DIR BODY
  mkdir -p "$1"
  cat >"$1/train" <<STUB
#!/usr/bin/env bash
args="\$*"
for want in "--model tiny" "--steps 2" "--eval_every 0" "--world_size 4" "--heads 4"; do
  case "\$args" in *"\$want"*) ;; *) echo "error: stub: flag '\$want' missing in '\$args'" >&2; exit 3 ;; esac
done
$2
STUB
  chmod +x "$1/train"
}

# Run A: 1D real, 2D a stub with two groups, 2.5D a stub that fails like a bad input.
a="$tmp/a"
mkdir -p "$a/tensor_parallel"
ln -s "$(realpath "$train")" "$a/tensor_parallel/train"
stub "$a/tp_2d" 'echo "(exact bytes: parameters 9264, gradients 9264, optimizer state 18528, activations per block 62464, sent per step (row group) 1000, sent per step (column group) 2000, collective calls per step 24 on rank 0)"'
stub "$a/tp_2p5d" 'echo "error: tp_2p5d needs P = q×q×d ranks" >&2; exit 2'
out=$("$compare" --bin_dir "$a" --preset tiny --sizes 4 -- --heads 4)
rc=$?
[ $rc -eq 0 ] || fail "run A: exit $rc"
echo "$out"
has "table header" "$out" "| method | P | grid | parameters/rank (bytes) | activations per block/rank (bytes) | bytes sent/step/rank | collective calls/step |"
has "1D against tp_formulas" "$out" "| 1D | 4 | t=4 | 37056 | 249856 | 496128 | 12 | 1/P=0.25 · 1 · 2(P−1)/P=1.5 · 2(P−1)=6 | 1, 1, 1, 1 |"
# 2D: the two groups summed (3000), ratios to 1D: 9264/37056, 62464/249856, 3000/496128, 24/12.
has "2D parsed, summed and divided" "$out" "| 2D | 4 | q=2 (2×2) | 9264 | 62464 | 3000 | 24 | 1/q²=0.25 · 1/q²=0.25 · 6(q−1)/q=3 · 6(q−1)=6 | 0.25, 0.25, 0.00605, 2 |"
has "2.5D failure shown" "$out" "| 2.5D | 4 | q=2, d=1 (2×2×1) | (failed: exit 2: error: tp_2p5d needs P = q×q×d ranks) |"
has "3D at P = 4" "$out" "| 3D | 4 | — | not possible: 4 is not a cube |"

# Run B: only 1D built, tiny's own H = 2: 1D falls back to t = 2 and says so; 2D not built.
b="$tmp/b"
mkdir -p "$b/tensor_parallel"
ln -s "$(realpath "$train")" "$b/tensor_parallel/train"
out=$("$compare" --bin_dir "$b" --preset tiny --sizes 4)
echo "$out"
has "1D fallback" "$out" "| 1D | 2 | t=2 (not possible at P=4: H=2 < P=4; ran at the largest t ≤ P that divides H) |"
has "1D fallback: no ratios" "$out" "| n/a |"
has "2D not built" "$out" "| 2D | 4 | q=2 (2×2) | (not built) |"

# Bad arguments: one error line, exit 2.
for bad in "--preset huge" "--sizes x" "--frobnicate"; do
  # shellcheck disable=SC2086
  "$compare" --bin_dir "$b" $bad >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 2 ] || fail "'$bad': exit $rc, want 2"
  [ "$(grep -c '^error: ' "$tmp/e")" -eq 1 ] || { fail "'$bad': want one error line"; cat "$tmp/e"; }
done

echo "$fails failed"
[ $fails -eq 0 ]
