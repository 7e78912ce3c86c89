/* fs_acl — POSIX ACLs in their xattr form (system.posix_acl_access and
 * system.posix_acl_default): validation, the mode bits an access ACL
 * implies, chmod of an ACL, and inheritance of a directory's default ACL
 * by a new inode.
 *
 * Format (the kernel's, little-endian): u32 version (2), then entries
 * { u16 tag, u16 perm, u32 id }.  A valid ACL has exactly one USER_OBJ,
 * GROUP_OBJ and OTHER entry, at most one MASK, a MASK whenever it has a
 * named USER or GROUP entry, and perms within rwx.  The "group class" of
 * the mode bits is the MASK when there is one, else GROUP_OBJ.
 *
 * Enforcement is the kernel's (FUSE_CAP_POSIX_ACL, docs/guarantees.md);
 * zonefuse stores ACLs, keeps the mode bits and the ACL in agreement and
 * applies inheritance.  Pure functions on buffers: no locks, no I/O.
 */
#ifndef ZONEFUSE_FS_ACL_H
#define ZONEFUSE_FS_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"	/* FS_ACL_ACCESS, FS_ACL_DEFAULT */

#define FS_ACL_MAX_SIZE 4096	/* bytes: the kernel sends at most a page */

/* 0 when v[0..size) is a valid ACL, else -EINVAL. */
int fs_acl_check(const void *v, size_t size);
/* True when the ACL has only the three base entries (it says no more than
 * the mode bits: such an access ACL is not stored).  v must be valid. */
bool fs_acl_is_minimal(const void *v, size_t size);
/* The permission bits (0777) the access ACL v implies.  v must be valid. */
uint32_t fs_acl_perm_bits(const void *v, size_t size);
/* chmod of an ACL in place: USER_OBJ, the group class and OTHER take the
 * permission bits of mode.  v must be valid. */
void fs_acl_chmod(void *v, size_t size, uint32_t mode);
/* Inheritance (POSIX.1e): a new inode's access ACL is the parent's default
 * ACL with USER_OBJ, the group class and OTHER limited by the create mode;
 * the mode's permission bits follow from it.  acl (size bytes) is a copy
 * of the default ACL, changed in place; *mode is updated. */
void fs_acl_inherit(void *acl, size_t size, uint32_t *mode);

#endif
