/* tc_util — helpers shared by the crash-state and corruption tools in
 * tests/crash (zf-crashstates, zf-corruptsweep): fatal errors, copies of
 * emulated device images, a scratch directory.  Single-threaded programs.
 */
#ifndef ZF_TC_UTIL_H
#define ZF_TC_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"

/* Print "PROG: message" and exit 2 (a setup error, not a finding). */
void tc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define TC_CHECK(x) do { long r_ = (long)(x); if (r_ < 0) \
	tc_die("%s:%d: %s: %s", __FILE__, __LINE__, #x, strerror((int)-r_)); } while (0)
/* The program name for tc_die. */
extern const char *tc_prog;

/* Copy the emulated device file src to dst, holes kept. */
void tc_copy_image(const char *src, const char *dst);
/* A fresh directory under TMPDIR (default /dev/shm, else /tmp) into dir. */
void tc_scratch_dir(char *dir, size_t size);
/* Mount dev read-write for the tools: commits on demand, 64 KiB stripes,
 * one zone per write-out; NULL and *err on failure. */
struct fs *tc_mount(struct zdev *dev, bool read_only, int *err);
/* A new inode (fs_mkdir for a directory mode, else fs_mknod) named name
 * in parent, without the lookup reference; its number (dies on error). */
uint64_t tc_mk(struct fs *fs, uint64_t parent, const char *name, mode_t mode);
/* Create the emulated device path (zones of zone_size bytes, 4 KiB
 * blocks, no limits), format it and mount it with tc_mount (dies on error). */
struct fs *tc_make_fs(const char *path, uint32_t zones, uint64_t zone_size, struct zdev **dev);
/* FNV-1a over n bytes, continuing from h (TC_FNV0 to start). */
#define TC_FNV0 0xcbf29ce484222325ull
uint64_t tc_fnv(uint64_t h, const void *p, size_t n);

#endif
