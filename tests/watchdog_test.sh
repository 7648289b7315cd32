#!/usr/bin/env bash
# The watchdog (common/comm/watchdog.h) on real training runs: one rank of a job stops
# (LLMP_TEST_STALL makes it SIGSTOP itself at its first wait on the named operation) and the job
# must end within 30 s, with exit status 124 and exactly one line
#   error: rank 0: timed out after 3 s in recv_backward from rank 1 (pipeline group); ...
# through the receive path (a pipeline) and the collective path (DDP's all_reduce). Then the
# process manager (hydra's proxy) is killed under a running job: its ranks must not go on
# training headless. Every run is killed after 60 s (SIGKILL, status 137), so a watchdog that
# never fires fails here instead of hanging the suite.
# Usage: watchdog_test.sh path/to/gpipe/train path/to/ddp/train
set -u
gpipe=$1
ddp=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
run=(--model tiny --steps 100000 --eval_every 0 --quiet --timeout 3)

fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# stalled NAME STALL EXPECTED_LINE_START -- COMMAND...
stalled() {
  local name=$1 stall=$2 want=$3
  shift 4
  local t0=$SECONDS rc lines
  LLMP_TEST_STALL=$stall timeout -s KILL 60 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  local took=$((SECONDS - t0))
  lines=$(grep -c '^error: ' "$tmp/err")
  if [ "$rc" -ne 124 ]; then
    fail "$name: exit status $rc after $took s, expected 124 (137: killed, the job hung)"; cat "$tmp/err"
  elif [ "$took" -ge 30 ]; then
    fail "$name: took $took s, expected < 30 s with --timeout 3"
  elif [ "$lines" -ne 1 ]; then
    fail "$name: expected one 'error:' line, got $lines:"; cat "$tmp/err"
  elif ! grep -q "^error: $want" "$tmp/err"; then
    fail "$name: the line does not start with 'error: $want':"; cat "$tmp/err"
  else
    echo "ok   $name (exit $rc after $took s): $(grep '^error: ' "$tmp/err")"
  fi
}

# GPipe on 2 ranks: rank 1 stops before its first recv_forward, so rank 0 (all forwards sent)
# waits in recv_backward: the receive path.
stalled pipeline_receive 1:recv_forward \
  "rank 0: timed out after 3 s in recv_backward from rank 1 (pipeline group); a rank stopped or hung" \
  -- "$gpipe" "${run[@]}" --world_size 2 --global_batch 8
# DDP on 4 ranks: rank 1 stops in its first all_reduce; ranks 0, 2, 3 wait in theirs, and the
# lowest (its deadline comes first) speaks for the job.
stalled collective 1:all_reduce \
  "rank 0: timed out after 3 s in all_reduce over the data-parallel group (world ranks 0,1,2,3)" \
  -- "$ddp" "${run[@]}" --world_size 4 --global_batch 8

# headless NAME WHICH: SIGKILL to the job's mpiexec or to hydra's proxy (its child, the ranks'
# parent) under a running 2-rank DDP job; the ranks must stop within 30 s, not train on headless.
headless() {
  local name=$1 which=$2 job proxy="" ranks="" victim left
  "$ddp" "${run[@]}" --world_size 2 --global_batch 8 >"$tmp/out" 2>"$tmp/err" &
  job=$!  # launch_or_init exec()s mpiexec in this process
  for _ in $(seq 300); do
    proxy=$(pgrep -P "$job" | head -1)
    [ -n "$proxy" ] && ranks=$(pgrep -P "$proxy" | tr '\n' ' ')
    [ "$(echo $ranks | wc -w)" -eq 2 ] && break
    sleep 0.1
  done
  if [ "$(echo $ranks | wc -w)" -ne 2 ]; then
    fail "$name: could not find the job's proxy and its 2 ranks (proxy '$proxy', ranks '$ranks')"
  else
    sleep 1  # training
    victim=$([ "$which" = proxy ] && echo "$proxy" || echo "$job")
    kill -KILL "$victim"
    for _ in $(seq 300); do
      left=""
      for r in $ranks; do kill -0 "$r" 2>/dev/null && left+="$r "; done
      [ -z "$left" ] && break
      sleep 0.1
    done
    if [ -n "$left" ]; then
      fail "$name: ranks $left still running 30 s after $which (pid $victim) was killed"
      kill -KILL $left 2>/dev/null
    else
      echo "ok   $name: ranks $ranks stopped after $which (pid $victim) was killed"
    fi
  fi
  kill -KILL "$job" "$proxy" 2>/dev/null
  wait "$job" 2>/dev/null
}
# The proxy: the ranks are re-parented, and only the watchdog's getppid() check stops them.
headless headless_proxy_killed proxy
# mpiexec: hydra's proxy sees its control socket close and kills the ranks itself.
headless headless_mpiexec_killed mpiexec

echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
