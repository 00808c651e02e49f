#!/bin/bash
# Two "hosts" on one machine for multi-node tests: network namespaces tpserve-a and tpserve-b joined
# by a veth pair on the private test subnet 10.77.0.0/24 (the addresses exist only inside the
# namespaces; the machine's own network is untouched). Needs root and iproute2.
#   deploy/netns-setup.sh      # create (idempotent: recreates)
#   deploy/netns-teardown.sh   # remove
set -euo pipefail
NS_A=${TPSERVE_NS_A:-tpserve-a}
NS_B=${TPSERVE_NS_B:-tpserve-b}
ADDR_A=${TPSERVE_ADDR_A:-10.77.0.1}
ADDR_B=${TPSERVE_ADDR_B:-10.77.0.2}

"$(dirname "$0")/netns-teardown.sh" >/dev/null 2>&1 || true
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add tpserve-va netns "$NS_A" type veth peer name tpserve-vb netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/24" dev tpserve-va
ip -n "$NS_B" addr add "$ADDR_B/24" dev tpserve-vb
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set tpserve-va up
ip -n "$NS_B" link set tpserve-vb up
# Both directions reachable before anyone relies on it (ping may not be installed: use bash's /dev/tcp
# against a closed port, which fails fast with "connection refused" only when the peer answers).
for pair in "$NS_A $ADDR_B" "$NS_B $ADDR_A"; do
  set -- $pair
  out=$(ip netns exec "$1" timeout 5 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1 || true)
  case "$out" in
    *refused*) ;;
    *) echo "netns-setup: $1 cannot reach $2 ($out)" >&2; exit 1 ;;
  esac
done
echo "namespaces $NS_A ($ADDR_A) and $NS_B ($ADDR_B) are up"
