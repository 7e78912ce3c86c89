/* libFuzzer target: the metadata log's on-disk parsing (superblock in the
 * zone headers, chains, records, epochs) on a mutated device image.
 *   mlog_probe; mlog_open read-only (replaying every record into a hash);
 *   mlog_open read-write, then a snapshot, an append and a commit; and
 *   then the log it wrote must open again with exactly what was written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "mlog/mlog.h"
#include "tests/fuzz/fuzz_common.h"

struct acc { uint64_t n, h; };

static int cb(void *arg, uint16_t type, const void *payload, uint32_t len, uint64_t lsn)
{
	struct acc *a = arg;
	a->n++;
	a->h = a->h * 31 + zf_crc32c(type, payload, len) + lsn;
	return 0;
}

static int emit(void *arg, struct mlog *m)
{
	(void)arg;
	static const char rec[] = "snapshot record";
	for (int i = 0; i < 3; i++)
		if (mlog_append(m, MLOG_REC_USER + 1, rec, sizeof(rec)) < 0)
			return -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zdev *dev = fz_device();
	struct mlog_sb sb;
	struct mlog *m;
	struct acc a = { 0 };

	fz_load(dev, data, size);
	mlog_probe(dev, &sb);
	if (mlog_open(dev, MLOG_OPEN_READ_ONLY, cb, &a, &sb, &m) == 0) {
		struct mlog_open_info info;
		struct mlog_stats st;
		mlog_get_open_info(m, &info);
		mlog_get_stats(m, &st);
		mlog_should_snapshot(m);
		mlog_pending_bytes(m);
		if (mlog_append(m, MLOG_REC_USER, "x", 1) != -EROFS)
			abort();	/* read-only must refuse appends */
		mlog_commit(m);
		mlog_close(m);
	}
	memset(&a, 0, sizeof(a));
	if (mlog_open(dev, 0, cb, &a, &sb, &m) != 0)
		return 0;
	int ret = mlog_snapshot(m, emit, NULL);
	if (ret == 0) {
		static const char more[] = "appended after the snapshot";
		ret = mlog_append(m, MLOG_REC_USER + 2, more, sizeof(more));
		if (ret == 0)
			ret = mlog_commit(m);
	}
	mlog_close(m);
	if (ret == 0) {
		/* what was committed opens again: 3 snapshot records + 1 */
		memset(&a, 0, sizeof(a));
		if (mlog_open(dev, MLOG_OPEN_READ_ONLY, cb, &a, &sb, &m) != 0) {
			fprintf(stderr, "fuzz_mlog: the log written after recovery does not open\n");
			abort();
		}
		mlog_close(m);
		if (a.n != 4) {
			fprintf(stderr, "fuzz_mlog: %llu records replayed after the new epoch, wrote 4\n",
				(unsigned long long)a.n);
			abort();
		}
	}
	return 0;
}
