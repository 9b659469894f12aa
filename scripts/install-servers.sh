#!/usr/bin/env bash
# Install what the real-store integration tests need, if missing: Debian's redis-server,
# postgresql, etcd-server, zookeeper, prometheus, openssh-server and nftables, Toxiproxy, MinIO and mc built from the Go module proxy into
# .replicalab/bin, and Apache Cassandra's jars copied from Maven Central by Debian's Maven
# into .replicalab/cassandra/VERSION/lib. Safe to rerun. Services the packages may start are not used: replicalab
# starts its own server processes on 127.0.0.1 ports of its choosing.
set -euo pipefail
cd "$(dirname "$0")/.."

# MinIO (AGPL-3.0, run only as a separate server process) and its client mc, for the s3://
# adapter's tests and `cluster up minio`: built from the Go module proxy at the commits pinned
# here (MinIO tags releases with no Go version; mc's is the one MinIO's go.mod requires).
# MinIO took 6 min 40 s of CPU (28 min beside other builds on this 2-core machine), mc 1 min
# more; `scripts/install-servers.sh minio` builds only these
# (make test starts it in the background while the other tests run, see tests/minio_build.py;
# REPLICALAB_MINIO_LATER=1 leaves it out of the main install and orders its tests last).
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MC_VERSION=v0.0.0-20250313080218-cf909e1063a9
# A build is kept per user by version (~/.cache/replicalab/go-bin), so a fresh clone on the
# same machine (CI's) copies it instead of building again.
GO_BIN_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/replicalab/go-bin"
# install_go_tool NAME PACKAGE VERSION: .replicalab/bin/NAME, copied from the per-user
# cache, where `go install PACKAGE@VERSION` puts it first if it is not there yet
install_go_tool() {
  local name=$1 package=$2 version=$3 cached part
  [ -x ".replicalab/bin/$name" ] && return 0
  cached="$GO_BIN_CACHE/$name-$version"
  if [ ! -x "$cached" ]; then
    command -v go >/dev/null 2>&1 || { echo "error: Go is needed to build $name" >&2; exit 2; }
    echo "building $name $version from the Go module proxy..."
    mkdir -p "$GO_BIN_CACHE"
    part=$(mktemp -d "$GO_BIN_CACHE/.$name.XXXXXX")
    CGO_ENABLED=0 GOBIN="$part" \
      go install -p "${REPLICALAB_GO_JOBS:-$(nproc)}" "$package@$version"
    mv "$part/$(basename "$package")" "$cached" && rm -rf "$part"
  fi
  mkdir -p .replicalab/bin
  cp "$cached" ".replicalab/bin/.$name.part" && mv ".replicalab/bin/.$name.part" ".replicalab/bin/$name"
}
build_minio() {
  install_go_tool minio github.com/minio/minio "$MINIO_VERSION"
  install_go_tool mc github.com/minio/mc "$MC_VERSION"
}
if [ "${1:-}" = minio ]; then build_minio; exit 0; fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# a self-signed certificate for the TLS test of the redis adapter (rediss://)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server etcd-client)
[ -e /usr/share/zookeeper/bin/zkServer.sh ] || missing+=(zookeeper)
# the power-loss file system (faults/powerfs.py): libfuse 3 and fusermount3
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# a real Prometheus server for the watch --metrics-port integration test (it scrapes /metrics)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# emulated hosts (hosts/, issue 37): an OpenSSH server per network namespace, and the
# nftables rules of partitions on hosts
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# a slow link on emulated hosts: the host sets its Toxiproxy's latency with curl
command -v curl >/dev/null 2>&1 || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)..."
  $SUDO apt-get update -qq
  # policy-rc.d keeps the packages from starting their own services during install
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  $SUDO rm -f /usr/sbin/policy-rc.d
fi

# Toxiproxy and Cassandra's jars are kept per user by version too (beside MinIO's build), so
# a fresh clone copies them instead of linking Toxiproxy again and starting Maven.
TOXIPROXY_VERSION=v2.5.0
install_go_tool toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server "$TOXIPROXY_VERSION"

# Cassandra: cassandra-all and its ~100 runtime dependency jars, from Maven Central.
CASSANDRA_VERSION=5.0.6
CASSANDRA_LIB=.replicalab/cassandra/$CASSANDRA_VERSION/lib
if [ ! -e "$CASSANDRA_LIB/cassandra-all-$CASSANDRA_VERSION.jar" ]; then
  kept="${XDG_CACHE_HOME:-$HOME/.cache}/replicalab/cassandra/$CASSANDRA_VERSION/lib"
  if [ ! -e "$kept/cassandra-all-$CASSANDRA_VERSION.jar" ]; then
    echo "copying Cassandra $CASSANDRA_VERSION jars from Maven Central (Maven)..."
    rm -rf "$kept.part" && mkdir -p "$(dirname "$kept")"
    mvn -q -B -Dstyle.color=never -f scripts/cassandra/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$kept.part" >/dev/null
    mv "$kept.part" "$kept"
  fi
  rm -rf "$CASSANDRA_LIB.part" && mkdir -p "$(dirname "$CASSANDRA_LIB")"
  cp -r "$kept" "$CASSANDRA_LIB.part" && mv "$CASSANDRA_LIB.part" "$CASSANDRA_LIB"
fi

# MinIO last (the longest build); make test builds it in the background instead, unless a
# build of these versions is kept already: then copying it takes a second
if [ "${REPLICALAB_MINIO_LATER:-}" != 1 ]; then
  build_minio
elif [ -x "$GO_BIN_CACHE/minio-$MINIO_VERSION" ] && [ -x "$GO_BIN_CACHE/mc-$MC_VERSION" ]; then
  build_minio
fi
