/* The on-disk profile format: the one definition that the writer (c_core) and the
 * reader (mf_print) both include, so they cannot drift apart.
 *
 * A profiled process image writes into   <MALLOC_FREQ_DIR>/malloc_freq.<pid>/
 *   process.<stamp>.mfp               one per process image (fork child, exec'd image)
 *   thread.<stamp>.<seq>.<tid>.mft    one per thread table: a thread's, then the next new
 *                                     thread's after it exited (mf_thread_header.threads)
 *   live.<stamp>.mfl                  the live heap (MALLOC_FREQ_LIVE, struct mf_live_header)
 * <stamp> is 16 hex digits, random per process image, so an exec'd image (same pid) or a
 * reused thread id never overwrites a file: every file is created O_EXCL.
 *
 * All integers are little-endian host order (files are read on the machine that wrote them).
 * Thread files are live MAP_SHARED mappings: a reader may see a file while it is written.
 * Entries are published key-last (release), segments are published by incrementing
 * nsegments last, so a reader never trusts a half-written entry or segment. */
#ifndef MF_FORMAT_H
#define MF_FORMAT_H

#include <stdint.h>

#define MF_FORMAT_VERSION 11u

#define MF_THREAD_MAGIC "MFREQTHR" /* 8 bytes, no NUL */
#define MF_PROCESS_MAGIC "MFREQPRC"
#define MF_MODULE_MAGIC 0x444f4d46u /* "FMOD" */

/* The allocation functions whose calls are counted exactly, per thread. */
enum mf_fn {
    MF_FN_MALLOC,
    MF_FN_CALLOC,
    MF_FN_REALLOC,
    MF_FN_POSIX_MEMALIGN,
    MF_FN_ALIGNED_ALLOC,
    MF_FN_MEMALIGN,
    MF_FN_VALLOC,
    MF_FN_PVALLOC,
    MF_FN_RUST_ALLOC,
    MF_FN_RUST_ALLOC_ZEROED,
    MF_FN_RUST_REALLOC,
    MF_FN_NEW,               /* C++ operator new, also its nothrow form */
    MF_FN_NEW_ARRAY,         /* operator new[], also nothrow */
    MF_FN_NEW_ALIGNED,       /* operator new(size, align_val_t), also nothrow */
    MF_FN_NEW_ARRAY_ALIGNED, /* operator new[](size, align_val_t), also nothrow */
    MF_FN_COUNT = 16 /* room for more without a version change */
};

#define MF_FN_NAMES                                                                     \
    "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign",         \
        "valloc", "pvalloc", "rust alloc", "rust alloc_zeroed", "rust realloc",          \
        "operator new", "operator new[]", "operator new aligned", "operator new[] aligned"
#define MF_FN_NAMED 15
/* By enum mf_fn: each named function's name, as the reports print it. */
static const char *const mf_fn_names[MF_FN_NAMED] = {MF_FN_NAMES};

/* Exact counters of every allocation call. The hot path counts in TLS; the thread's slow
 * path adds those counts here at least every 4,096 calls, and thread and process exit do
 * (c_core/mf_thread.c, mf_flush). */
struct mf_totals {
    uint64_t calls[MF_FN_COUNT];
    uint64_t bytes[MF_FN_COUNT];
};

/* The size histogram's classes: class 0 holds size 0; a size s >= 1 with its leading one at
 * bit e (2^e <= s < 2^(e+1)) is in class 1 + 4e + m, m the two bits below the leading one
 * (for e < 2, those of s << (2 - e)): four classes per doubling, each spanning at most a
 * quarter of it, up to class 192 (2^47 + 3 * 2^45 .. 2^48 - 1); class 193 holds every size
 * from 2^48 (256 TiB, more than any malloc can return) up. Classes 2, 3, 4, 6 and 8 stay
 * empty (sizes 1, 2 and 3 have a class each). */
#define MF_SIZE_CLASSES 194

static inline __attribute__((always_inline)) uint32_t mf_size_class(uint64_t size)
{
    /* Without branches (size 0 gives e 0, m 0): every recorded call takes its class, and
     * out of line with its branches it was 16 of the microbenchmark's instructions a call */
    uint32_t e = 63u - (uint32_t)__builtin_clzll(size | 1);
    uint32_t m = (uint32_t)(e >= 2 ? size >> (e - 2) : size << (2 - e)) & 3u;
    uint32_t c = 1 + 4 * e + m;
    return !size ? 0 : e >= 48 ? MF_SIZE_CLASSES - 1 : c;
}

/* The smallest size of class c (c < MF_SIZE_CLASSES); 0 for class 0. */
static inline uint64_t mf_size_class_lo(uint32_t c)
{
    if (!c)
        return 0;
    uint32_t e = (c - 1) / 4, m = (c - 1) % 4;
    return e >= 2 ? (uint64_t)(4 + m) << (e - 2) : (uint64_t)(4 + m) >> (2 - e);
}

