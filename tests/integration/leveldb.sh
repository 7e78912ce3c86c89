#!/bin/bash
# LevelDB (Debian's libleveldb, unmodified) on zonefuse through zf-leveldb:
# fill, overwrite (async, multi-threaded, and a synchronous burst), random
# reads (including keys that were never written), a short TPCx-IoT-like
# ingest, then unmount + fsck + remount and `verify`: every key must be there
# with exactly its latest value (values are a pure function of key and
# version; the expected version of each key is in zf-leveldb's state file,
# which lives in the DB directory on the mount too), and the DB must reopen
# with paranoid checks.  Small write buffer and table files, so LevelDB
# flushes, compacts and deletes files many times.
# Env: ZF_LEVELDB_NUM (keys, default 100000), ZF_LEVELDB_VALUE (default 400).
# shellcheck disable=SC2119  # zf_setup/zf_mount take optional args
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_bin "$ZF_LEVELDB"
num=${ZF_LEVELDB_NUM:-100000}
vsize=${ZF_LEVELDB_VALUE:-400}

zf_setup
zf_mount
db=$ZF_MNT/leveldb
ldb() {
	local cmd=$1
	shift
	"$ZF_LEVELDB" "$cmd" --db "$db" --write-buffer-size 1M --max-file-size 1M \
		--value-size "$vsize" "$@" || zf_fail "zf-leveldb $cmd $* failed"
}

zf_log "fill $num keys, overwrite, read"
ldb fill --num "$num"
ldb overwrite --num "$num" --threads 2 --batch 8
ldb overwrite --num 2000 --sync
ldb read --num "$((num / 2))" --keys "$((num + num / 5))" --threads 2
ldb iot --num 20000 --threads 2 --sensors-per-thread 10 --value-size 1024
ldb verify
ls "$db" >/dev/null
if stats=$(zf_stats); then
	zf_log "stats: $(tr '\n' ' ' <<<"$stats")"
fi
zf_check_log

zf_log "unmount, fsck, remount"
zf_umount
zf_fsck
zf_mount
ldb verify
ldb read --num "$((num / 4))"
# reopening wrote a new log/manifest; one more write + verify cycle
ldb overwrite --num "$((num / 4))"
ldb verify
zf_umount
zf_pass "LevelDB fill/overwrite/read/iot, remount, verify: $num keys exact"
