/* Prints build/mf_format.py: the on-disk format of c_core/mf_format.h as the Python tests and
 * the bench read it. Each struct becomes a class holding its size, each field's offset, and a
 * struct module format of the whole (a field the tests do not unpack is raw bytes there), so
 * no Python file writes an offset by hand. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "mf_format.h"

struct field {
    const char *name; /* a nested member's path, "totals.calls", becomes totals_calls */
    size_t offset, size;
    const char *format; /* struct module code of the whole field, NULL: raw bytes */
};

#define FIELD(s, f, fmt) {#f, offsetof(struct s, f), sizeof(((struct s *)0)->f), fmt}
#define FIELDS(a) a, sizeof(a) / sizeof((a)[0])

static int bad;

static void print_struct(const char *name, size_t size, const struct field *f, size_t n)
{
    char format[256] = "<";
    size_t at = 0;
    printf("\n\nclass %s:\n    size = %zu\n", name, size);
    for (size_t i = 0; i < n; i++) {
        char pyname[64];
        snprintf(pyname, sizeof pyname, "%s", f[i].name);
        for (char *c = pyname; *c; c++)
            if (*c == '.')
                *c = '_';
        printf("    %s = %zu\n", pyname, f[i].offset);
        if (f[i].offset < at) {
            fprintf(stderr, "format_offsets: %s.%s overlaps the field before it\n", name, f[i].name);
            bad = 1;
        }
        char part[32];
        size_t used = strlen(format);
        if (f[i].offset > at)
            used += (size_t)snprintf(format + used, sizeof format - used, "%zux", f[i].offset - at);
        if (f[i].format)
            snprintf(part, sizeof part, "%s", f[i].format);
        else
            snprintf(part, sizeof part, "%zus", f[i].size);
        snprintf(format + used, sizeof format - used, "%s", part);
        at = f[i].offset + f[i].size;
    }
    if (at < size)
        snprintf(format + strlen(format), sizeof format - strlen(format), "%zux", size - at);
    printf("    format = \"%s\"\n    fields = (", format);
    for (size_t i = 0; i < n; i++) {
        const char *dot = strrchr(f[i].name, '.');
        printf("\"%s\"%s", dot ? dot + 1 : f[i].name, i + 1 < n ? ", " : ")\n");
    }
}