/* One class of a thread's size histogram, counted from the samples (the slow path's, never
 * the hot path's): every sample, profiled or not, adds its weight w to calls, w * size to
 * bytes, w(w-1) to calls_var and w(w-1) * size^2 to bytes_var. Samples of weight 1 (the
 * exact stretch, MALLOC_FREQ_SAMPLE=1, calls at or above MALLOC_FREQ_LARGE) add no
 * variance: a class whose calls_var is 0 is exact. calls and bytes are unbiased estimates of
 * the calls of these sizes and their bytes; calls_var and bytes_var of their variances. */
struct mf_size_class {
    uint64_t calls;
    uint64_t bytes;
    uint64_t calls_var;
    double bytes_var;
};

#define MF_MAX_SEGMENTS 32
/* A frame node's bits for its caller (struct mf_frame_node); the 6 above them say where the
 * high half of its return address is: one of the thread header's MF_PC_HI_MAX pc_hi, or,
 * MF_NODE_WIDE, the node's second slot. */
#define MF_NODE_HI_SHIFT 26
#define MF_NODE_WIDE ((1u << (32 - MF_NODE_HI_SHIFT)) - 1u)
#define MF_PC_HI_MAX MF_NODE_WIDE

/* What a reader may rely on when it checks counts against each other:
 * - a sample is one call, so a table's samples never exceed the calls its header counts by
 *   more than the calls its threads have yet to add there: the hot path counts in TLS and
 *   adds to the header at least every MF_FLUSH_CALLS calls, the stack entry is written at
 *   once (a live file, or a process killed without its exit);
 * - a sample's weight is the interval it was drawn with: MALLOC_FREQ_SAMPLE, or in the
 *   default mode at most MF_INTERVAL_MAX;
 * - a thread writes a call to its header's totals before it adds the call's sample to a
 *   stack entry (samples, then calls), and the sample to the entry before the header's size
 *   histogram (an unprofiled sample to the header alone): a reader that copies the entries
 *   first and the header's counters after finds every counter at least what the entries it
 *   copied hold, but for the sample each thread is between the two (mf_print's
 *   mf_thread_counters). */
#define MF_FLUSH_CALLS 4096
#define MF_INTERVAL_MAX 100000u

/* The deepest stack the writer records (MALLOC_FREQ_DEPTH's maximum): a thread header's
 * max_depth and every entry's depth are at most this. */
#define MF_DEPTH_MAX 512u

/* The writer's table geometry: the thread header takes the first two pages; segment k holds
 * MF_SEG_ENTRIES_FIRST << min(2k, MF_SEG_GROWTH_STEPS) entry slots (each four times the one
 * before, up to the largest from the seventh on) and MF_NODES_PER_ENTRY times as many nodes,
 * rounded up to a page. Doubling, a table of stacks deep and distinct (24 new nodes each)
 * ran out of segments at 912,000 of them; growing fourfold, its 32 segments hold 27.6
 * million nodes, 1.1 million such stacks. */
#define MF_THREAD_HEADER_BYTES 8192u
#define MF_SEG_ENTRIES_FIRST 64u
#define MF_SEG_GROWTH_STEPS 12u
#define MF_SEG_ENTRIES_MAX (MF_SEG_ENTRIES_FIRST << MF_SEG_GROWTH_STEPS)
/* Node slots per entry slot: a new stack shares all but its last few frames with a stack met
 * before (a compile's 17,000 stacks of mean depth 40 took 2.3 new nodes each). */
#define MF_NODES_PER_ENTRY 4u
/* The largest thread file the writer can make: the header's two pages, then 32 segments of
 * at most 64 + 262,144 * (16 + 4 * 8) bytes rounded up to a page (12,587,008 bytes each), in
 * all 402,792,448 bytes (384 MiB). A reader may refuse anything bigger unread. */
#define MF_SEG_BYTES(entries)                                                              \
    (((MF_SEGMENT_ENTRIES_OFFSET +                                                         \
       (uint64_t)(entries) *                                                               \
           (sizeof(struct mf_entry) + MF_NODES_PER_ENTRY * sizeof(struct mf_frame_node))) + \
      4095u) & ~(uint64_t)4095u)
#define MF_SEG_BYTES_MAX MF_SEG_BYTES(MF_SEG_ENTRIES_MAX)
#define MF_THREAD_FILE_MAX (MF_THREAD_HEADER_BYTES + (uint64_t)MF_MAX_SEGMENTS * MF_SEG_BYTES_MAX)

/* Thread flags. */
#define MF_THREAD_FINISHED 1u /* the thread has exited (it may still allocate in TLS teardown) */
#define MF_THREAD_TABLE_FULL 2u /* a new stack could not be stored: counted as unprofiled */
#define MF_THREAD_SHARED 4u /* threads without a file of their own record here too */

