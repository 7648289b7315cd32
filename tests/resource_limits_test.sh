#!/usr/bin/env bash
# Hostile sizes, data and rank counts against real train binaries: each case must end, within
# 120 s, with exit status 2 and exactly one line "error: ..." naming the value, before anything
# is allocated or read (common/train/resources.h, common/data/corpus.h): never std::bad_alloc, a
# std::length_error, an endless read of /dev/zero or a FIFO, or 4·cores+1 ranks thrashing.
# Usage: resource_limits_test.sh path/to/ddp/train path/to/gpipe/train
set -u
ddp=$1
gpipe=$2
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish
tmp=$expect_tmp
fast=(--steps 1 --eval_every 0 --quiet)

# expect, and exit status 2 exactly (user_error), not 1 or a signal.
expect2() {
  expect "$@" >"$tmp/verdict"
  cat "$tmp/verdict"
  if grep -q '^ok' "$tmp/verdict" && ! grep -q '^ok .*(exit 2)' "$tmp/verdict"; then
    echo "FAIL $1: exit status is not 2"; fails=$((fails + 1))
  fi
}

# Sizes: the per-rank estimate (model states, activations, batch) against MemAvailable / ranks.
expect2 huge_layers "--layers 1000000 --global_batch 16 --world_size 4: each rank needs at least" \
  -- "$ddp" "${fast[@]}" --layers 1000000
expect2 huge_global_batch "--global_batch 2147483644 --world_size 4: each rank needs at least" \
  -- "$ddp" "${fast[@]}" --global_batch 2147483644
# 1M sequences per rank: their tokens (512 MiB) fit, their activations (~2.4 TB) do not.
expect2 activations_too_big "--global_batch 4000000 --world_size 4: each rank needs at least" \
  -- "$ddp" "${fast[@]}" --global_batch 4000000
expect2 huge_layers_pipeline "--layers 1000000" \
  -- "$gpipe" "${fast[@]}" --layers 1000000 --world_size 2
# Inside the ranks (started by mpiexec directly, the launcher's checks skipped): the same check.
expect2 huge_layers_in_ranks "--layers 1000000 --global_batch 16 --world_size 2: each rank needs" \
  -- mpiexec -n 2 "$ddp" --world_size 2 "${fast[@]}" --layers 1000000
expect2 max_int_layers "--layers 2147483647" -- "$ddp" "${fast[@]}" --layers 2147483647

# --data: only regular files and folders of them.
mkfifo "$tmp/fifo"
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$tmp/sock" 2>/dev/null
expect2 data_char_device "--data /dev/zero: not a regular file or directory (a character device)" \
  -- "$ddp" "${fast[@]}" --data /dev/zero
expect2 data_fifo "--data $tmp/fifo: not a regular file or directory (a FIFO)" \
  -- "$ddp" "${fast[@]}" --data "$tmp/fifo"
if [ -S "$tmp/sock" ]; then
  expect data_socket "--data $tmp/sock: not a regular file or directory (a socket)" \
    -- "$ddp" "${fast[@]}" --data "$tmp/sock"
fi
ln -s /dev/zero "$tmp/zero_link"
expect2 data_link_to_device "not a regular file or directory (a character device)" \
  -- "$ddp" "${fast[@]}" --data "$tmp/zero_link"
# Inside the ranks (started by mpiexec directly, the launcher's checks skipped): Corpus::load.
expect2 data_char_device_in_ranks "corpus /dev/zero: not a regular file or directory" \
  -- mpiexec -n 2 "$ddp" --world_size 2 --model tiny "${fast[@]}" --data /dev/zero

# Ranks: more than 4 per core refused unless --oversubscribe.
cores=$(nproc)
n=$((4 * cores + 1))
expect2 oversubscribed "--world_size $n is more than 4 ranks per core" \
  -- "$ddp" "${fast[@]}" --world_size "$n" --global_batch "$n"
# With --oversubscribe the check passes and the next one (the checkpoint) speaks.
head -c 100 /dev/urandom >"$tmp/corrupt.safetensors"
expect2 oversubscribe_allows "$tmp/corrupt.safetensors" \
  -- "$ddp" "${fast[@]}" --world_size "$n" --global_batch "$n" --oversubscribe \
  --load "$tmp/corrupt.safetensors"
expect2 negative_timeout "timeout -1 s" -- "$ddp" "${fast[@]}" --timeout -1

finish
