/* zdev_zbd — real zoned block device backend (libzbd + liburing).
 * Placeholder until the backend lands: refuses to open. */
#include <errno.h>

#include "common/zf_common.h"
#include "zoned/zdev_backend.h"

int zdev_zbd_backend_open(struct zdev *dev, const char *path,
			  const struct zdev_open_opts *opts)
{
	(void)dev;
	(void)opts;
	zf_err("zdev: %s: zoned block device backend not built yet", path);
	return -ENOTSUP;
}