/* Offset 0 of a thread file. */
struct mf_thread_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size; /* sizeof(struct mf_thread_header) */
    uint64_t stamp;       /* the process image's stamp (struct mf_process_header.stamp) */
    uint32_t pid;
    uint32_t tid;
    uint64_t seq;      /* n-th thread file of this process image, from 0 */
    uint64_t start_ns; /* CLOCK_REALTIME when the table was created */
    uint64_t last_ns;  /* CLOCK_REALTIME of the latest sample */
    uint32_t flags;    /* MF_THREAD_* */
    uint32_t max_depth;
    struct mf_totals totals; /* exact, every call */
    /* Samples that were due but could not be attributed to a stack: the profiler was
     * re-entered, the thread was inside a malloc_freq_pause() region, the table was full.
     * Their weight is an estimate like any stack's. */
    uint64_t unprofiled_samples;
    uint64_t unprofiled_calls;
    uint64_t unprofiled_bytes;
    uint64_t nsegments; /* published last, after the segment is initialized */
    uint64_t segment_offset[MF_MAX_SEGMENTS]; /* file offset of each segment */
    uint64_t segment_size[MF_MAX_SEGMENTS];   /* bytes */
    uint64_t unprofiled_calls_sq; /* the sum of the unprofiled samples' squared weights */
    /* Threads that recorded here: a thread's table goes on to the next new thread when it
     * exits, and a thread that cannot have a file of its own records into the process's
     * first table (then MF_THREAD_SHARED). tid and seq are the first thread's. */
    uint64_t threads;
    /* The estimated variance of unprofiled_bytes: the sum of w(w-1) * size^2, as a double. */
    double unprofiled_bytes_var;
    /* The size histogram: the thread's samples (stacks' and unprofiled ones) by size class,
     * and its calls made before start-up (weight 1). Written under the table's lock. */
    struct mf_size_class sizes[MF_SIZE_CLASSES];
    /* The high halves of the nodes' return addresses (a node keeps its low half and which of
     * these its high half is: MF_NODE_HI), each written before npc_hi is raised past it
     * (release), and that before a node uses it. */
    uint32_t npc_hi;
    uint32_t pc_hi[MF_PC_HI_MAX];
};

/* A segment: struct mf_segment_header, then `capacity` entry slots, then `node_capacity`
 * node slots. The writer appends both, a stack's entry and its new nodes always to the last
 * segment: segments are chained, never moved, and an entry or node refers only to nodes of
 * its own segment or earlier ones. An entry takes one slot, or four when it is wide
 * (MF_ENTRY_WIDE); entries are published in slot order, so a reader stops at a segment's
 * first slot whose key is 0 (what follows it was not there yet when that slot was read).
 *
 * A stack is a chain of nodes, one a frame: the entry names its innermost frame's node,
 * each node its caller's (parent), up to a node of depth 1 (parent 0). Stacks that share
 * their outer frames share those nodes: a new stack costs only its new frames (a tree of
 * (caller, return address) as heaptrack's), so a file holds about 2-3 nodes a stack, not
 * every stack's every frame. A node's parent was written before it (its reference is
 * smaller), so a chain ends; its length is the stack's depth, at most the thread's
 * max_depth. */
#define MF_SEGMENT_ENTRIES_OFFSET 64u /* where a segment's entries start */

struct mf_segment_header {
    uint32_t capacity;      /* entry slots */
    uint32_t node_capacity; /* node slots */
    uint64_t nodes_used;    /* node slots handed out so far (written by the owner thread) */
    uint64_t entries_used;  /* entry slots handed out */
    uint64_t reserved;
};

/* A node reference: 0 = none (the caller of a depth-1 node), else the node in segment k's
 * node slot i as (k << 20 | i) + 1 (a segment holds at most MF_SEG_ENTRIES_MAX *
 * MF_NODES_PER_ENTRY = 2^20 node slots, a file 32 segments: 26 bits). */
#define MF_NODE_REF(k, i) (((uint32_t)(k) << 20 | (uint32_t)(i)) + 1u)
#define MF_NODE_REF_SEG(r) (((r) - 1u) >> 20)
#define MF_NODE_REF_IDX(r) (((r) - 1u) & 0xfffffu)

/* A node: the frame's return address (the innermost frame's: its call site) and its caller.
 * `up` holds the caller's node in its low 26 bits (MF_NODE_REF, smaller than this node's;
 * 0 = none) and in its top 6 where the address's high half is: the thread header's pc_hi of
 * that number, or with MF_NODE_WIDE the next slot's pc_lo (a *wide* node takes two slots).
 * A process's code lies in a few 4 GiB regions (the executable's, the libraries'), so nodes
 * are 8 bytes, where 12 with the address whole made 60 % of a build's thread files; a file
 * whose code spans more regions than the header holds (JIT code) has wide nodes, never a
 * limit. */
struct mf_frame_node {
    uint32_t pc_lo;
    uint32_t up;
};
#define MF_NODE_PARENT(n) ((n)->up & ((1u << MF_NODE_HI_SHIFT) - 1))
#define MF_NODE_HI(n) ((n)->up >> MF_NODE_HI_SHIFT)

