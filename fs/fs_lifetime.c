/* fs_lifetime — choosing a new file's lifetime class (see lifetime.h for the
 * sources and their order).  Today: the parent directory's
 * user.zonefuse.lifetime xattr, then the RocksDB/LevelDB name presets.
 * Inference from reads (fs_note_read) is not implemented yet.
 * Locking: fs_lifetime_pick runs with fs->lock held; fs_note_read takes
 * nothing and must stay cheap (it runs after every read).
 */
#include <string.h>

#include "fs/fs_internal.h"

void fs_lifetime_pick(struct fs *fs, struct fs_inode *dir, const char *name,
		      const struct fs_ctx *ctx, struct fs_inode *in)
{
	enum lifetime_class cls;
	struct fs_xattr *x = fs_xattr_find(dir, FS_XATTR_LIFETIME);

	(void)fs;
	(void)ctx;
	if (x && x->size < 32) {
		char buf[32];
		memcpy(buf, x->value, x->size);
		buf[x->size] = 0;
		buf[strcspn(buf, " \n")] = 0;
		if (lifetime_class_parse(buf, &cls) == 0) {
			in->cls = (uint8_t)cls;
			in->cls_src = LIFETIME_SRC_DIR_XATTR;
			return;
		}
	}
	in->cls_src = (uint8_t)lifetime_preset(name, &cls);
	in->cls = (uint8_t)cls;
}

void fs_note_read(struct fs *fs, uint64_t ino, uint32_t tid, uint64_t bytes)
{
	(void)fs;
	(void)ino;
	(void)tid;
	(void)bytes;
}
