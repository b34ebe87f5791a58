#!/bin/sh
# Install what building and testing libmbuddy needs on Debian 12, if missing.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds the peer allocators
#        and what scripts/bench_programs.py runs and reads)
set -e
pkgs="build-essential autoconf automake libtool pkg-config libunwind-dev
      clang libclang-rt-14-dev python3 python3-matplotlib perl git sqlite3 g++
      groff-base man-db libpython3.11-testsuite strace php8.2-cli"
[ "$1" = "--bench" ] && pkgs="$pkgs libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 hyperfine time
      redis-server redis-tools linux-source-6.1 jq xz-utils googletest binutils libc6-dev"

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
