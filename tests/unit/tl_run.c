/* tl_run: the Check runner every unit test's main() calls (testlib.h).
 * Apart from testlib.c so that tests of the lower layers link no fs. */
#include <check.h>

#include "testlib.h"

int tl_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
