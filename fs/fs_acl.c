/* fs_acl — POSIX ACLs in xattr form (see fs_acl.h). */
#include "fs/fs_acl.h"

#include <errno.h>
#include <string.h>

enum {
	ACL_VERSION = 2,
	TAG_USER_OBJ = 0x01, TAG_USER = 0x02, TAG_GROUP_OBJ = 0x04,
	TAG_GROUP = 0x08, TAG_MASK = 0x10, TAG_OTHER = 0x20,
	HDR = 4, ENT = 8,
};

static uint32_t get_le(const uint8_t *p, int n)
{
	uint32_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static size_t nent(size_t size) { return (size - HDR) / ENT; }
static uint16_t tag_of(const uint8_t *b, size_t i) { return (uint16_t)get_le(b + HDR + i * ENT, 2); }
static uint16_t perm_of(const uint8_t *b, size_t i) { return (uint16_t)get_le(b + HDR + i * ENT + 2, 2); }

int fs_acl_check(const void *v, size_t size)
{
	const uint8_t *b = v;
	unsigned uo = 0, go = 0, oth = 0, mask = 0, named = 0;

	if (size < HDR + 3 * ENT || size > FS_ACL_MAX_SIZE || (size - HDR) % ENT ||
	    get_le(b, 4) != ACL_VERSION)
		return -EINVAL;
	for (size_t i = 0; i < nent(size); i++) {
		if (perm_of(b, i) & ~7u)
			return -EINVAL;
		switch (tag_of(b, i)) {
		case TAG_USER_OBJ: uo++; break;
		case TAG_GROUP_OBJ: go++; break;
		case TAG_OTHER: oth++; break;
		case TAG_MASK: mask++; break;
		case TAG_USER: case TAG_GROUP: named++; break;
		default: return -EINVAL;
		}
	}
	if (uo != 1 || go != 1 || oth != 1 || mask > 1 || (named && !mask))
		return -EINVAL;
	return 0;
}

bool fs_acl_is_minimal(const void *v, size_t size)
{
	(void)v;
	return nent(size) == 3;
}

/* The entry index of the group class: MASK if any, else GROUP_OBJ. */
static size_t group_class(const uint8_t *b, size_t size)
{
	size_t go = 0;
	for (size_t i = 0; i < nent(size); i++) {
		if (tag_of(b, i) == TAG_MASK)
			return i;
		if (tag_of(b, i) == TAG_GROUP_OBJ)
			go = i;
	}
	return go;
}

uint32_t fs_acl_perm_bits(const void *v, size_t size)
{
	const uint8_t *b = v;
	uint32_t m = (uint32_t)perm_of(b, group_class(b, size)) << 3;

	for (size_t i = 0; i < nent(size); i++) {
		if (tag_of(b, i) == TAG_USER_OBJ)
			m |= (uint32_t)perm_of(b, i) << 6;
		else if (tag_of(b, i) == TAG_OTHER)
			m |= perm_of(b, i);
	}
	return m;
}

/* Sets USER_OBJ, the group class and OTHER to f(old perm, the mode's
 * bits for that class): and = limit (inheritance), else replace (chmod). */
static void set_classes(uint8_t *b, size_t size, uint32_t mode, bool and)
{
	size_t gc = group_class(b, size);

	for (size_t i = 0; i < nent(size); i++) {
		uint32_t bits;
		if (tag_of(b, i) == TAG_USER_OBJ)
			bits = mode >> 6 & 7;
		else if (i == gc)
			bits = mode >> 3 & 7;
		else if (tag_of(b, i) == TAG_OTHER)
			bits = mode & 7;
		else
			continue;
		put_le16(b + HDR + i * ENT + 2, (uint16_t)(and ? perm_of(b, i) & bits : bits));
	}
}

void fs_acl_chmod(void *v, size_t size, uint32_t mode)
{
	set_classes(v, size, mode, false);
}

void fs_acl_inherit(void *acl, size_t size, uint32_t *mode)
{
	set_classes(acl, size, *mode, true);
	*mode = (*mode & ~0777u) | fs_acl_perm_bits(acl, size);
}
