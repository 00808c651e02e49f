#!/bin/bash
# Runs an MPI program with one rank per namespace "host" (deploy/netns-setup.sh must have run):
# mpirun starts on the leader's host (A), reaches the other's daemon through deploy/netns-rsh.sh,
# and Open MPI's TCP transport (both its out-of-band and its byte transfer layer) is restricted to the veth subnet.
# Keepalives on the out-of-band links (idle 1 s, then 2 probes 1 s apart) let mpirun notice a cut
# link within ~3 s and end the job, as deploy/multinode.md's line does.
#   deploy/netns-mpirun.sh NP PROGRAM [ARGS...]
# Ranks alternate between the hosts (--map-by node): rank 0 on A, rank 1 on B, ...; with
# TPSERVE_NETNS_LEADER=b, rank 0 (the leader) on B, rank 1 on A, ...: Open MPI puts rank 0 on the
# host mpirun runs on whatever the hostfile's order, so then mpirun runs on B (B listed first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NS_A=${TPSERVE_NS_A:-tpserve-a}
ADDR_A=${TPSERVE_ADDR_A:-10.77.0.1}
ADDR_B=${TPSERVE_ADDR_B:-10.77.0.2}
SUBNET=${TPSERVE_SUBNET:-10.77.0.0/24}
np=$1
shift
hostfile=$(mktemp /tmp/tpserve-hostfile.XXXXXX)
trap 'rm -f "$hostfile"' EXIT
if [[ ${TPSERVE_NETNS_LEADER:-a} == b ]]; then
  launch_ns=${TPSERVE_NS_B:-tpserve-b}
  printf '%s slots=4\n%s slots=4\n' "$ADDR_B" "$ADDR_A" >"$hostfile"
else
  launch_ns=$NS_A
  printf '%s slots=4\n%s slots=4\n' "$ADDR_A" "$ADDR_B" >"$hostfile"
fi
exports=(-x PATH)
for var in LD_LIBRARY_PATH TPSERVE_LOG OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
  if [[ -n "${!var:-}" ]]; then exports+=(-x "$var"); fi
done
ip netns exec "$launch_ns" mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --hostfile "$hostfile" --map-by node -np "$np" \
  --mca plm_rsh_agent "$here/netns-rsh.sh" \
  --mca btl self,tcp --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
  --mca mpi_yield_when_idle 1 \
  --mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 2 \
  "${exports[@]}" \
  "$@"