/* The slots node n takes: 2 if wide. */
static inline uint32_t mf_node_slots(const struct mf_frame_node *n)
{
    return MF_NODE_HI(n) == MF_NODE_WIDE ? 2u : 1u;
}

/* Node n's return address, of a file whose header is h (a reader checks first that its
 * high half is there: MF_NODE_HI(n) < h->npc_hi, or a wide node's second slot). */
static inline uint64_t mf_node_pc(const struct mf_thread_header *h, const struct mf_frame_node *n)
{
    uint32_t hi = MF_NODE_HI(n);
    return (uint64_t)(hi == MF_NODE_WIDE ? n[1].pc_lo : h->pc_hi[hi]) << 32 | n->pc_lo;
}

#define MF_ENTRY_TRUNCATED 1u /* the stack was deeper than max_depth */
/* The stack's samples were taken for their size (MALLOC_FREQ_LARGE), weight 1 each, outside
 * the countdown: every call at or above the threshold is one, so the counts are exact. The
 * same stack's other samples are another entry, without this flag. */
#define MF_ENTRY_LARGE 2u
/* The writer keys its entries by size class too: a stack that was sampled at sizes of k
 * classes has k entries, each with this flag and its samples' class in the flags' class
 * bits (MF_ENTRY_CLASS). An entry without the flag has no class (its samples' sizes are not
 * known per stack). */
#define MF_ENTRY_SIZED 4u
/* The entry's slot is followed by a struct mf_entry_var (three slots), its counts and its
 * samples' weights. An entry without it (narrow) holds samples of weight 1 only, its calls
 * and bytes in 32 bits each: its samples are its calls, its calls_sq its calls and its
 * bytes_var 0. The first sample of another weight at a narrow entry's stack, or one that
 * its counts could not hold, makes a wide entry with the same key, which takes that sample
 * and the later ones; the narrow one keeps what it had, and a reader adds the two. An exact
 * stretch or an exact run (MALLOC_FREQ_SAMPLE=1) writes narrow entries only, but for a
 * stack of a module epoch above 0, which only a wide entry holds. */
#define MF_ENTRY_WIDE 8u
/* An entry's flags, as mf_entry_flags gives them and the writer keys entries by: the bits
 * above, then in bits 4-11 of a sized entry mf_size_class of its samples' sizes, and in the
 * upper 20 the module epoch it was recorded in. The epoch grows when a library is found
 * mapped where another one was: its stacks and the old one's are told apart, and each is
 * symbolized with its own module (mf_module_record). */
#define MF_ENTRY_CLASS_SHIFT 4
#define MF_ENTRY_CLASS(flags) (((flags) >> MF_ENTRY_CLASS_SHIFT) & 0xffu)
#define MF_ENTRY_EPOCH_SHIFT 12
/* The flags that tell stacks apart (a reader's stack: all its classes, narrow and wide). */
#define MF_ENTRY_STACK_FLAGS(flags) \
    ((flags) & ~(MF_ENTRY_SIZED | MF_ENTRY_WIDE | (0xffu << MF_ENTRY_CLASS_SHIFT)))

/* An entry slot: 16 bytes, 4-aligned. The stack's depth is its chain's length (0 without a
 * node). 98 % of a build's entries are narrow, and 57 % hold a single call: a slot of 32
 * bytes (the whole 64-bit key, 64-bit counts) made 40 % of the build's run directory, and
 * one of 20 (the key's low 32 bits, and the flags a word of their own) half its thread
 * files' bytes. */
struct mf_entry {
    /* Bits 0-23: the low 24 bits of the writer's key hash, never all 0 (its index holds the
     * top 38: the two check 62 of the 64); bits 24-31: the size class (MF_ENTRY_CLASS of its
     * flags). 0 = not there yet: stored last, with release. */
    uint32_t key;
    /* Bits 0-25: MF_NODE_REF of its innermost frame (0 for a stack of no frames); bits 26-29
     * its flags' low four (MF_ENTRY_TRUNCATED .. MF_ENTRY_WIDE). */
    uint32_t node;
    uint32_t calls; /* narrow: its calls (its samples, each of weight 1); wide: 0 */
    uint32_t bytes; /* narrow: its bytes; wide: 0 */
};
#define MF_ENTRY_KEY_BITS 24
#define MF_ENTRY_NODE_BITS 26

/* The three slots after a wide entry's (4-aligned: read its fields with memcpy). The epoch
 * is written before the entry is published, the counts after. */
struct mf_entry_var {
    uint64_t calls; /* estimated calls: the sum of the samples' weights (exact when == samples) */
    uint64_t bytes; /* estimated bytes: the sum of weight * size */
    uint64_t samples; /* samples taken at this stack */
    /* The sum of the samples' squared weights: calls_sq - calls estimates the variance of
     * `calls` (each sample of weight w adds w(w-1)); equal to calls for exact counts. */
    uint64_t calls_sq;
    /* The estimated variance of `bytes`: the sum over samples of w(w-1) * size^2, as an IEEE
     * double (the product overflows 64 bits); 0 for exact counts. */
    double bytes_var;
    uint32_t epoch; /* the module epoch of its stack (its flags' upper 20 bits) */
    uint32_t reserved;
} __attribute__((packed, aligned(4)));
#define MF_ENTRY_VAR_SLOTS 3u /* sizeof(struct mf_entry_var) / sizeof(struct mf_entry) */

