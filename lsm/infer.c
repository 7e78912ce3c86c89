/* infer — the LSM level inference state (struct lifetime_infer): the live
 * tables and WALs, the threads that create and read them, the compaction
 * jobs they run, and the picker targets learned from those jobs (the model
 * is in lifetime.h).  Every public function takes li->mu, a leaf lock, for
 * its whole run; the static helpers below are called with it held.
 *
 * No step of a create, read or unlink walks the live files: the daemon
 * calls them under its global lock, and a database on a large drive has
 * tens of thousands of tables.  So the picker's inputs are kept as running
 * sums (tables per level; bytes per level of the sealed tables, whose size
 * is final, plus the few open ones asked for their size when needed), and
 * each thread lists the outputs of its open job for the corrections.
 * lifetime_infer_check() recounts both from the table. */
#include "lsm/lifetime.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "lsm/lsm_priv.h"

#define LI_THREADS 64
#define LI_READS 16
#define LI_OBS 128
#define LI_BATCH_NS (5ull * 1000000000ull)	/* inputs of one job die within this */
#define LI_OPEN 128	/* unsealed tables tracked; the oldest is sealed past it */

struct li_file {
	uint64_t file;		/* 0 = empty slot */
	uint64_t job;		/* compaction job that wrote it (0 = flush/unknown) */
	uint64_t born;		/* clock at create */
	int8_t level;		/* -1 unknown */
	uint8_t kind;
	bool dead;		/* tombstone */
	bool exact;		/* level from a MANIFEST */
	bool sealed;		/* table whose size is final: bytes counts */
	bool corrected;		/* counted in st.tables_corrected */
	int8_t cls0;		/* table: class of its level at create, -1 none */
	uint64_t bytes;		/* sealed: its size, in lv_bytes[level] */
};

struct li_read {
	uint64_t file, bytes, t;
};

struct li_thread {
	uint32_t tid;
	bool used;
	uint64_t last_ns;
	uint64_t job;		/* open compaction job, 0 = none */
	int job_level;
	uint64_t job_last_ns;	/* last output of the job */
	bool resolving;		/* inputs of the job are dying */
	int resolve_min;
	uint64_t resolve_ns;
	int obs_idx;		/* observation of the job (learning), -1 */
	uint32_t f_n0;		/* picker features at the job's start */
	double f_b[LIFETIME_MAX_LEVELS];
	uint64_t last_output;
	uint64_t n_flush, jobs_comp;
	struct li_read reads[LI_READS];
	uint64_t *outs;		/* outputs of the open job, in creation order */
	uint32_t nouts, capouts;
	bool outs_lost;		/* an output could not be listed: fix_job scans */
};

struct li_obs {
	uint32_t n0;
	double b[LIFETIME_MAX_LEVELS];
	int8_t in_level;
};

struct lifetime_infer {
	pthread_mutex_t mu;
	struct li_file *f;
	size_t fcap, fused;	/* slots in use (live + tombstones) */
	size_t flive;
	struct li_thread th[LI_THREADS];
	int live_wal;		/* WALs alive */
	int unconf;		/* flush outputs not yet confirmed by a WAL death */
	uint64_t next_job;
	struct li_obs obs[LI_OBS];
	unsigned int nobs, obs_next;
	double target[LIFETIME_MAX_LEVELS];
	bool targets_dirty;
	struct lifetime_infer_stats st;
	/* Running sums over the live tables of a known level (< MAX_LEVELS):
	 * how many per level, and the sealed ones' bytes per level. */
	uint64_t lv_n[LIFETIME_MAX_LEVELS];
	uint64_t lv_bytes[LIFETIME_MAX_LEVELS];
	uint64_t lv_exact[LIFETIME_MAX_LEVELS];	/* ... of them exact */
	uint64_t open[LI_OPEN];	/* unsealed tables, oldest first */
	unsigned int nopen;
	bool leveldb;		/* the tables are LevelDB's (lifetime_infer_leveldb) */
};

