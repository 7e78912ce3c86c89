/* fs_lifetime — lifetime placement's state, private to the fs core: owned
 * by fs_lifetime.c, held in struct fs as a pointer (fs->lt); its functions
 * are in fs_internal.h, the model and the decision table in lsm/lifetime.h.
 *
 * Purpose: what a new file's class is chosen from (the rules file, the LSM
 * level inference) and the MANIFESTs followed for exact levels.
 *
 * State: struct fs_lt, defined in fs_lifetime.c and opaque elsewhere, so
 * that no other file reaches into the inference.  fs->lt is NULL
 * before fs_lifetime_init and after fs_lifetime_fini.  Lifetimes are
 * measured in bytes written to the file system (fs->user_bytes); the
 * bytes written by class are fs->class_user_bytes (counted by fs_data.c).
 *
 * Thread safety and lock order: lt->tail_lock -> in->rw (a MANIFEST is
 * read with fs_read) -> fs->lock -> lt->mf_lock (a leaf); the inference
 * state's own mutex is a leaf too.  The rules are immutable after init.
 * Each function says which locks its caller holds.
 */
#ifndef ZONEFUSE_FS_LIFETIME_H
#define ZONEFUSE_FS_LIFETIME_H

struct fs_lt;

#endif
