#!/bin/bash
# Removes the namespaces made by deploy/netns-setup.sh (the veth pair goes with them).
NS_A=${TPSERVE_NS_A:-tpserve-a}
NS_B=${TPSERVE_NS_B:-tpserve-b}
for ns in "$NS_A" "$NS_B"; do
  # Processes left in a namespace would keep it alive: end them first.
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
done
