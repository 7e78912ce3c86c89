/* lsm_priv — declarations shared by the files of lsm/ only, grouped by the
 * file that defines them.  Not an interface for other modules: they use
 * lsm/lifetime.h. */
#ifndef ZONEFUSE_LSM_PRIV_H
#define ZONEFUSE_LSM_PRIV_H

/* lifetime.c */

/* log2(x) for a count, 0 below 1: the unit of observed lifetimes
 * (struct lifetime_level_obs.log2_life).  Pure. */
double lsm_log2(double x);

#endif
