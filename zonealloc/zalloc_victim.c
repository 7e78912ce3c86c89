/* zalloc_victim.c — the collector's victim policy (contract: zalloc_victim.h). */
#include "zonealloc/zalloc_victim.h"

#include <math.h>

double gc_score(uint64_t capacity, uint64_t valid, uint64_t age)
{
	double u;

	if (capacity == 0 || valid >= capacity)
		return -1;
	u = (double)valid / (double)capacity;
	/* benefit: the bytes freed, weighted by the zone's age in zones
	 * written since (log scale); cost: reading and writing the live
	 * bytes */
	return (1.0 - u) * log2(2.0 + (double)age / (double)capacity) /
	       (2.0 * u + 1.0 / (double)capacity);
}

bool gc_gain_enough(uint64_t capacity, uint64_t valid, uint32_t block, bool urgent)
{
	uint64_t gain;

	if (valid >= capacity)
		return false;
	gain = capacity - valid;
	return gain >= block &&
	       gain >= capacity / (urgent ? GC_MIN_GAIN_URGENT : GC_MIN_GAIN);
}

bool gc_deferred(const struct gc_zone_view *v, bool urgent)
{
	return !urgent && v->defer_young && v->since_write < v->class_life;
}

ptrdiff_t gc_policy_pick(const struct gc_zone_view *v, size_t n, uint32_t block,
			 bool urgent, double *score)
{
	ptrdiff_t best = -1;
	double best_score = 0;

	for (size_t i = 0; i < n; i++) {
		double sc;

		if (!gc_gain_enough(v[i].capacity, v[i].valid, block, urgent) ||
		    gc_deferred(&v[i], urgent))
			continue;
		sc = urgent ? (double)(v[i].capacity - v[i].valid)
			    : gc_score(v[i].capacity, v[i].valid, v[i].age);
		if (best < 0 || sc > best_score) {
			best = (ptrdiff_t)i;
			best_score = sc;
		}
	}
	if (score)
		*score = best_score;
	return best;
}

uint64_t gc_policy_life_note(uint64_t life, uint64_t sample)
{
	if (sample >= life)
		return sample;
	return life - (life - sample) / 8;
}
