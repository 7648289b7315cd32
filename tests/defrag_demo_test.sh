#!/usr/bin/env bash
# ZeRO-R memory defragmentation (Rajbhandari et al. 2020, §6.3) through the real train binaries
# (common/tensor/arena.h). One training configuration, the baseline with full recomputation and
# a 68 MiB arena per rank:
#   - plain first fit: the checkpoints (kept block inputs) land among the freed temporaries, the
#     free memory is cut into pieces, and the run ends with ONE line "error: rank 0: out of memory
#     in the arena: requested ... free ... in total, largest free block ... (fragmentation)";
#   - --defrag, same bytes: the checkpoints go to the arena's top, the run trains, ends with the
#     loss of a run without an arena, and reports its fragmentation at peak (largest free block /
#     total free) above what first fit reaches in a larger arena that it can train in.
# And a multi-rank stage whose one rank runs out ends every rank, never a hang.
# Usage: defrag_demo_test.sh path/to/baseline/train path/to/1f1b/train
set -u
baseline=$1
pipeline=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

run=(--recompute full --global_batch 64 --steps 2 --eval_every 0)
arena=$((68 << 20))

# 1. First fit: out of memory with enough free in total.
timeout 120 "$baseline" "${run[@]}" --quiet --arena_bytes "$arena" >"$tmp/plain.out" 2>"$tmp/plain.err"
rc=$?
line=$(grep '^error: ' "$tmp/plain.err")
echo "first fit, 68 MiB: exit $rc: $line"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "first fit: exit status $rc (expected an error, not 0 or a hang)"
[ "$(grep -c '^error: ' "$tmp/plain.err")" -eq 1 ] || fail "first fit: not exactly one error line"
for want in "error: rank 0: out of memory in the arena: requested " " (activations) of 68.00 MiB, free " \
    " in total, largest free block " "(fragmentation); try --defrag"; do
  [[ "$line" == *"$want"* ]] || fail "first fit: the line does not say '$want'"
done
# The request is below the total free: that is what makes it fragmentation.
python3 - "$line" <<'EOF' || fail "first fit: request, total free and largest block not as fragmentation has them"
import re, sys
u = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
b = lambda v, unit: float(v) * u[unit]
m = re.search(r"requested ([\d.]+) (\w+) .* free ([\d.]+) (\w+) in total, largest free block ([\d.]+) (\w+)", sys.argv[1])
req, total, largest = b(*m.group(1, 2)), b(*m.group(3, 4)), b(*m.group(5, 6))
sys.exit(0 if largest < req <= total else 1)
EOF

# 2. --defrag, the same arena: trains, to the loss of a run on the plain host allocator.
timeout 300 "$baseline" "${run[@]}" --arena_bytes "$arena" --defrag >"$tmp/defrag.out" 2>"$tmp/defrag.err"
rc=$?
echo "defrag, 68 MiB: exit $rc"
grep -E '^(arena|done)' "$tmp/defrag.out"
[ "$rc" -eq 0 ] || { fail "--defrag: exit status $rc"; cat "$tmp/defrag.err"; }
grep -q '^arena peak used .* ok$' "$tmp/defrag.out" || fail "--defrag: the arena's report row is missing or differs"
timeout 300 "$baseline" "${run[@]}" >"$tmp/none.out" 2>&1
loss() { grep -o 'train loss [0-9.]*' "$1" | tail -1; }
echo "no arena: $(loss "$tmp/none.out") | --defrag: $(loss "$tmp/defrag.out")"
[ -n "$(loss "$tmp/none.out")" ] && [ "$(loss "$tmp/none.out")" == "$(loss "$tmp/defrag.out")" ] ||
  fail "--defrag changed the loss"

# 3. Fragmentation at peak, measured: --defrag's above first fit's in an arena first fit fits.
timeout 300 "$baseline" "${run[@]}" --quiet --arena_bytes $((72 << 20)) >"$tmp/plain72.out" 2>&1 ||
  fail "first fit, 72 MiB: did not train"
grep '^arena' "$tmp/plain72.out"
ratio() { grep -o 'largest / total free [0-9.]*' "$1" | awk '{print $NF}'; }
python3 -c "import sys; p, d = map(float, sys.argv[1:]); sys.exit(0 if d > p and d >= 0.9 else 1)" \
  "$(ratio "$tmp/plain72.out")" "$(ratio "$tmp/defrag.out")" ||
  fail "fragmentation at peak: first fit $(ratio "$tmp/plain72.out"), --defrag $(ratio "$tmp/defrag.out")"

# 4. Two pipeline ranks, 7 MiB each: rank 0 (embedding and more activations) runs out; every
# rank ends, with a non-zero status, well before the timeout.
timeout 120 "$pipeline" --world_size 2 --steps 2 --eval_every 0 --quiet --arena_bytes $((7 << 20)) \
  >"$tmp/pp.out" 2>"$tmp/pp.err"
rc=$?
echo "1f1b, 2 ranks, 7 MiB: exit $rc: $(grep '^error: ' "$tmp/pp.err" | head -2)"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "1f1b: exit status $rc (expected an error, not 0 or a hang)"
grep -q '^error: rank [0-9]: out of memory in the arena: ' "$tmp/pp.err" || fail "1f1b: no out-of-memory line"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