static size_t fhash(uint64_t file, size_t cap)
{
	return (size_t)((file * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static struct li_file *file_find(struct lifetime_infer *li, uint64_t file)
{
	if (!li->fcap || !file)
		return NULL;
	for (size_t i = fhash(file, li->fcap), k = 0; k < li->fcap;
	     i = (i + 1) & (li->fcap - 1), k++) {
		struct li_file *x = &li->f[i];

		if (!x->file && !x->dead)
			return NULL;
		if (x->file == file && !x->dead)
			return x;
	}
	return NULL;
}

static int file_rehash(struct lifetime_infer *li, size_t ncap)
{
	struct li_file *nf = calloc(ncap, sizeof(*nf));

	if (!nf)
		return -ENOMEM;
	for (size_t i = 0; i < li->fcap; i++) {
		struct li_file *x = &li->f[i];

		if (!x->file || x->dead)
			continue;
		size_t j = fhash(x->file, ncap);
		while (nf[j].file)
			j = (j + 1) & (ncap - 1);
		nf[j] = *x;
	}
	free(li->f);
	li->f = nf;
	li->fcap = ncap;
	li->fused = li->flive;
	return 0;
}

/* The record of file, created if needed (NULL on ENOMEM). */
static struct li_file *file_get(struct lifetime_infer *li, uint64_t file)
{
	struct li_file *x = file_find(li, file);

	if (x)
		return x;
	if ((li->fused + 1) * 4 > li->fcap * 3 &&
	    file_rehash(li, li->fcap ? (li->flive * 4 > li->fcap ? 2 * li->fcap : li->fcap) : 64))
		return NULL;
	size_t i = fhash(file, li->fcap);
	while (li->f[i].file && !li->f[i].dead)
		i = (i + 1) & (li->fcap - 1);
	x = &li->f[i];
	if (!x->dead)
		li->fused++;
	memset(x, 0, sizeof(*x));
	x->file = file;
	x->level = -1;
	x->cls0 = -1;
	li->flive++;
	return x;
}

/* Whether x counts in the per-level sums. */
static bool lv_counted(const struct li_file *x)
{
	return x->kind == LIFETIME_KIND_TABLE && x->level >= 0 &&
	       x->level < LIFETIME_MAX_LEVELS;
}

static void lv_take(struct lifetime_infer *li, const struct li_file *x)
{
	if (!lv_counted(x))
		return;
	li->lv_n[x->level]--;
	if (x->exact)
		li->lv_exact[x->level]--;
	if (x->sealed)
		li->lv_bytes[x->level] -= x->bytes;
}

static void lv_give(struct lifetime_infer *li, const struct li_file *x)
{
	if (!lv_counted(x))
		return;
	li->lv_n[x->level]++;
	if (x->exact)
		li->lv_exact[x->level]++;
	if (x->sealed)
		li->lv_bytes[x->level] += x->bytes;
}

static void set_level(struct lifetime_infer *li, struct li_file *x, int level)
{
	lv_take(li, x);
	x->level = (int8_t)level;
	lv_give(li, x);
}

/* A guessed level is at most one below the deepest level that holds a
 * table of exact level (MANIFEST): a compaction writes one level below its
 * inputs, and the deepest inputs it can have are those tables.  Guesses
 * feed on guesses (a job's level is its inputs' level + 1), so without this
 * bound a run of wrong guesses compounds into levels the LSM does not have.
 * No bound before the first exact level.  [mu] */
static int level_cap(const struct lifetime_infer *li, int level)
{
	for (int k = LIFETIME_MAX_LEVELS - 1; k >= 0; k--)
		if (li->lv_exact[k])
			return level > k + 1 ? k + 1 : level;
	return level;
}

static void open_drop(struct lifetime_infer *li, uint64_t file)
{
	for (unsigned int i = 0; i < li->nopen; i++)
		if (li->open[i] == file) {
			memmove(&li->open[i], &li->open[i + 1],
				(li->nopen - i - 1) * sizeof(li->open[0]));
			li->nopen--;
			return;
		}
}

/* x's size is bytes from now on (until it is sealed again). */
static void seal(struct lifetime_infer *li, struct li_file *x, uint64_t bytes)
{
	lv_take(li, x);
	if (!x->sealed && x->kind == LIFETIME_KIND_TABLE)
		open_drop(li, x->file);
	x->sealed = true;
	x->bytes = bytes;
	lv_give(li, x);
}

/* A new table x joins the open ones; the oldest open table is sealed at
 * its current size when there are LI_OPEN already. */
static void open_add(struct lifetime_infer *li, struct li_file *x,
		     uint64_t (*size_of)(void *, uint64_t), void *arg)
{
	if (li->nopen == LI_OPEN) {
		uint64_t f = li->open[0];
		struct li_file *o = file_find(li, f);

		if (o)
			seal(li, o, size_of ? size_of(arg, f) : 0);
		else
			open_drop(li, f);
	}
	li->open[li->nopen++] = x->file;
}

static void file_del(struct lifetime_infer *li, struct li_file *x)
{
	lv_take(li, x);
	if (x->kind == LIFETIME_KIND_TABLE && !x->sealed)
		open_drop(li, x->file);
	x->dead = true;
	x->file = 0;
	li->flive--;
}

struct lifetime_infer *lifetime_infer_new(void)
{
	struct lifetime_infer *li = calloc(1, sizeof(*li));

	if (!li)
		return NULL;
	pthread_mutex_init(&li->mu, NULL);
	li->next_job = 1;
	li->targets_dirty = true;
	for (int i = 0; i < LI_THREADS; i++)
		li->th[i].obs_idx = -1;
	return li;
}

void lifetime_infer_free(struct lifetime_infer *li)
{
	if (!li)
		return;
	for (int i = 0; i < LI_THREADS; i++)
		free(li->th[i].outs);
	pthread_mutex_destroy(&li->mu);
	free(li->f);
	free(li);
}

/* The thread's slot; the least recently active one is recycled. */
static struct li_thread *thread_get(struct lifetime_infer *li, uint32_t tid,
				    uint64_t now)
{
	struct li_thread *old = NULL;

	for (int i = 0; i < LI_THREADS; i++) {
		struct li_thread *t = &li->th[i];

		if (t->used && t->tid == tid) {
			t->last_ns = now;
			return t;
		}
		if (!old || !t->used || (old->used && t->last_ns < old->last_ns))
			if (!old || old->used)
				old = t;
	}
	free(old->outs);
	memset(old, 0, sizeof(*old));
	old->used = true;
	old->tid = tid;
	old->last_ns = now;
	old->obs_idx = -1;
	return old;
}

static void obs_note(struct lifetime_level_obs *o, uint64_t life)
{
	double x = lsm_log2((double)(life ? life : 1));

	o->n++;
	if (o->n <= 16)
		o->log2_life += (x - o->log2_life) / (double)o->n;
	else
		o->log2_life += (x - o->log2_life) / 16.0;
}

/* Learn target(k) (bytes) for k >= 1 from the jobs seen: the threshold on
 * y = bytes(Lk) / max(L0 score, 1, lower levels' scores) that best
 * separates jobs from level k from the others. */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* How many of the n sorted values v[] are below c. */
static unsigned below(const double *v, unsigned n, double c)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (v[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void learn_targets(struct lifetime_infer *li)
{
	double pos[LI_OBS], neg[LI_OBS], spos[LI_OBS], sneg[LI_OBS];

	for (int k = 1; k < LIFETIME_MAX_LEVELS; k++) {
		unsigned np = 0, nn = 0;
		double t = 0;

		for (unsigned i = 0; i < li->nobs; i++) {
			const struct li_obs *o = &li->obs[i];
			double m = ZF_MAX(o->n0 / (double)LIFETIME_L0_TRIGGER, 1.0);

			if (o->b[k] <= 0)
				continue;
			for (int j = 1; j < k; j++)
				if (li->target[j] > 0)
					m = ZF_MAX(m, o->b[j] / li->target[j]);
			if (o->in_level == k)
				pos[np++] = o->b[k] / m;
			else
				neg[nn++] = o->b[k] / m;
		}
		if (np >= (k == 1 ? 1u : 2u)) {
			double best_c = pos[0];
			unsigned best_err = UINT32_MAX;

			/* every value is a candidate threshold c; its errors
			 * are the positives below c and the negatives at or
			 * above it, counted by binary search in sorted copies */
			memcpy(spos, pos, np * sizeof(*pos));
			memcpy(sneg, neg, nn * sizeof(*neg));
			qsort(spos, np, sizeof(*spos), cmp_double);
			qsort(sneg, nn, sizeof(*sneg), cmp_double);
			for (unsigned a = 0; a < np + nn; a++) {
				double c = a < np ? pos[a] : neg[a - np];
				unsigned err = below(spos, np, c) + nn - below(sneg, nn, c);

				if (err < best_err || (err == best_err && c < best_c)) {
					best_err = err;
					best_c = c;
				}
			}
			double lo = 0;
			for (unsigned i = 0; i < nn; i++)
				if (neg[i] < best_c && neg[i] > lo)
					lo = neg[i];
			if (lo <= 0)
				lo = best_c * 0.9;
			t = (best_c + lo) / 2;
		} else if (np) {
			/* one job from this level (k >= 2): the default
			 * multiplier, but above every size at which the level
			 * was NOT chosen */
			if (li->target[k - 1] > 0)
				t = li->target[k - 1] * LIFETIME_LEVEL_MULT;
			for (unsigned i = 0; i < nn; i++)
				if (neg[i] * 1.25 > t)
					t = neg[i] * 1.25;
		}
		/* else: no job from this level seen yet: not predicted (a new
		 * level is usually filled by moving tables down without
		 * rewriting them; its first real compaction teaches us) */
		li->target[k] = t;
	}
	li->targets_dirty = false;
}

/* LevelDB's target for level k >= 1: LIFETIME_LDB_L1_TARGET for L1,
 * LIFETIME_LEVEL_MULT times more per level below (MaxBytesForLevel in
 * its version_set.cc, which no option changes). */
static double leveldb_target(int k)
{
	double t = LIFETIME_LDB_L1_TARGET;

	while (k-- > 1)
		t *= LIFETIME_LEVEL_MULT;
	return t;
}

/* The target of level k >= 1 the picker uses: LevelDB's own, else the
 * learned one (0: never predicted).  [mu] */
static double target_of(const struct lifetime_infer *li, int k)
{
	return li->leveldb ? leveldb_target(k) : li->target[k];
}

/* Level of a new compaction job from the picker simulation; fills the
 * job's features. */
static int picker_level(struct lifetime_infer *li, struct li_thread *t,
			uint64_t (*size_of)(void *, uint64_t), void *arg)
{
	double best = 0;
	int lvl = 0;

	t->f_n0 = (uint32_t)li->lv_n[0];
	for (int k = 0; k < LIFETIME_MAX_LEVELS; k++)
		t->f_b[k] = (double)li->lv_bytes[k];
	for (unsigned int i = 0; i < li->nopen; i++) {
		const struct li_file *x = file_find(li, li->open[i]);

		if (x && lv_counted(x) && size_of)
			t->f_b[x->level] += (double)size_of(arg, x->file);
	}
	if (li->targets_dirty)
		learn_targets(li);
	best = t->f_n0 / (double)LIFETIME_L0_TRIGGER;
	for (int k = 1; k < LIFETIME_MAX_LEVELS - 1; k++) {
		double target = target_of(li, k);

		if (target <= 0 || t->f_b[k] <= 0)
			continue;
		if (t->f_b[k] / target > best) {
			best = t->f_b[k] / target;
			lvl = k;
		}
	}
	return lvl + 1;
}

/* Reads by t of other live tables in the window: their minimum level, or -1
 * if fewer than LIFETIME_READ_MIN bytes. */
static int read_inputs(struct lifetime_infer *li, struct li_thread *t,
		       uint64_t now)
{
	uint64_t bytes = 0;
	int min = -1;

	for (int i = 0; i < LI_READS; i++) {
		const struct li_read *r = &t->reads[i];
		const struct li_file *x;

		if (!r->file || r->file == t->last_output ||
		    now - r->t > LIFETIME_READ_WINDOW_NS)
			continue;
		x = file_find(li, r->file);
		if (!x || x->kind != LIFETIME_KIND_TABLE || x->level < 0)
			continue;
		bytes += r->bytes;
		if (r->bytes >= 4096 && (min < 0 || x->level < min))
			min = x->level;
	}
	return bytes >= LIFETIME_READ_MIN ? min : -1;
}

/* Lists file as an output of t's open job. */
static void outs_add(struct li_thread *t, uint64_t file)
{
	if (t->outs_lost)
		return;
	if (t->nouts == t->capouts) {
		uint32_t cap = t->capouts ? 2 * t->capouts : 16;
		uint64_t *o = t->outs ? realloc(t->outs, cap * sizeof(*o))
				      : calloc(cap, sizeof(*o));

		if (!o) {
			t->outs_lost = true;
			return;
		}
		t->outs = o;
		t->capouts = cap;
	}
	t->outs[t->nouts++] = file;
}

static void close_job(struct li_thread *t)
{
	t->job = 0;
	t->resolving = false;
	t->obs_idx = -1;
}

static void open_job(struct lifetime_infer *li, struct li_thread *t, int level,
		     uint64_t now)
{
	t->nouts = 0;
	t->outs_lost = false;
	t->job = li->next_job++;
	t->job_level = level;
	t->job_last_ns = now;
	t->resolving = false;
	t->obs_idx = -1;
}

/* The class the current level -> class map gives level l (the map
 * fs_lifetime_pick() applies at create).  [mu] */
static int level_class_now(struct lifetime_infer *li, int l)
{
	uint8_t map[LIFETIME_MAX_LEVELS];

	lifetime_level_classes(&li->st.wal, li->st.level, map);
	return map[l < LIFETIME_MAX_LEVELS ? l : LIFETIME_MAX_LEVELS - 1];
}

/* A table dies at level lvl: it counts among the misguessed ones when
 * that level's class is not the one its level at create gave, the data it
 * wrote then having gone to another class's zones (all of it, but for
 * what was still buffered when the level was corrected).  [mu] */
static void note_guess(struct lifetime_infer *li, const struct li_file *x, int lvl)
{
	uint64_t b = x->sealed ? x->bytes : 0;

	if (x->cls0 < 0)
		return;	/* adopted at mount: no guess was made */
	li->st.tables_died++;
	li->st.bytes_died += b;
	if (level_class_now(li, lvl) != x->cls0) {
		li->st.tables_misguessed++;
		li->st.bytes_misguessed += b;
	}
}

/* The level of a new table x created by thread t (the four steps of
 * lifetime.h, in order); opens or follows t's compaction job and counts the
 * table in the statistics.  [mu] */
static int table_level(struct lifetime_infer *li, struct li_file *x,
		       struct li_thread *t, uint64_t now_ns,
		       uint64_t (*size_of)(void *arg, uint64_t file), void *arg,
		       enum lifetime_why *whyp)
{
	int pending = li->live_wal - 1 - li->unconf;
	bool compactor = t->jobs_comp >= 3 && t->n_flush * 4 < t->jobs_comp;
	int lvl, rd;
	enum lifetime_why why;

	if (t->job && (t->resolving || now_ns - t->job_last_ns > LIFETIME_JOB_IDLE_NS))
		close_job(t);
	rd = read_inputs(li, t, now_ns);
	if (rd < 0 && pending > 0 && li->leveldb) {
		/* LevelDB's one background thread writes a waiting memtable
		 * before anything else, even in the middle of a compaction
		 * (BackgroundCompaction and DoCompactionWork look for it
		 * first) */
		lvl = 0;
		why = LIFETIME_WHY_FLUSH;
		li->unconf++;
		t->n_flush++;
	} else if (rd >= 0) {
		lvl = rd + 1;
		why = LIFETIME_WHY_READS;
		if (!t->job) {
			open_job(li, t, lvl, now_ns);
			picker_level(li, t, size_of, arg);	/* features only */
		}
		t->job_level = lvl;
	} else if (t->job) {
		lvl = t->job_level;
		why = LIFETIME_WHY_JOB;
	} else if (pending > 0 && !compactor) {
		lvl = 0;
		why = LIFETIME_WHY_FLUSH;
		li->unconf++;
		t->n_flush++;
	} else {
		lvl = picker_level(li, t, size_of, arg);
		why = LIFETIME_WHY_PICKER;
		open_job(li, t, lvl, now_ns);
	}
	if (lvl >= LIFETIME_MAX_LEVELS)
		lvl = LIFETIME_MAX_LEVELS - 1;
	lvl = level_cap(li, lvl);
	if (t->job)
		t->job_level = lvl;
	set_level(li, x, lvl);
	x->job = why == LIFETIME_WHY_FLUSH ? 0 : t->job;
	if (x->job)
		outs_add(t, x->file);
	if (t->job)
		t->job_last_ns = now_ns;
	t->last_output = x->file;
	li->st.tables++;
	li->st.why[why]++;
	*whyp = why;
	return lvl;
}

void lifetime_infer_create(struct lifetime_infer *li, uint64_t file,
			   enum lifetime_kind kind, uint32_t tid,
			   uint64_t now_ns, uint64_t clock,
			   uint64_t (*size_of)(void *arg, uint64_t file),
			   void *arg, struct lifetime_guess *g)
{
	struct li_file *x;
	enum lifetime_why why;
	int lvl;

	if (g)
		*g = (struct lifetime_guess){ .level = -1, .why = LIFETIME_WHY_FLUSH };
	if (!li || !file)
		return;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (x) {
		if (x->kind == LIFETIME_KIND_WAL && li->live_wal > 0)
			li->live_wal--;
		file_del(li, x);
	}
	x = file_get(li, file);
	if (!x)
		goto out;
	x->kind = (uint8_t)kind;
	x->born = clock;
	if (kind == LIFETIME_KIND_WAL) {
		li->live_wal++;
		goto out;
	}
	if (kind != LIFETIME_KIND_TABLE)
		goto out;
	open_add(li, x, size_of, arg);
	lvl = table_level(li, x, thread_get(li, tid, now_ns), now_ns, size_of, arg, &why);
	x->cls0 = (int8_t)level_class_now(li, lvl);
	if (g)
		*g = (struct lifetime_guess){ .level = lvl, .why = why, .job = x->job };
out:
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_adopt(struct lifetime_infer *li, uint64_t file,
			  enum lifetime_kind kind, int level, uint64_t clock,
			  uint64_t size)
{
	struct li_file *x;

	if (!li || !file)
		return;
	pthread_mutex_lock(&li->mu);
	x = file_get(li, file);
	if (x) {
		seal(li, x, size);	/* it was written before the mount */
		lv_take(li, x);
		x->kind = (uint8_t)kind;
		x->level = (int8_t)(level < LIFETIME_MAX_LEVELS ? level : LIFETIME_MAX_LEVELS - 1);
		x->born = clock;
		lv_give(li, x);
		if (kind == LIFETIME_KIND_WAL)
			li->live_wal++;
	}
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_seal(struct lifetime_infer *li, uint64_t file, uint64_t size)
{
	struct li_file *x;

	if (!li || !file)
		return;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (x && x->kind == LIFETIME_KIND_TABLE)
		seal(li, x, size);
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_read(struct lifetime_infer *li, uint64_t file, uint32_t tid,
			 uint64_t bytes, uint64_t now_ns)
{
	struct li_thread *t;
	struct li_read *slot = NULL;

	if (!li || !file || !bytes)
		return;
	pthread_mutex_lock(&li->mu);
	t = thread_get(li, tid, now_ns);
	for (int i = 0; i < LI_READS; i++) {
		struct li_read *r = &t->reads[i];

		if (r->file == file) {
			slot = r;
			break;
		}
		if (!slot || r->t < slot->t)
			slot = r;
	}
	if (slot->file != file)
		*slot = (struct li_read){ .file = file };
	slot->bytes += bytes;
	slot->t = now_ns;
	pthread_mutex_unlock(&li->mu);
}

/* Set x, an output of job, to level; append the change to fixes. */
static size_t fix_one(struct lifetime_infer *li, struct li_file *x, uint64_t job,
		      int level, struct lifetime_fix *fixes, size_t n)
{
	if (!x || !x->file || x->dead || x->job != job || x->level == level || x->exact)
		return n;
	if (fixes && n < LIFETIME_MAX_FIXES)
		fixes[n++] = (struct lifetime_fix){ x->file, x->level, level };
	set_level(li, x, level);
	/* A job's inputs die in any order; each lower input level corrects
	 * its outputs again (L2 dies: L3, then L1 dies: L2).  The stat counts
	 * tables, so each once. */
	if (!x->corrected) {
		x->corrected = true;
		li->st.tables_corrected++;
	}
	return n;
}

/* Set every output of t's open job to level (from its list, or a scan of
 * the table when an output could not be listed); append the changes to
 * fixes. */
static size_t fix_job(struct lifetime_infer *li, struct li_thread *t, int level,
		      struct lifetime_fix *fixes, size_t n)
{
	if (t->outs_lost) {
		for (size_t i = 0; i < li->fcap; i++)
			n = fix_one(li, &li->f[i], t->job, level, fixes, n);
		return n;
	}
	for (uint32_t i = 0; i < t->nouts; i++)
		n = fix_one(li, file_find(li, t->outs[i]), t->job, level, fixes, n);
	return n;
}

/* The job whose input a dying table of job `job` was: the unlinking
 * thread's own open job; else a job whose inputs are dying now (same
 * batch); else the open job idle the longest (the one most likely
 * finished).  NULL if no job is open.  [mu] */
static struct li_thread *input_owner(struct lifetime_infer *li, uint64_t job,
				     uint32_t tid, uint64_t now_ns)
{
	struct li_thread *best = NULL;

	for (int i = 0; i < LI_THREADS; i++) {
		struct li_thread *t = &li->th[i];

		if (!t->used || !t->job || t->job == job)
			continue;
		if (t->resolving && now_ns - t->resolve_ns > LI_BATCH_NS)
			continue;
		if (tid && t->tid == tid)
			return t;
		if (!best || (t->resolving && !best->resolving) ||
		    (t->resolving == best->resolving && t->job_last_ns < best->job_last_ns))
			best = t;
	}
	return best;
}

/* An input of t's job, of level lvl, died: the job's level is lvl + 1 (the
 * lowest input level seen so far wins).  The first input starts the
 * resolution and records the job's picker features for learn_targets().
 * Corrections of the job's outputs are appended to fixes[n...]; returns
 * the new count.  [mu] */
static size_t resolve_job(struct lifetime_infer *li, struct li_thread *t, int lvl,
			  uint64_t now_ns, struct lifetime_fix *fixes, size_t n)
{
	int out_level = level_cap(li, lvl + 1 < LIFETIME_MAX_LEVELS ? lvl + 1
							   : LIFETIME_MAX_LEVELS - 1);

	if (t->resolving && lvl >= t->resolve_min)
		return n;
	if (!t->resolving) {
		struct li_obs *o;

		t->resolving = true;
		t->resolve_ns = now_ns;
		t->jobs_comp++;
		li->st.jobs_resolved++;
		t->obs_idx = (int)li->obs_next;
		o = &li->obs[li->obs_next];
		o->n0 = t->f_n0;
		memcpy(o->b, t->f_b, sizeof(o->b));
		li->obs_next = (li->obs_next + 1) % LI_OBS;
		if (li->nobs < LI_OBS)
			li->nobs++;
	}
	t->resolve_min = lvl;
	if (t->obs_idx >= 0)
		li->obs[t->obs_idx].in_level = (int8_t)lvl;
	li->targets_dirty = true;
	t->job_level = out_level;
	return fix_job(li, t, out_level, fixes, n);
}

size_t lifetime_infer_unlink(struct lifetime_infer *li, uint64_t file,
			     uint32_t tid, uint64_t now_ns, uint64_t clock,
			     struct lifetime_fix *fixes)
{
	struct li_file *x;
	struct li_thread *owner;
	size_t n = 0;
	int lvl;
	uint64_t job;

	if (!li || !file)
		return 0;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (!x)
		goto out;
	if (x->kind == LIFETIME_KIND_WAL) {
		if (li->live_wal > 0)
			li->live_wal--;
		if (li->unconf > 0)
			li->unconf--;	/* a flush is done */
		obs_note(&li->st.wal, clock - x->born);
		file_del(li, x);
		goto out;
	}
	if (x->kind != LIFETIME_KIND_TABLE) {
		file_del(li, x);
		goto out;
	}
	lvl = x->level;
	job = x->job;
	if (lvl >= 0) {
		obs_note(&li->st.level[lvl], clock - x->born);
		note_guess(li, x, lvl);
	}
	file_del(li, x);
	if (lvl < 0)
		goto out;
	owner = input_owner(li, job, tid, now_ns);
	if (owner)
		n = resolve_job(li, owner, lvl, now_ns, fixes, n);
out:
	pthread_mutex_unlock(&li->mu);
	return n;
}

int lifetime_infer_set_level(struct lifetime_infer *li, uint64_t file, int level,
			     struct lifetime_fix *fix)
{
	struct li_file *x;
	int changed = 0;

	if (!li || level < 0)
		return 0;
	if (level >= LIFETIME_MAX_LEVELS)
		level = LIFETIME_MAX_LEVELS - 1;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (x && x->kind == LIFETIME_KIND_TABLE) {
		if (!x->exact)
			li->st.tables_exact++;
		if (x->level != level) {
			if (fix)
				*fix = (struct lifetime_fix){ file, x->level, level };
			changed = 1;
		}
		lv_take(li, x);
		x->level = (int8_t)level;
		x->exact = true;
		lv_give(li, x);
	}
	pthread_mutex_unlock(&li->mu);
	return changed;
}

void lifetime_infer_leveldb(struct lifetime_infer *li)
{
	if (!li)
		return;
	pthread_mutex_lock(&li->mu);
	li->leveldb = true;
	pthread_mutex_unlock(&li->mu);
}

int lifetime_infer_level(struct lifetime_infer *li, uint64_t file)
{
	int l = -1;

	if (!li)
		return -1;
	pthread_mutex_lock(&li->mu);
	struct li_file *x = file_find(li, file);
	if (x && x->kind == LIFETIME_KIND_TABLE)
		l = x->level;
	pthread_mutex_unlock(&li->mu);
	return l;
}

void lifetime_infer_level_classes(struct lifetime_infer *li,
				  uint8_t out[LIFETIME_MAX_LEVELS])
{
	if (!li) {
		lifetime_level_classes(NULL, NULL, out);
		return;
	}
	pthread_mutex_lock(&li->mu);
	lifetime_level_classes(&li->st.wal, li->st.level, out);
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_get_stats(struct lifetime_infer *li,
			      struct lifetime_infer_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!li)
		return;
	pthread_mutex_lock(&li->mu);
	*st = li->st;
	if (li->targets_dirty)
		learn_targets(li);
	for (int k = 0; k < LIFETIME_MAX_LEVELS; k++)
		st->level_targets[k] = (uint64_t)(k ? target_of(li, k) : li->target[k]);
	lifetime_level_classes(&li->st.wal, li->st.level, st->level_class);
	pthread_mutex_unlock(&li->mu);
}

int lifetime_infer_check(struct lifetime_infer *li)
{
	uint64_t n[LIFETIME_MAX_LEVELS] = { 0 }, b[LIFETIME_MAX_LEVELS] = { 0 };
	uint64_t e[LIFETIME_MAX_LEVELS] = { 0 };
	unsigned int unsealed = 0;
	int ret = 0;

	if (!li)
		return 0;
	pthread_mutex_lock(&li->mu);
	for (size_t i = 0; i < li->fcap; i++) {
		const struct li_file *x = &li->f[i];

		if (!x->file || x->dead)
			continue;
		if (x->kind == LIFETIME_KIND_TABLE && !x->sealed)
			unsealed++;
		if (!lv_counted(x))
			continue;
		n[x->level]++;
		if (x->exact)
			e[x->level]++;
		if (x->sealed)
			b[x->level] += x->bytes;
	}
	if (memcmp(n, li->lv_n, sizeof(n)) || memcmp(b, li->lv_bytes, sizeof(b)) ||
	    memcmp(e, li->lv_exact, sizeof(e)) ||
	    unsealed != li->nopen)
		ret = -EUCLEAN;
	for (unsigned int i = 0; i < li->nopen && !ret; i++) {
		const struct li_file *x = file_find(li, li->open[i]);

		if (!x || x->kind != LIFETIME_KIND_TABLE || x->sealed)
			ret = -EUCLEAN;
	}
	pthread_mutex_unlock(&li->mu);
	return ret;
}