/* Entry e's innermost node (MF_NODE_REF). */
static inline uint32_t mf_entry_node(const struct mf_entry *e)
{
    return e->node & ((1u << MF_ENTRY_NODE_BITS) - 1);
}

static inline int mf_entry_wide(const struct mf_entry *e)
{
    return (e->node >> MF_ENTRY_NODE_BITS & MF_ENTRY_WIDE) != 0;
}

/* Entry e's flags (MF_ENTRY_*, its class and epoch), of a slot whose key a reader found set
 * (a wide entry's epoch is there then). */
static inline uint32_t mf_entry_flags(const struct mf_entry *e)
{
    uint32_t f = (e->node >> MF_ENTRY_NODE_BITS) & 0xfu;
    f |= (e->key >> MF_ENTRY_KEY_BITS) << MF_ENTRY_CLASS_SHIFT;
    if (f & MF_ENTRY_WIDE) {
        uint32_t epoch;
        __builtin_memcpy(&epoch, (const char *)(e + 1) + __builtin_offsetof(struct mf_entry_var, epoch),
                         sizeof epoch);
        f |= epoch << MF_ENTRY_EPOCH_SHIFT;
    }
    return f;
}

/* The slots an entry takes. */
static inline uint32_t mf_entry_slots(int wide)
{
    return wide ? 1 + MF_ENTRY_VAR_SLOTS : 1;
}

/* A segment's entries and nodes: the writer's mapping, or a reader's copy of the file. */
static inline struct mf_entry *mf_segment_entries(const struct mf_segment_header *seg)
{
    return (struct mf_entry *)(uintptr_t)((const char *)seg + MF_SEGMENT_ENTRIES_OFFSET);
}

static inline struct mf_frame_node *mf_segment_nodes(const struct mf_segment_header *seg)
{
    return (struct mf_frame_node *)(uintptr_t)(mf_segment_entries(seg) + seg->capacity);
}

/* Process flags. */
#define MF_PROCESS_EXITED 1u /* end_ns is valid: the process ran its exit handlers */
/* The preload library's hot path reached its TLS at a fixed offset from %fs, without a GOT
 * load (c_core/mf_core.h, MF_TLS_ALIGN): what its overhead was measured with. */
#define MF_PROCESS_TLS_DIRECT 2u
/* PYTHONMALLOC was malloc or malloc_debug at start-up: a CPython in this image sends every
 * object allocation to malloc, not only the large ones (pymalloc serves the rest from its
 * own pools, which the profile cannot see). */
#define MF_PROCESS_PYTHONMALLOC 4u
/* The exact stretch has no time cap (MF_EXACT_NS_MAX): it ends after exact_calls calls.
 * Without this flag (older cores) it also ended after MF_EXACT_NS_MAX of recording. */
#define MF_PROCESS_EXACT_BY_CALLS 8u

#define MF_EXACT_NS_MAX 5000000u /* 5 ms: the exact stretch's time cap in older cores */
#define MF_UNWIND_LIBUNWIND 0u
#define MF_UNWIND_FP 1u

/* Offset 0 of a process file; module records follow, appended as libraries are loaded. */
struct mf_process_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size; /* sizeof(struct mf_process_header) */
    uint64_t stamp;
    uint32_t pid;
    uint32_t ppid;
    uint64_t start_ns; /* CLOCK_REALTIME at start-up */
    uint64_t end_ns;   /* CLOCK_REALTIME at exit; valid when flags & MF_PROCESS_EXITED */
    uint32_t flags;
    uint32_t unwinder;        /* MF_UNWIND_* */
    /* Mean calls between samples after the exact stretch: MALLOC_FREQ_SAMPLE; 1 = exact;
     * 0 = default mode, where each thread sets it so that samples take cost_share_ppm of
     * its time. */
    uint64_t sample_interval;
    /* The exact stretch: the process's first exact_calls calls are recorded exactly (without
     * MF_PROCESS_EXACT_BY_CALLS, fewer if MF_EXACT_NS_MAX of recording time came first). */
    uint64_t exact_calls;
    uint32_t max_depth;
    uint32_t cost_share_ppm;
    char exe[256]; /* /proc/self/exe, NUL-terminated (truncated if longer) */
    /* Written at exit (MF_PROCESS_EXITED): the calls the exact stretch recorded, fewer than
     * exact_calls when the process made fewer calls, when threads still running held part
     * of the stretch, or (without MF_PROCESS_EXACT_BY_CALLS) when its time cap ended it. */
    uint64_t exact_recorded;
    /* MALLOC_FREQ_LARGE: every call of at least this many bytes is recorded, with weight 1,
     * outside the sampled stream; 0 = off. */
    uint64_t large_bytes;
    /* Written at exit: the unwind rules this process image read from its modules' CFI, and
     * those it took from the rule cache of earlier processes instead (MALLOC_FREQ_RULE_CACHE). */
    uint64_t rules_learned;
    uint64_t rules_loaded;
    /* Default mode with an exact stretch: the k-th sample past the stretch was drawn at
     * k / ramp_step calls (at least 1, at most the budget's interval) up to the
     * ramp_samples-th, then at the budget's. Both 0: no ramp (a writer before them). */
    uint32_t ramp_samples;
    uint32_t ramp_step;
};
/* A reader takes a header_size of at least sizeof(struct mf_process_header), a multiple of
 * 8: fields a later writer appends without a new version are skipped. */

