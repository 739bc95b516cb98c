/* The sampling decision: the random stream, the exact stretch's budget, the geometric
 * countdown and the default mode's cost budget (mf_adapt). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <unistd.h>

#include "malloc_freq.h"
#include "mf_internal.h"
#include "mf_math.h"

uint64_t mf_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void mf_rng_seed(struct mf_slot *s, uint64_t seq)
{
    uint64_t x = mf_opt.seed_set ? mf_opt.seed : mf_stamp ^ mf_now_ns();
    x ^= seq * 0xd1b54a32d192ed03u;
    s->rng[0] = mf_splitmix(&x);
    s->rng[1] = mf_splitmix(&x) | 1;
}

static uint64_t mf_rng_next(struct mf_slot *s)
{
    uint64_t s0 = s->rng[0], s1 = s->rng[1], r = s0 + s1;
    s1 ^= s0;
    s->rng[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
    s->rng[1] = (s1 << 37) | (s1 >> 27);
    return r;
}

/* The exact stretch is the process's first mf_opt.exact_calls calls (100,000), a cap
 * counted in calls, not in time: a time cap (5 ms until this version) ran out on a busy
 * machine, or on a short run's first, cold samples, and left a short run sampled. */
bool mf_take_exact(struct mf_thread *t)
{
    if (t->exact_left)
        return true;
    int64_t left = __atomic_load_n(&mf_exact_budget, __ATOMIC_RELAXED);
    while (left > 0) {
        int64_t take = left < MF_EXACT_CHUNK ? left : MF_EXACT_CHUNK;
        if (__atomic_compare_exchange_n(&mf_exact_budget, &left, left - take, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&mf_exact_taken, (uint64_t)take, __ATOMIC_RELAXED);
            t->exact_left = (uint64_t)take;
            return true;
        }
    }
    return false;
}

/* The default mode's interval for the process's k-th sample past its exact stretch (n: the
 * budget's): k / MF_RAMP_STEP calls, at least 1 and at most n, and n from the
 * MF_RAMP_SAMPLES-th on. Jumping from 1 to n where the stretch ended left a compile's last
 * 146,000 calls about 230 samples, most of weight ~1,200, and its largest sites scattered
 * by 19-31 % from run to run. On the ramp the same calls take ~1,450 samples, the last of
 * weight ~220, and a site's relative error falls as the run grows, until the ramp ends. Its
 * price is bounded: at most MF_RAMP_SAMPLES samples a process beyond the budget's, and
 * dense samples are cheap, as they share most of their stack (a compile's samples past its
 * stretch took 3.6 ms instead of 1.6-2.1). Each sample weighs the interval it was drawn
 * with, so the estimates stay unbiased and their variances right. */
static uint64_t mf_ramp(uint64_t n)
{
    if (__atomic_load_n(&mf_ramp_taken, __ATOMIC_RELAXED) >= MF_RAMP_SAMPLES)
        return n;
    uint64_t k = __atomic_add_fetch(&mf_ramp_taken, 1, __ATOMIC_RELAXED);
    uint64_t m = k / MF_RAMP_STEP;
    return k >= MF_RAMP_SAMPLES || m >= n ? n : m > 1 ? m : 1;
}

/* Draws the calls until the next sample and sets the weight that sample will carry: the
 * mean interval in force now, so each call counts 1/p in expectation (unbiased, also when
 * the interval changes from one sample to the next: it is fixed before the calls it covers). */
int64_t mf_next_countdown(struct mf_thread *t)
{
    uint64_t n = mf_opt.sample_interval ? mf_opt.sample_interval : t->slot->interval;
    t->exact = false;
    if (n > 1 && mf_take_exact(t)) {
        t->exact_left--;
        t->exact = true;
        n = 1;
    } else if (n > 1 && mf_ramps()) {
        n = mf_ramp(n);
    }
    if (n <= 1) {
        t->weight = t->drawn = 1;
        return 1;
    }
    t->weight = n;
    /* Geometric with p = 1/n: the calls up to and including the next sampled one. */
    struct mf_slot *s = t->slot;
    double u = ((double)(mf_rng_next(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    if (s->draw_n != n) { /* a fixed MALLOC_FREQ_SAMPLE keeps it; the default mode's moves */
        s->draw_n = n;
        s->draw_log_q = mf_log1p(-1.0 / (double)n);
    }
    double c = mf_geometric_by(u, s->draw_log_q);
    int64_t k = c < (double)MF_COUNTDOWN_OFF ? (int64_t)c : MF_COUNTDOWN_OFF;
    t->drawn = (uint64_t)k;
    return k;
}

/* Default mode: sets the mean interval so that samples take about MF_COST_SHARE of the
 * thread's time: interval = time per sample / (share * program time per call). Recording
 * a call costs the same whether malloc takes 10 ns or 1 us, so a program that allocates
 * rarely is recorded exactly (interval 1) and a malloc-bound one sparsely.
 * The program's time per call is its time over its calls since the last few samples (sums
 * decayed by 3/4 a sample, the profiler's own time left out): a ratio of sums, so that the
 * samples take the share of the time on average also where calls come in bursts. Following
 * the fastest recent rate instead (until this version) sized a compiler's interval by its
 * densest bursts. A burst after a quiet spell still runs at the quiet spell's interval only
 * for a few dozen samples: the spell's weight falls by a quarter at each.
 * The time per sample counts every sample, a new stack's too (its table insert and the
 * rules it learns), or the share is not kept where new stacks are most samples: counting
 * only known stacks, cc1's samples were five times as many, its largest sites twice as
 * accurate, and a build with MALLOC_FREQ_EXACT=0 took 10 % longer. The first estimate is a
 * known stack's (a thread's first samples, all new, cost up to 100 us), and one measurement
 * may at most double it (the thread may have been preempted); the interval at most doubles
 * from one sample on. */
void mf_adapt(struct mf_thread *t, uint64_t t0, uint64_t t1, bool new_stack)
{
    struct mf_slot *s = t->slot;
    double cost = (double)(t1 - t0);
    if (s->sample_ns > 0) {
        if (cost > 2 * s->sample_ns)
            cost = 2 * s->sample_ns;
        s->sample_ns = (3 * s->sample_ns + cost) / 4;
    } else if (!new_stack) {
        s->sample_ns = cost;
    }
    if (s->sample_end_ns && t0 > s->sample_end_ns && s->sample_ns > 0) {
        s->span_ns = 0.75 * s->span_ns + (double)(t0 - s->sample_end_ns);
        s->span_calls = 0.75 * s->span_calls + (double)t->drawn;
        double n = s->sample_ns * s->span_calls / (MF_COST_SHARE * s->span_ns);
        double most = s->interval ? 2.0 * (double)s->interval : 2.0;
        n = n > most ? most : n;
        s->interval = n < 1 ? 1 : n > MF_INTERVAL_MAX ? MF_INTERVAL_MAX : (uint64_t)n;
    }
    s->sample_end_ns = t1;
}
