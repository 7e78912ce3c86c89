#!/bin/bash
# Install the Debian packages zonefuse needs (idempotent; apt-get update only
# when something is missing).  Usage: scripts/deps.sh [extra packages...]
set -euo pipefail
pkgs=(build-essential pkg-config meson ninja-build check libfuse3-dev fuse3
      libzbd-dev zbd-utils liburing-dev libleveldb-dev librocksdb-dev
      rocksdb-tools fio attr e2fsprogs util-linux python3 clang
      # the package test (dpkg-buildpackage, lintian) and the metrics test
      dpkg-dev debhelper devscripts lintian pkgconf man-db python3-prometheus-client
      # the xattr and ACL tests (setfacl/getfacl, setcap/getcap, rsync -aAX)
      acl libcap2-bin rsync
      "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "deps: need root to install packages" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