/* Appended to the process file, one write() each. */
struct mf_module_record {
    uint32_t magic;       /* MF_MODULE_MAGIC */
    uint32_t record_size; /* bytes of this record including path, a multiple of 8 */
    uint64_t bias;        /* load bias: runtime address = file virtual address + bias */
    uint64_t lo;          /* runtime address range of the module's PT_LOAD segments */
    uint64_t hi;
    uint32_t build_id_len; /* 0 if the module has none */
    uint32_t path_len;     /* bytes of path, excluding its NUL */
    /* The module epoch when it was recorded: stacks of an earlier epoch (their entry's
     * flags >> MF_ENTRY_EPOCH_SHIFT) never lie in it, even where its range overlaps an
     * older module's (one unloaded, another mapped at its address). */
    uint32_t epoch;
    uint32_t reserved;
    uint8_t build_id[32];
    /* char path[path_len + 1], then padding to 8 bytes */
};

/* ---- the live heap (MALLOC_FREQ_LIVE=sampled|all): live.<stamp>.mfl -------------------
 * One file per process image, made at its first recorded allocation: a header, then an
 * open-addressing table of the sampled allocations still alive (keyed by address, linear
 * probing, at most MF_LIVE_PROBES slots from the home slot), then a table of per-stack
 * lifetime statistics of the sampled allocations freed so far (keyed by stack reference).
 * Both are written by any thread, lock-free: a record's state is claimed with a CAS and
 * published last (release), so a reader takes only MF_LIVE_RECORD_LIVE records whose state
 * it read before their fields (acquire). Statistics only grow: a reader may see one free
 * half-added (its count without its histogram bucket yet), never a torn word. */
#define MF_LIVE_MAGIC "MFREQLIV"
#define MF_LIVE_PROBES 64u
#define MF_LIVE_SAMPLED 1u /* MALLOC_FREQ_LIVE=sampled: the sampled allocations, weighted */
#define MF_LIVE_ALL 2u     /* MALLOC_FREQ_LIVE=all: every allocation, weight 1 */
#define MF_LIVE_FULL 1u    /* header flag: an allocation found no free slot (see dropped) */
#define MF_LIVE_STATS_FULL 2u /* a stack found no statistics slot (see stats_dropped) */

/* A stack reference: the thread file (its seq), the segment and the entry index of the
 * entry the allocation's sample went to. */
#define MF_LIVE_REF(seq, seg, idx) ((uint64_t)(seq) << 32 | (uint64_t)(seg) << 24 | (idx))
#define MF_LIVE_REF_SEQ(r) ((r) >> 32)
#define MF_LIVE_REF_SEG(r) ((uint32_t)((r) >> 24) & 0xffu)
#define MF_LIVE_REF_IDX(r) ((uint32_t)(r) & 0xffffffu)

struct mf_live_header {
    char magic[8];
    uint32_t version; /* MF_FORMAT_VERSION */
    uint32_t header_size;
    uint64_t stamp; /* the process image's */
    uint32_t pid;
    uint32_t mode; /* MF_LIVE_SAMPLED or MF_LIVE_ALL */
    uint32_t capacity;       /* records, a power of two */
    uint32_t stats_capacity; /* statistics slots, a power of two */
    uint64_t records_offset; /* file offsets of the two tables */
    uint64_t stats_offset;
    uint32_t flags; /* MF_LIVE_FULL, MF_LIVE_STATS_FULL */
    /* The largest mean interval the sampled stream ran at when a sample was recorded (its
     * weight, or the weight in force for a large call's sample), at most UINT32_MAX; 1 or 0
     * while every call was recorded. A stack's unsampled calls may be about this many: a
     * reader's error bar is at least one sample of it. */
    uint32_t interval_max;
    uint64_t dropped;       /* allocations (weighted) not recorded: no free slot */
    uint64_t stats_dropped; /* frees (weighted) whose stack found no statistics slot */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC and CLOCK_REALTIME when the file was made: */
    uint64_t start_real_ns; /* a record's alloc_ns in real time is alloc_ns - mono + real */
};

