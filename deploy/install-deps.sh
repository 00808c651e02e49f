#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run tpserve. Idempotent: it
# installs only packages that are missing, so a second run costs a few dpkg queries.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git python3 python3-pip unzip
  clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin
  libzmq3-dev cppzmq-dev
  capnproto libcapnp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 procps tcpdump
  libboost-dev nlohmann-json3-dev libssl-dev libcli11-dev   # HTTP (Beast), JSON, SHA-256 (libcrypto), flags (CLI11)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi

# The metrics test (tests/python/test_metrics.py) scrapes a real coordinator with a Prometheus server and
# lints the exposition with promtool; the coordinator serves --metrics-port with Boost.Beast.
metrics_packages=(prometheus libboost-dev)
metrics_missing=()
for p in "${metrics_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || metrics_missing+=("$p")
done
if ((${#metrics_missing[@]})); then
  echo "install-deps: installing ${metrics_missing[*]}"
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  ${sudo_cmd:-} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${sudo_cmd:-} apt-get install -y -qq --no-install-recommends "${metrics_missing[@]}"
fi
