#!/usr/bin/env bash
# Installs what bmpipe needs to build and test on Debian 12, as root. Safe to run again.
set -euo pipefail
packages=(g++ cmake make libboost-graph-dev libboost-program-options-dev libyaml-cpp-dev
          nlohmann-json3-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev librsvg2-bin libtbb-dev
          libopenmpi-dev openmpi-bin pybind11-dev python3-dev python3-pytest clang-14
          libclang-rt-14-dev chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing: ${missing[*]}" >&2
    echo "setup: installing them needs root: run with sudo (sudo bash $0), or install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