#define MF_LIVE_RECORD_EMPTY 0u
#define MF_LIVE_RECORD_BUSY 1u /* being written or removed */
#define MF_LIVE_RECORD_LIVE 2u
#define MF_LIVE_RECORD_FREED 3u /* a tombstone: probing goes on past it */

struct mf_live_record {
    uint32_t state;  /* MF_LIVE_RECORD_*, stored last with release semantics */
    uint32_t reserved;
    uint64_t addr;   /* what the allocator returned */
    uint64_t size;   /* bytes asked for */
    uint64_t weight; /* the sample's weight: the allocations it stands for */
    uint64_t stack;  /* MF_LIVE_REF of its stack's entry */
    uint64_t thread; /* the allocating thread: its number in the process image, from 0 */
    uint64_t alloc_ns;   /* CLOCK_MONOTONIC at the allocation */
    uint64_t alloc_call; /* the allocating thread's allocation calls, this one included */
};

/* Lifetime buckets: bucket 0 holds lifetime 0, bucket b >= 1 lifetimes in 2^(b-1) .. 2^b-1;
 * the last one everything longer. */
#define MF_LIVE_CALL_BUCKETS 40u
#define MF_LIVE_NS_BUCKETS 48u

/* The freed sampled allocations of one stack; every count is weighted (the sum of the
 * samples' weights), so each estimates the allocations it describes. */
struct mf_live_stats {
    uint64_t key;   /* MF_LIVE_REF + 1; 0 = empty slot, claimed with a CAS */
    uint64_t freed; /* frees */
    uint64_t freed_samples;
    uint64_t freed_bytes;
    /* Freed by the allocating thread before it made another allocation call (heaptrack's
     * temporary allocation). */
    uint64_t temporary;
    /* Freed by the allocating thread: life_calls counts these only (another thread's calls
     * are not the allocating thread's). */
    uint64_t same_thread;
    uint64_t reserved[2];
    uint64_t life_calls[MF_LIVE_CALL_BUCKETS]; /* the allocating thread's calls in between */
    uint64_t life_ns[MF_LIVE_NS_BUCKETS];      /* nanoseconds alive */
};

/* The writer's live file geometry: the header's page, the records at MF_LIVE_RECORDS_OFFSET
 * (MF_LIVE_CAPACITY_SAMPLED or MF_LIVE_CAPACITY_ALL of them), then MF_LIVE_STATS_CAPACITY
 * statistics slots, each table rounded up to a page: at most 4,096 + 16,777,216 + 3,145,728
 * = 19,927,040 bytes. A reader may refuse anything bigger unread. */
#define MF_LIVE_CAPACITY_SAMPLED (1u << 16)
#define MF_LIVE_CAPACITY_ALL (1u << 18)
#define MF_LIVE_STATS_CAPACITY (1u << 12)
#define MF_LIVE_RECORDS_OFFSET 4096u
#define MF_LIVE_PAGES(n) (((uint64_t)(n) + 4095u) & ~(uint64_t)4095u)
#define MF_LIVE_FILE_MAX                                                                    \
    (MF_LIVE_RECORDS_OFFSET +                                                               \
     MF_LIVE_PAGES((uint64_t)MF_LIVE_CAPACITY_ALL * sizeof(struct mf_live_record)) +        \
     MF_LIVE_PAGES((uint64_t)MF_LIVE_STATS_CAPACITY * sizeof(struct mf_live_stats)))

/* ---- the unwind rule cache: <base>/.malloc_freq-rules.<euid>/<build id>.rules ----------
 * The rules a process learned for one build of a module, for the next process that loads it
 * (c_core/mf_rule_cache.c). Not a profile: mf_print never reads it. */
#define MF_RC_MAGIC "MFRULES1"
#define MF_RC_VERSION 1u

/* A cache file: this header, then `count` pairs (return address - load bias, rule without
 * its epoch, mf_unwind.c), by address, no two the same. */
struct mf_rc_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint64_t count;
    uint64_t lo, hi;  /* the module's load segments, relative to its load bias */
    uint64_t layout;  /* its load segments' and CFI table's program headers, hashed */
    uint32_t build_id_len;
    uint32_t reserved;
    uint8_t build_id[32];
    uint64_t checksum; /* of the whole file, this field taken as 0 */
};

/* ---- the timeline: timeline.mftl in a run (or process) directory ------------------------
 * The run's counts over time: written by mf_print --record (which the launcher runs for the
 * program's lifetime), read by mf_print --timeline and --format html. A header, then points:
 * each a snapshot's growth over the one before it, struct mf_tl_point followed by its
 * nstacks struct mf_tl_stack records, sparse: only the stacks that grew. A stack is named
 * by its identity as the reader keys it (its process image's stamp, depth, flags without
 * MF_ENTRY_SIZED, and return addresses), hashed (mf_tl_id below): the flame graph of a time
 * window is the final profile's stacks weighed by the window's records.
 *
 * The recorder snapshots every interval_ns, starting at MF_TL_INTERVAL_NS, and appends a
 * point (one write). When the file holds MF_TL_POINTS_MAX points or more than
 * MF_TL_RECORDS_MAX records it merges adjacent points pairwise (their records summed per
 * stack), doubles the interval, and replaces the file whole (a new file, 0600, renamed over
 * it): a run of any length keeps a bounded file, at most MF_TL_FILE_MAX bytes (an hour at
 * 100 ms is 36,000 snapshots; the file holds at most 256 points of 25.6 s then). A point
 * keeps at most MF_TL_POINT_STACKS_MAX records, its largest by calls; the rest are in its
 * other_calls and other_bytes. Each point carries a checksum: a reader takes the points
 * before the first that is cut short or damaged. */
