#!/bin/bash
# RocksDB (Debian's unmodified db_bench 7.8) on zonefuse.
#
# 1. DB "bench": fillrandom,waitforcompaction,overwrite,readrandom with a
#    1 MiB write buffer / target file size / 4 MiB level base, so RocksDB
#    flushes and compacts many times (the test asserts it did, from the
#    DB's LOG), creating and deleting hundreds of files.  db_bench must exit 0.
# 2. DB "seq": fillseq of M keys, so the exact key count is known.
# 3. Before unmounting, record for "bench" the key count (readseq) and a
#    digest of its whole contents (`ldb scan --hex | md5sum`).
# 4. Unmount, fsck (if built), remount.  Then what proves the data survived:
#    - verifychecksum (every block of every SST file against its CRC) and
#      verifyfilechecksums (every whole SST file against the CRC32C recorded
#      in the MANIFEST when it was written, --file_checksum=1) exit 0;
#    - "bench": the readseq count, the full-content digest and the found
#      count of the same seeded readrandom equal the values from before;
#    - "seq": readseq counts exactly M keys (readseq alone would stop
#      silently at a corrupt block, hence the checksum runs first).
# 5. The reopened DB takes writes again: overwrite + verifychecksum, unmount.
# Env: ZF_ROCKSDB_NUM (default 150000), ZF_ROCKSDB_SEQ (default 50000).
# shellcheck disable=SC2119  # zf_setup/zf_mount take optional args
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog db_bench rocksdb-tools
zf_require_prog ldb rocksdb-tools
num=${ZF_ROCKSDB_NUM:-150000}
seqnum=${ZF_ROCKSDB_SEQ:-50000}

zf_setup --zone-size 16M --zones 128
zf_mount
bench=$ZF_MNT/rocksdb-bench
seqdb=$ZF_MNT/rocksdb-seq
common=(--compression_type=none --value_size=400 --write_buffer_size=1048576
	--target_file_size_base=1048576 --max_bytes_for_level_base=4194304
	--file_checksum=1 --seed=42 --threads=1 --histogram=0)

# dbb NAME DB ARGS...: runs db_bench, fails the test on a non-zero exit or an
# error message, prints the result lines; the full output is in
# $ZF_WORK/db_bench-NAME.out.
dbb() {
	local name=$1 db=$2 out=$ZF_WORK/db_bench-$1.out
	shift 2
	zf_log "db_bench $name: $*"
	local st=0
	db_bench --db="$db" "${common[@]}" "$@" >"$out" 2>&1 || st=$?
	tr '\r' '\n' <"$out" | grep -v '^\.\.\. finished' | grep -v '^ *$' >"$out.clean" || true
	if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error|failed|[Ee]rror:' "$out.clean"; then
		tail -n 15 "$out.clean" >&2
		zf_fail "db_bench $name exited $st"
	fi
	grep -E '^[a-z0-9]+ +:' "$out.clean" | sed 's/^/    /'
}
# result lines of the last dbb NAME
ops() { grep -E "^$2 +:" "$ZF_WORK/db_bench-$1.out.clean" | head -n 1; }
readseq_count() { ops "$1" readseq | sed -nE 's/.* ([0-9]+) operations;.*/\1/p'; }
found_count() { ops "$1" readrandom | sed -nE 's/.*\(([0-9]+) of [0-9]+ found\).*/\1/p'; }
digest() {
	local d
	d=$(ldb --db="$1" scan --hex 2>"$ZF_WORK/ldb.err" | md5sum | cut -d' ' -f1)
	if [ -s "$ZF_WORK/ldb.err" ]; then
		cat "$ZF_WORK/ldb.err" >&2
		zf_fail "ldb scan $1 reported errors"
	fi
	echo "$d"
}

dbb fill "$bench" --benchmarks=fillrandom,waitforcompaction,overwrite,readrandom --num="$num"
compactions=$(grep -c '"event": "compaction_finished"' "$bench/LOG" || true)
flushes=$(grep -c '"event": "flush_finished"' "$bench/LOG" || true)
zf_log "RocksDB ran $flushes flushes and $compactions compactions; $(find "$bench" -name '*.sst' | wc -l) live SST files"
[ "$compactions" -ge 10 ] || zf_fail "expected many compactions, LOG shows $compactions"
dbb seqfill "$seqdb" --benchmarks=fillseq --num="$seqnum"

# readseq's op count is the number of keys; readrandom's seeds depend on the
# benchmark's position in the list, so both runs use the same list.
dbb count "$bench" --use_existing_db=1 --benchmarks=readseq,readrandom --num="$num"
keys_before=$(readseq_count count)
found_before=$(found_count count)
digest_before=$(digest "$bench")
zf_log "bench DB: $keys_before keys, content digest $digest_before"
[ "$keys_before" -gt 0 ] || zf_fail "readseq found no keys"
if stats=$(zf_stats); then zf_log "stats: $(tr '\n' ' ' <<<"$stats")"; fi
zf_check_log

zf_log "unmount, fsck, remount"
zf_umount
zf_fsck
zf_mount

dbb verify "$bench" --use_existing_db=1 --benchmarks=verifychecksum,verifyfilechecksums \
	--num="$num"
dbb recount "$bench" --use_existing_db=1 --benchmarks=readseq,readrandom --num="$num"
keys_after=$(readseq_count recount)
found_after=$(found_count recount)
digest_after=$(digest "$bench")
zf_log "after remount: $keys_after keys (before $keys_before), readrandom found $found_after (before $found_before), digest $digest_after"
[ "$keys_after" = "$keys_before" ] || zf_fail "key count changed across remount: $keys_before -> $keys_after"
[ "$found_after" = "$found_before" ] || zf_fail "readrandom found $found_after keys, $found_before before the remount"
[ "$digest_after" = "$digest_before" ] || zf_fail "DB contents changed across remount (digest $digest_before -> $digest_after)"

dbb seqcheck "$seqdb" --use_existing_db=1 \
	--benchmarks=verifychecksum,verifyfilechecksums,readseq --num="$((seqnum + 1000))"
seqkeys=$(readseq_count seqcheck)
[ "$seqkeys" = "$seqnum" ] || zf_fail "fillseq DB has $seqkeys keys after remount, wrote $seqnum"

dbb rewrite "$bench" --use_existing_db=1 --benchmarks=overwrite,waitforcompaction,verifychecksum \
	--num="$((num / 4))"
zf_umount
zf_pass "db_bench fillrandom/overwrite/readrandom ($num ops, $compactions compactions) and fillseq ($seqnum keys) intact after remount"
