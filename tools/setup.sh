#!/usr/bin/env bash
# Installs what meshgate needs to build, run and test: Debian 12 packages only.
# Idempotent: apt runs only when a package is missing. Run as root (or with sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential g++ cmake ninja-build pkg-config clang llvm
  # libFuzzer and the sanitizer runtimes (only a Recommends of clang, which apt skips here)
  libclang-rt-dev
  # dataplane
  dpdk dpdk-dev libdpdk-dev libpcap-dev libhyperscan-dev
  # control plane and protocols
  libssl-dev libtomlplusplus-dev libnghttp2-dev libgrpc++-dev libprotobuf-dev
  protobuf-compiler protobuf-compiler-grpc libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev tshark iproute2 ethtool
  python3 curl openssl nghttp2-client nginx-light iputils-ping procps
  # proxy-mode benchmark baseline (tools/bench/proxy.sh): the kernel-socket proxy
  haproxy
  # HBONE interop peers: nghttpx (terminator for our originator), python h2 (client for our
  # terminator)
  nghttp2-proxy python3-h2
  # [bgp]: the BGP daemon meshgate runs (and the router of the fleet test)
  bird2
  # sd_notify for the systemd unit; the Debian package (cpack's DEB generator runs
  # dpkg-shlibdeps) and its test (systemd-analyze verify of the unit)
  libsystemd-dev dpkg-dev systemd
  # the package test's checks of the logrotate file and the man pages
  logrotate man-db
  # promtool: e2e_dashboard checks /metrics with `promtool check metrics`
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