#define MF_TL_MAGIC "MFREQTML"
/* Version 2 names stacks by mf_tl_id and packs a point's records (MF_TL_POINT_RAW says
 * where it did not); version 1 (still read) named them by FNV-1a (64 bits) of the stamp,
 * then (flags << 32 | depth), then the frames innermost first, as little-endian words, and
 * kept every point's records as struct mf_tl_stack. */
#define MF_TL_VERSION 2u
#define MF_TL_FILE "timeline.mftl"
#define MF_TL_POINT_MAGIC 0x544e5046u /* "FPNT" */
#define MF_TL_INTERVAL_NS 100000000u  /* 100 ms: the first interval */
#define MF_TL_POINTS_MAX 256u
#define MF_TL_POINT_STACKS_MAX 65536u
#define MF_TL_RECORDS_MAX (1u << 20)

struct mf_tl_header {
    char magic[8];
    uint32_t version;     /* MF_TL_VERSION */
    uint32_t header_size; /* sizeof(struct mf_tl_header) */
    uint64_t start_ns;    /* CLOCK_REALTIME: the first point's start */
    uint64_t interval_ns; /* the snapshot interval when the file was written */
    uint32_t points_max;  /* MF_TL_POINTS_MAX */
    uint32_t reserved;
};

#define MF_TL_POINT_LAST 1u /* the recorder's last snapshot: the run ended, or it was stopped */
/* Its records follow as struct mf_tl_stack. Without it (version 2) they follow packed, each
 * its id as 8 little-endian bytes, then calls, bytes and var as varints (LEB128, as protocol
 * buffers write them): 12 bytes a record in a build's timeline instead of 32. The writer
 * packs a point only where that is shorter, so the file's bound holds. */
#define MF_TL_POINT_RAW 2u

struct mf_tl_point {
    uint32_t magic;   /* MF_TL_POINT_MAGIC */
    uint32_t nstacks; /* records that follow, at most MF_TL_POINT_STACKS_MAX */
    uint64_t start_ns, end_ns; /* CLOCK_REALTIME: the snapshots it lies between */
    uint64_t calls, bytes;     /* exact: the growth of the thread headers' totals */
    uint64_t other_calls, other_bytes; /* of stacks beyond the point's records */
    uint32_t processes;        /* processes running at end_ns (one exec'd runs on in its
                                * next image, written or not) */
    uint32_t flags;            /* MF_TL_POINT_* */
    /* FNV-1a (64 bits) of this point with checksum 0, then of its records as struct
     * mf_tl_stack (unpacked) */
    uint64_t checksum;
};

/* A stack's growth in a point: id 0 is [not profiled] (the unprofiled counts). calls and
 * bytes are estimates as the stack's own are; var is the growth of their variance (the sum
 * of w(w-1) over the samples, mf_entry.calls_sq - calls). */
struct mf_tl_stack {
    uint64_t id;
    uint64_t calls, bytes, var;
};

/* A stack's id: a chain over its frames from the outermost in, h = mf_tl_id_step(h, pc)
 * from MF_TL_ID_SEED, then the stamp and (flags << 32 | depth) stepped in the same way; 0
 * becomes 1. A frame's chain value is its node's, which its callees share: a reader of the
 * stack tables computes it once a node, not once a frame of every stack (the recorder's
 * time went into hashing a build's 10^6 stacks of ~40 frames at every snapshot). */
#define MF_TL_ID_SEED 0x6a09e667f3bcc908ull
static inline uint64_t mf_tl_id_step(uint64_t h, uint64_t word)
{
    uint64_t x = (h ^ word) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return x ^ x >> 32;
}
static inline uint64_t mf_tl_id(uint64_t chain, uint64_t stamp, uint32_t flags, uint32_t depth)
{
    uint64_t id = mf_tl_id_step(mf_tl_id_step(chain, stamp), (uint64_t)flags << 32 | depth);
    return id ? id : 1; /* 0 is [not profiled] */
}

#define MF_TL_FILE_MAX                                                                      \
    (sizeof(struct mf_tl_header) + (uint64_t)MF_TL_POINTS_MAX * sizeof(struct mf_tl_point) + \
     (uint64_t)(MF_TL_RECORDS_MAX + MF_TL_POINT_STACKS_MAX) * sizeof(struct mf_tl_stack))

#endif