int main(void)
{
    static const struct field thread[] = {
        FIELD(mf_thread_header, magic, "8s"),
        FIELD(mf_thread_header, version, "I"),
        FIELD(mf_thread_header, header_size, "I"),
        FIELD(mf_thread_header, stamp, "Q"),
        FIELD(mf_thread_header, pid, "I"),
        FIELD(mf_thread_header, tid, "I"),
        FIELD(mf_thread_header, seq, "Q"),
        FIELD(mf_thread_header, start_ns, "Q"),
        FIELD(mf_thread_header, last_ns, "Q"),
        FIELD(mf_thread_header, flags, "I"),
        FIELD(mf_thread_header, max_depth, "I"),
        FIELD(mf_thread_header, totals.calls, NULL),
        FIELD(mf_thread_header, totals.bytes, NULL),
        FIELD(mf_thread_header, unprofiled_samples, "Q"),
        FIELD(mf_thread_header, unprofiled_calls, "Q"),
        FIELD(mf_thread_header, unprofiled_bytes, "Q"),
        FIELD(mf_thread_header, nsegments, "Q"),
        FIELD(mf_thread_header, segment_offset, NULL),
        FIELD(mf_thread_header, segment_size, NULL),
        FIELD(mf_thread_header, unprofiled_calls_sq, "Q"),
        FIELD(mf_thread_header, threads, "Q"),
        FIELD(mf_thread_header, unprofiled_bytes_var, "d"),
        FIELD(mf_thread_header, sizes, NULL),
        FIELD(mf_thread_header, npc_hi, "I"),
        FIELD(mf_thread_header, pc_hi, NULL),
    };
    static const struct field size_class[] = {
        FIELD(mf_size_class, calls, "Q"),
        FIELD(mf_size_class, bytes, "Q"),
        FIELD(mf_size_class, calls_var, "Q"),
        FIELD(mf_size_class, bytes_var, "d"),
    };
    static const struct field segment[] = {
        FIELD(mf_segment_header, capacity, "I"),
        FIELD(mf_segment_header, node_capacity, "I"),
        FIELD(mf_segment_header, nodes_used, "Q"),
        FIELD(mf_segment_header, entries_used, "Q"),
        FIELD(mf_segment_header, reserved, "Q"),
    };
    static const struct field entry[] = {
        FIELD(mf_entry, key, "I"),
        FIELD(mf_entry, node, "I"),
        FIELD(mf_entry, calls, "I"),
        FIELD(mf_entry, bytes, "I"),
    };
    static const struct field entry_var[] = {
        FIELD(mf_entry_var, calls, "Q"),
        FIELD(mf_entry_var, bytes, "Q"),
        FIELD(mf_entry_var, samples, "Q"),
        FIELD(mf_entry_var, calls_sq, "Q"),
        FIELD(mf_entry_var, bytes_var, "d"),
        FIELD(mf_entry_var, epoch, "I"),
        FIELD(mf_entry_var, reserved, "I"),
    };
    static const struct field frame_node[] = {
        FIELD(mf_frame_node, pc_lo, "I"),
        FIELD(mf_frame_node, up, "I"),
    };
    static const struct field rule_cache[] = {
        FIELD(mf_rc_header, magic, "8s"),
        FIELD(mf_rc_header, version, "I"),
        FIELD(mf_rc_header, header_size, "I"),
        FIELD(mf_rc_header, count, "Q"),
        FIELD(mf_rc_header, checksum, "Q"),
    };
    static const struct field process[] = {
        FIELD(mf_process_header, magic, "8s"),
        FIELD(mf_process_header, version, "I"),
        FIELD(mf_process_header, header_size, "I"),
        FIELD(mf_process_header, stamp, "Q"),
        FIELD(mf_process_header, pid, "I"),
        FIELD(mf_process_header, ppid, "I"),
        FIELD(mf_process_header, start_ns, "Q"),
        FIELD(mf_process_header, end_ns, "Q"),
        FIELD(mf_process_header, flags, "I"),
        FIELD(mf_process_header, unwinder, "I"),
        FIELD(mf_process_header, sample_interval, "Q"),
        FIELD(mf_process_header, exact_calls, "Q"),
        FIELD(mf_process_header, max_depth, "I"),
        FIELD(mf_process_header, cost_share_ppm, "I"),
        FIELD(mf_process_header, exe, "256s"),
        FIELD(mf_process_header, exact_recorded, "Q"),
        FIELD(mf_process_header, large_bytes, "Q"),
        FIELD(mf_process_header, rules_learned, "Q"),
        FIELD(mf_process_header, rules_loaded, "Q"),
        FIELD(mf_process_header, ramp_samples, "I"),
        FIELD(mf_process_header, ramp_step, "I"),
    };
    static const struct field module[] = {
        FIELD(mf_module_record, magic, "I"),
        FIELD(mf_module_record, record_size, "I"),
        FIELD(mf_module_record, bias, "Q"),
        FIELD(mf_module_record, lo, "Q"),
        FIELD(mf_module_record, hi, "Q"),
        FIELD(mf_module_record, build_id_len, "I"),
        FIELD(mf_module_record, path_len, "I"),
        FIELD(mf_module_record, epoch, "I"),
        FIELD(mf_module_record, reserved, "I"),
        FIELD(mf_module_record, build_id, "32s"),
    };
    static const struct field live[] = {
        FIELD(mf_live_header, magic, "8s"),
        FIELD(mf_live_header, version, "I"),
        FIELD(mf_live_header, header_size, "I"),
        FIELD(mf_live_header, stamp, "Q"),
        FIELD(mf_live_header, pid, "I"),
        FIELD(mf_live_header, mode, "I"),
        FIELD(mf_live_header, capacity, "I"),
        FIELD(mf_live_header, stats_capacity, "I"),
        FIELD(mf_live_header, records_offset, "Q"),
        FIELD(mf_live_header, stats_offset, "Q"),
        FIELD(mf_live_header, flags, "I"),
        FIELD(mf_live_header, interval_max, "I"),
        FIELD(mf_live_header, dropped, "Q"),
        FIELD(mf_live_header, stats_dropped, "Q"),
        FIELD(mf_live_header, start_mono_ns, "Q"),
        FIELD(mf_live_header, start_real_ns, "Q"),
    };
    static const struct field live_record[] = {
        FIELD(mf_live_record, state, "I"),
        FIELD(mf_live_record, reserved, "I"),
        FIELD(mf_live_record, addr, "Q"),
        FIELD(mf_live_record, size, "Q"),
        FIELD(mf_live_record, weight, "Q"),
        FIELD(mf_live_record, stack, "Q"),
        FIELD(mf_live_record, thread, "Q"),
        FIELD(mf_live_record, alloc_ns, "Q"),
        FIELD(mf_live_record, alloc_call, "Q"),
    };
    static const struct field live_stats[] = {
        FIELD(mf_live_stats, key, "Q"),
        FIELD(mf_live_stats, freed, "Q"),
        FIELD(mf_live_stats, freed_samples, "Q"),
        FIELD(mf_live_stats, freed_bytes, "Q"),
        FIELD(mf_live_stats, temporary, "Q"),
        FIELD(mf_live_stats, same_thread, "Q"),
        FIELD(mf_live_stats, reserved, NULL),
        FIELD(mf_live_stats, life_calls, NULL),
        FIELD(mf_live_stats, life_ns, NULL),
    };
    static const struct field tl_header[] = {
        FIELD(mf_tl_header, magic, "8s"),
        FIELD(mf_tl_header, version, "I"),
        FIELD(mf_tl_header, header_size, "I"),
        FIELD(mf_tl_header, start_ns, "Q"),
        FIELD(mf_tl_header, interval_ns, "Q"),
        FIELD(mf_tl_header, points_max, "I"),
        FIELD(mf_tl_header, reserved, "I"),
    };
    static const struct field tl_point[] = {
        FIELD(mf_tl_point, magic, "I"),
        FIELD(mf_tl_point, nstacks, "I"),
        FIELD(mf_tl_point, start_ns, "Q"),
        FIELD(mf_tl_point, end_ns, "Q"),
        FIELD(mf_tl_point, calls, "Q"),
        FIELD(mf_tl_point, bytes, "Q"),
        FIELD(mf_tl_point, other_calls, "Q"),
        FIELD(mf_tl_point, other_bytes, "Q"),
        FIELD(mf_tl_point, processes, "I"),
        FIELD(mf_tl_point, flags, "I"),
        FIELD(mf_tl_point, checksum, "Q"),
    };
    static const struct field tl_stack[] = {
        FIELD(mf_tl_stack, id, "Q"),
        FIELD(mf_tl_stack, calls, "Q"),
        FIELD(mf_tl_stack, bytes, "Q"),
        FIELD(mf_tl_stack, var, "Q"),
    };

    printf("\"\"\"c_core/mf_format.h for Python, generated by tests/lib/format_offsets.c at build "
           "time:\ndo not edit. A class per struct: its size, each field's offset, and `format`, "
           "a struct\nmodule format of the whole with `fields` in order (raw bytes for an "
           "array).\"\"\"\n\n");
#define K(name) printf("%s = %llu\n", #name + 3, (unsigned long long)(name))
#define S(name) printf("%s = b\"%s\"\n", #name + 3, name)
    K(MF_FORMAT_VERSION);
    S(MF_THREAD_MAGIC);
    S(MF_PROCESS_MAGIC);
    S(MF_LIVE_MAGIC);
    K(MF_MODULE_MAGIC);
    K(MF_FN_COUNT);
    K(MF_FN_NAMED);
    static const char *const names[] = {MF_FN_NAMES};
    printf("FN_NAMES = [");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("\"%s\"%s", names[i], i + 1 < sizeof names / sizeof names[0] ? ", " : "]\n");
    K(MF_SIZE_CLASSES);
    K(MF_MAX_SEGMENTS);
    K(MF_FLUSH_CALLS);
    K(MF_INTERVAL_MAX);
    K(MF_DEPTH_MAX);
    K(MF_THREAD_HEADER_BYTES);
    K(MF_SEG_ENTRIES_FIRST);
    K(MF_SEG_GROWTH_STEPS);
    K(MF_SEG_ENTRIES_MAX);
    K(MF_NODES_PER_ENTRY);
    K(MF_NODE_HI_SHIFT);
    K(MF_PC_HI_MAX);
    K(MF_NODE_WIDE);
    K(MF_ENTRY_VAR_SLOTS);
    K(MF_SEG_BYTES_MAX);
    K(MF_THREAD_FILE_MAX);
    K(MF_THREAD_FINISHED);
    K(MF_THREAD_TABLE_FULL);
    K(MF_THREAD_SHARED);
    K(MF_SEGMENT_ENTRIES_OFFSET);
    K(MF_ENTRY_TRUNCATED);
    K(MF_ENTRY_LARGE);
    K(MF_ENTRY_SIZED);
    K(MF_ENTRY_WIDE);
    K(MF_ENTRY_CLASS_SHIFT);
    K(MF_ENTRY_EPOCH_SHIFT);
    K(MF_ENTRY_KEY_BITS);
    K(MF_ENTRY_NODE_BITS);
    K(MF_PROCESS_EXITED);
    K(MF_PROCESS_TLS_DIRECT);
    K(MF_PROCESS_PYTHONMALLOC);
    K(MF_PROCESS_EXACT_BY_CALLS);
    K(MF_EXACT_NS_MAX);
    K(MF_UNWIND_LIBUNWIND);
    K(MF_UNWIND_FP);
    K(MF_LIVE_PROBES);
    K(MF_LIVE_SAMPLED);
    K(MF_LIVE_ALL);
    K(MF_LIVE_FULL);
    K(MF_LIVE_STATS_FULL);
    K(MF_LIVE_RECORD_EMPTY);
    K(MF_LIVE_RECORD_BUSY);
    K(MF_LIVE_RECORD_LIVE);
    K(MF_LIVE_RECORD_FREED);
    K(MF_LIVE_CALL_BUCKETS);
    K(MF_LIVE_NS_BUCKETS);
    K(MF_LIVE_CAPACITY_SAMPLED);
    K(MF_LIVE_CAPACITY_ALL);
    K(MF_LIVE_STATS_CAPACITY);
    K(MF_LIVE_RECORDS_OFFSET);
    K(MF_LIVE_FILE_MAX);
    S(MF_TL_MAGIC);
    K(MF_TL_VERSION);
    S(MF_TL_FILE);
    K(MF_TL_POINT_MAGIC);
    K(MF_TL_INTERVAL_NS);
    K(MF_TL_POINTS_MAX);
    K(MF_TL_POINT_STACKS_MAX);
    K(MF_TL_RECORDS_MAX);
    K(MF_TL_POINT_LAST);
    K(MF_TL_POINT_RAW);
    K(MF_TL_FILE_MAX);

    print_struct("thread_header", sizeof(struct mf_thread_header), FIELDS(thread));
    print_struct("tl_header", sizeof(struct mf_tl_header), FIELDS(tl_header));
    print_struct("tl_point", sizeof(struct mf_tl_point), FIELDS(tl_point));
    print_struct("tl_stack", sizeof(struct mf_tl_stack), FIELDS(tl_stack));
    print_struct("size_class", sizeof(struct mf_size_class), FIELDS(size_class));
    print_struct("segment_header", sizeof(struct mf_segment_header), FIELDS(segment));
    print_struct("entry", sizeof(struct mf_entry), FIELDS(entry));
    print_struct("entry_var", sizeof(struct mf_entry_var), FIELDS(entry_var));
    print_struct("frame_node", sizeof(struct mf_frame_node), FIELDS(frame_node));
    print_struct("rule_cache_header", sizeof(struct mf_rc_header), FIELDS(rule_cache));
    print_struct("process_header", sizeof(struct mf_process_header), FIELDS(process));
    print_struct("module_record", sizeof(struct mf_module_record), FIELDS(module));
    print_struct("live_header", sizeof(struct mf_live_header), FIELDS(live));
    print_struct("live_record", sizeof(struct mf_live_record), FIELDS(live_record));
    print_struct("live_stats", sizeof(struct mf_live_stats), FIELDS(live_stats));
    return bad || fflush(stdout) != 0 || ferror(stdout);
}
