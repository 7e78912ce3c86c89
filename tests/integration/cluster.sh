#!/bin/bash
# GlusterFS and etcd on three zonefuse nodes (scripts/cluster.sh --faults
# --quick): a replica-3 volume with one brick per node and a 3-member etcd
# cluster, all on loopback; while a client writes fsync'ed files and puts,
# one node's daemon is killed with SIGKILL, then (second round) killed and
# its emulated device power-cut.  After the remount, the brick and member
# restart: heal info drains to 0, every acknowledged file has its checksum
# on the three bricks and through the client, every acknowledged put reads
# back linearizably through each member, the two members left kept a
# leader, and no daemon logged an error.  About 90 s.
# Skips (77) without root, /dev/fuse, glusterfs-server, glusterfs-client,
# etcd-server or etcd-client.
set -euo pipefail
src=${ZF_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export ZF_BUILD_DIR=${ZF_BUILD_DIR:-$src/build}
exec "$src/scripts/cluster.sh" --faults --quick
