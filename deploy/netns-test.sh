#!/bin/bash
# The two-namespace run gives the same ids as the one-host run: tpserve-run --tp 2 once with both
# ranks on this host, once with rank 0 in namespace A and rank 1 in namespace B (over the veth pair
# only). Exit 0 when the ids match, 1 when not, 77 (skipped) without root or `ip netns`.
#   deploy/netns-test.sh TPSERVE_RUN MODEL
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run=$1
model=$2
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null || ! command -v mpirun >/dev/null; then
  echo "netns-test: needs root, iproute2 and mpirun; skipped"
  exit 77
fi
if [[ ! -f "$model" ]]; then
  echo "netns-test: no model at $model; skipped"
  exit 77
fi
# Names of our own, so concurrent runs (release and sanitizer CI) do not collide.
export TPSERVE_NS_A=tpsa$$ TPSERVE_NS_B=tpsb$$
trap '"$here/netns-teardown.sh"' EXIT
"$here/netns-setup.sh" || exit 77

flags=(--model "$model" --prompt-ids 504,3060,282,4649,314,1345,30,1117,1826,4063,282 --max-tokens 32
       --ignore-eos --print-ids --threads 1 --tp 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
one_host=$("$run" "${flags[@]}" 2>/tmp/netns-test-one.$$.err) || { cat /tmp/netns-test-one.$$.err; exit 1; }
two_hosts=$("$here/netns-mpirun.sh" 2 "$run" "${flags[@]}" 2>/tmp/netns-test-two.$$.err) ||
  { cat /tmp/netns-test-two.$$.err; exit 1; }
rm -f /tmp/netns-test-one.$$.err /tmp/netns-test-two.$$.err
echo "one host:  $one_host"
echo "two hosts: $two_hosts"
if [[ -z "$one_host" || "$one_host" != "$two_hosts" ]]; then
  echo "netns-test: the ids differ"
  exit 1
fi
echo "netns-test: identical ids over $(wc -w <<<"$one_host") tokens"
