#!/bin/bash
# Open MPI launch agent (--mca plm_rsh_agent) for the namespace "hosts" of deploy/netns-setup.sh:
# called like ssh, `netns-rsh.sh [ssh options] HOST COMMAND...`, it runs COMMAND (Open MPI's
# orted daemon) inside HOST's namespace instead of logging in somewhere.
NS_A=${TPSERVE_NS_A:-tpserve-a}
NS_B=${TPSERVE_NS_B:-tpserve-b}
ADDR_A=${TPSERVE_ADDR_A:-10.77.0.1}
ADDR_B=${TPSERVE_ADDR_B:-10.77.0.2}
while [[ "${1:-}" == -* ]]; do  # ssh-style options Open MPI may pass (-x, -o ..., -p ...)
  case "$1" in
    -o|-p|-l|-i) shift 2 ;;
    *) shift ;;
  esac
done
host=$1
shift
case "$host" in
  "$ADDR_A"|"$NS_A") ns=$NS_A ;;
  "$ADDR_B"|"$NS_B") ns=$NS_B ;;
  *) echo "netns-rsh.sh: unknown host $host" >&2; exit 255 ;;
esac
# Like ssh: the remaining words form one command line for a shell on the "remote" side.
exec ip netns exec "$ns" /bin/sh -c "$*"
