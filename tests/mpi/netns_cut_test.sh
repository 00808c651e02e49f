#!/bin/bash
# A cut network link between the two "hosts" of a worker group (deploy/netns-*.sh: rank 0 in namespace
# A, rank 1 in B, joined by one veth pair) ends both ranks within seconds: each side's group heartbeat
# (worker/group_heartbeat.h, lost after 2 s) sees its peer silent, abandons its MPI waits and aborts
# (an MPI_Abort that cannot reach the other side ends by the 5 s alarm); a rank's Open MPI daemon,
# cut from mpirun, may end it first. Prints the detection and each rank's exit time. Exit 0 when the
# leader reported its follower lost within 3 s and both ranks were gone within 10 s, 1 otherwise, 77
# (skipped) without root or `ip netns`.
#   tests/mpi/netns_cut_test.sh TPSERVE_RUN MODEL
set -uo pipefail
deploy=$(cd "$(dirname "$0")/../../deploy" && pwd)
run=$1
model=$2
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null || ! command -v mpirun >/dev/null; then
  echo "netns-cut-test: needs root, iproute2 and mpirun; skipped"
  exit 77
fi
if [[ ! -f "$model" ]]; then
  echo "netns-cut-test: no model at $model; skipped"
  exit 77
fi
export TPSERVE_NS_A=tpca$$ TPSERVE_NS_B=tpcb$$
out=$(mktemp /tmp/netns-cut.XXXXXX)
err=$(mktemp /tmp/netns-cut-err.XXXXXX)
trap '"$deploy/netns-teardown.sh"; rm -f "$out" "$err"' EXIT
"$deploy/netns-setup.sh" >/dev/null || exit 77
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# A generation long enough to be cut in the middle; its text streams to $out.
"$deploy/netns-mpirun.sh" 2 "$run" --model "$model" --prompt "Tell me a long story about the sea" \
  --max-tokens 4000 --ignore-eos --threads 1 >"$out" 2>"$err" &
mpirun_pid=$!

# Wait (bounded) until text streams, then note each namespace's rank.
rank_in() { ip netns pids "$1" 2>/dev/null | while read -r pid; do
  [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" == tpserve-run ]] && echo "$pid"; done; }
for _ in $(seq 600); do
  [[ -s "$out" ]] && break
  if ! kill -0 "$mpirun_pid" 2>/dev/null; then echo "netns-cut-test: the group ended before the cut"; cat "$err"; exit 1; fi
  sleep 0.1
done
[[ -s "$out" ]] || { echo "netns-cut-test: no text within 60 s"; cat "$err"; exit 1; }
rank_a=$(rank_in "$TPSERVE_NS_A")
rank_b=$(rank_in "$TPSERVE_NS_B")
[[ -n "$rank_a" && -n "$rank_b" ]] || { echo "netns-cut-test: ranks not found"; exit 1; }

cut_ns=$(date +%s%N)
ip -n "$TPSERVE_NS_A" link set tpserve-va down
gone_a="" gone_b=""
for _ in $(seq 200); do  # up to 20 s, polling every 0.1 s
  now=$(( ($(date +%s%N) - cut_ns) / 1000000 ))
  [[ -z "$gone_a" ]] && ! kill -0 "$rank_a" 2>/dev/null && gone_a=$now
  [[ -z "$gone_b" ]] && ! kill -0 "$rank_b" 2>/dev/null && gone_b=$now
  [[ -n "$gone_a" && -n "$gone_b" ]] && break
  sleep 0.1
done
kill -9 "$mpirun_pid" 2>/dev/null
wait "$mpirun_pid" 2>/dev/null
echo "rank 0 (namespace A): exited ${gone_a:-never} ms after the cut"
echo "rank 1 (namespace B): exited ${gone_b:-never} ms after the cut"
grep -o "rank [0-9] silent for [0-9]* ms" "$err" | sort -u | sed 's/^/detected: /'
status=0
# The leader (rank 0, the one the coordinator hears from) must have seen its follower silent; the
# follower's side may be ended by its Open MPI daemon first, which loses mpirun over the same link.
ms=$(grep -o "rank 1 silent for [0-9]* ms" "$err" | head -1 | grep -o "[0-9]* ms" | cut -d' ' -f1)
if [[ -z "$ms" || "$ms" -gt 3000 ]]; then
  echo "netns-cut-test: rank 0 did not report rank 1 lost within 3 s"
  status=1
fi
for gone in "$gone_a" "$gone_b"; do
  if [[ -z "$gone" || "$gone" -gt 10000 ]]; then
    echo "netns-cut-test: a rank was still running 10 s after the cut"
    status=1
  fi
done
[[ $status == 0 ]] && echo "netns-cut-test: both ranks noticed the cut and exited"
exit $status
