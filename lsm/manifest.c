/* manifest — the RocksDB/LevelDB MANIFEST parser: log records (blocks,
 * fragments, masked CRC32C) and the VersionEdits they carry, reported as
 * (level, file number) entries (format and contract in lifetime.h).
 * Pure: no state between calls except the offset the caller passes back. */
#include "lsm/lifetime.h"

#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

#define MF_BLOCK 32768u
#define MF_HEADER 7u
enum { MF_FULL = 1, MF_FIRST = 2, MF_MIDDLE = 3, MF_LAST = 4 };

struct mf_rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t mf_varint(struct mf_rd *r)
{
	uint64_t v = 0;

	for (int shift = 0; shift <= 63; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t b = *r->p++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static void mf_skip(struct mf_rd *r, uint64_t n)
{
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		return;
	}
	r->p += n;
}

static void mf_skip_lp(struct mf_rd *r)
{
	uint64_t n = mf_varint(r);

	mf_skip(r, n);
}

#define MF_SAFE_IGNORE (1u << 13)	/* RocksDB: tag followed by an lp blob */
#define MF_FILE_MASK 0x3FFFFFFFFFFFFFFFull	/* RocksDB packs a path id above */

/* One VersionEdit (RocksDB or LevelDB encoding). */
static void mf_edit(const uint8_t *p, size_t len, lifetime_manifest_fn fn, void *arg)
{
	struct mf_rd r = { p, p + len, false };

	while (!r.bad && r.p < r.end) {
		uint32_t tag = (uint32_t)mf_varint(&r);
		uint64_t level, num;

		switch (tag) {
		case 1:		/* comparator */
			mf_skip_lp(&r);
			break;
		case 2: case 3: case 4: case 9: case 10:	/* log/next/seq numbers */
			mf_varint(&r);
			break;
		case 5:		/* compact pointer / cursor: level, key */
			mf_varint(&r);
			mf_skip_lp(&r);
			break;
		case 6:		/* deleted file */
			level = mf_varint(&r);
			num = mf_varint(&r);
			if (!r.bad)
				fn(arg, LIFETIME_MF_DELETED, (int)level, num);
			break;
		case 7:		/* LevelDB new file */
		case 100:	/* RocksDB kNewFile2 */
		case 102:	/* kNewFile3 */
		case 103:	/* kNewFile4 */
			level = mf_varint(&r);
			num = mf_varint(&r) & MF_FILE_MASK;
			if (tag == 102)
				mf_varint(&r);	/* path id */
			mf_varint(&r);		/* size */
			mf_skip_lp(&r);		/* smallest key */
			mf_skip_lp(&r);		/* largest key */
			if (tag != 7) {
				mf_varint(&r);	/* smallest seqno */
				mf_varint(&r);	/* largest seqno */
			}
			if (tag == 103) {
				for (;;) {	/* custom fields until kTerminate */
					uint32_t ct = (uint32_t)mf_varint(&r);

					if (r.bad || ct == 1)
						break;
					mf_skip_lp(&r);
				}
			}
			if (!r.bad)
				fn(arg, LIFETIME_MF_NEW, (int)level, num);
			break;
		case 200: case 203: case 300:	/* column family, max cf, atomic group */
			mf_varint(&r);
			break;
		case 201:	/* column family add */
			mf_skip_lp(&r);
			break;
		case 202:	/* column family drop */
			break;
		default:
			if (tag & MF_SAFE_IGNORE)
				mf_skip_lp(&r);
			else
				return;	/* unknown: the rest of this edit is lost */
		}
	}
}

uint64_t lifetime_manifest_parse(const uint8_t *buf, size_t len, uint64_t base,
				 lifetime_manifest_fn fn, void *arg)
{
	uint64_t pos = base, done = base;
	uint8_t *rec = NULL;	/* a logical record being put together */
	size_t rlen = 0, rcap = 0;
	bool in_rec = false;

	while (pos < base + len) {
		uint64_t left_in_block = MF_BLOCK - pos % MF_BLOCK;
		const uint8_t *h = buf + (pos - base);
		uint32_t crc, n;
		uint8_t type;

		if (left_in_block < MF_HEADER) {	/* trailer padding */
			pos += left_in_block;
			if (!in_rec)
				done = pos;
			continue;
		}
		if (base + len - pos < MF_HEADER)
			break;
		crc = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
		      (uint32_t)h[3] << 24;
		n = (uint32_t)h[4] | (uint32_t)h[5] << 8;
		type = h[6];
		if (type == 0 || type > MF_LAST || n > left_in_block - MF_HEADER)
			break;		/* zeros (not written yet) or garbage */
		if (base + len - pos < MF_HEADER + n)
			break;		/* the record is not all here yet */
		/* stored CRC is masked: rot15 + constant, over type + payload */
		uint32_t want = zf_crc32c(0, h + 6, 1 + (size_t)n);

		want = ((want >> 15) | (want << 17)) + 0xa282ead8u;
		if (want != crc)
			break;
		pos += MF_HEADER + n;
		if (type == MF_FULL || type == MF_FIRST) {
			rlen = 0;
			in_rec = type == MF_FIRST;
		} else if (!in_rec) {
			done = pos;	/* a MIDDLE/LAST without its FIRST: skip */
			continue;
		}
		if (rlen + n > rcap) {
			size_t ncap = (rlen + n) * 2;
			uint8_t *nr = realloc(rec, ncap);

			if (!nr)
				break;
			rec = nr;
			rcap = ncap;
		}
		memcpy(rec + rlen, h + MF_HEADER, n);
		rlen += n;
		if (type == MF_FULL || type == MF_LAST) {
			mf_edit(rec, rlen, fn, arg);
			in_rec = false;
			done = pos;
		}
	}
	free(rec);
	return done;
}

uint64_t lifetime_table_number(const char *name)
{
	uint64_t v = 0;
	const char *p = name;

	if (!name || !lifetime_is_table(name))
		return 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return *p == '.' ? v : 0;
}
