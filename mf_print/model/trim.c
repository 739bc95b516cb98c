/* The tables of frames the transform stage (transform.c) takes out of a stack, each by one
 * rule; patterns only, no logic:
 *
 *   plumbing  the profiler and the allocator entry points, and a language runtime's
 *             allocation layers below the call a program makes (operator new,
 *             std::allocator<>::allocate, Rust's __rust_alloc and RawVec growth). Stacks are
 *             recorded from inside the profiler, so every stack starts with some; none answers
 *             "who allocates". Trimmed from the innermost end, silently (--no-trim keeps them).
 *   wrappers  allocation wrappers and library code that allocates on its caller's behalf
 *             (xmalloc, g_malloc, PyObject_Malloc, std::vector<>::push_back, Vec::push).
 *             Folded from the innermost end, after the plumbing: the site becomes the
 *             wrapper's caller, shown "caller via wrapper" (--no-fold keeps them).
 *   start-up  what runs before main and around a thread's start routine (_start,
 *             __libc_start_main, start_thread, clone3, Rust's lang_start and thread
 *             shims). Cut from the outermost end, so stacks start at main or at the start
 *             routine (--full-stacks keeps them).
 *
 * Frames further from their end are never taken by these rules, and a stack is never
 * emptied (transform.c keeps a frame).
 *
 * Patterns are fnmatch(3) globs ('*' also matches '/' and ':') against demangled names
 * (libiberty with DMGL_PARAMS: C++ names carry their parameter lists, a template function its
 * return type, which the wrapper and start-up rules also try without; Rust names no hash). */
#include <fnmatch.h>
#include <string.h>

#include "trim.h"

static const char *const mf_plumbing_patterns[] = {
    /* The profiler: the C core (also linked statically into Rust programs) and the crate. */
    "mf_*",
    "malloc_freq_*",
    "malloc_freq::*",
    "<malloc_freq::*", /* <malloc_freq::ProfAllocator as core::alloc::global::GlobalAlloc>::alloc */

    /* The C allocation ABI, as interposed by the preload library or as glibc's own. */
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "__libc_*alloc*",

    /* C++: every overload of operator new and new[] (sized, aligned, nothrow), and the
     * standard allocator layers below the container, so that the container is the site. */
    "operator new*",
    "std::__new_allocator<*>::allocate*",     /* GCC >= 12 */
    "__gnu_cxx::new_allocator<*>::allocate*", /* GCC < 12 */
    "std::allocator_traits<*>::allocate*",
    "std::_Vector_base<*>::_M_allocate*", /* so that _M_realloc_insert, vector growth, is the site */

    /* Rust: the global allocator shims and std's allocation layers, so that e.g.
     * RawVec<T>::grow_one (Vec::push) or Box::new is the site. */
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rg_*",  /* the #[global_allocator] shims */
    "__rdl_*", /* the default (System) allocator shims */
    "alloc::alloc::*",
    "<alloc::alloc::Global as core::alloc::Allocator>::*",
    "std::alloc::*",
    "<std::alloc::System as core::alloc::global::GlobalAlloc>::*",
    "alloc::raw_vec::finish_grow*",
    /* Older Rust (1.63, Debian 12's): RawVec<T, A> grew itself. Its layers below the method
     * that Vec calls are trimmed, so reserve_for_push (Vec::push; grow_one from 1.79 on),
     * reserve, reserve_exact, with_capacity_in and shrink_to_fit stay the site, as they do
     * with the RawVecInner layers below. Legacy mangling demangles to
     * "alloc::raw_vec::RawVec<T,A>::f", v0 to "<alloc::raw_vec::RawVec<u8>>::f". */
    "alloc::raw_vec::RawVec<*>::grow_amortized",
    "<alloc::raw_vec::RawVec<*>>::grow_amortized",
    "alloc::raw_vec::RawVec<*>::grow_exact",
    "<alloc::raw_vec::RawVec<*>>::grow_exact",
    "alloc::raw_vec::RawVec<*>::reserve::do_reserve_and_handle*",
    "<alloc::raw_vec::RawVec<*>>::reserve::do_reserve_and_handle*", /* v0: ...::<u8, Global> */
    "alloc::raw_vec::RawVec<*>::try_reserve_exact", /* under reserve_exact */
    "<alloc::raw_vec::RawVec<*>>::try_reserve_exact",
    "alloc::raw_vec::RawVec<*>::allocate_in",
    "<alloc::raw_vec::RawVec<*>>::allocate_in",
    "alloc::raw_vec::RawVec<*>::shrink",
    "<alloc::raw_vec::RawVec<*>>::shrink",
    /* Rust >= 1.8x: the growth layers moved into methods. <alloc::alloc::Global>::grow_impl*
     * are Global's inherent helpers; RawVecInner is the type-erased core of RawVec<T>, so
     * the typed RawVec<T>::grow_one / with_capacity_in stays the site. Legacy mangling
     * demangles to "alloc::raw_vec::RawVecInner<A>::f",
     * v0 to "<alloc::raw_vec::RawVecInner>::f". */
    "<alloc::alloc::Global>::*",
    "alloc::raw_vec::RawVecInner<*",
    "<alloc::raw_vec::RawVecInner*",
    /* Rust >= 1.9x names the shims in a __rustc namespace (v0 mangling). */
    "__rustc::__rust_alloc",
    "__rustc::__rust_alloc_zeroed",
    "__rustc::__rust_realloc",
    "__rustc::__rdl_*",
    "alloc::boxed::box_new_uninit", /* Box::new's untyped helper: Box::new's caller is the site */
};

static const char *const mf_wrapper_patterns[] = {
    /* libiberty (gcc, binutils, gdb) and gnulib (coreutils, grep, ...): x* never return
     * NULL; obstacks grow by chunks from them. */
    "xmalloc", "xcalloc", "xrealloc", "xreallocarray", "xstrdup", "xstrndup", "xmemdup",
    "xzalloc", "xnmalloc", "xnrealloc", "x2realloc", "x2nrealloc", "xpalloc", "xcharalloc",
    "ximalloc", "xirealloc", "xicalloc", "xireallocarray", "xinmalloc", "ximemdup*",
    "xvasprintf", "xasprintf", "xmalloc_failed",
    "_obstack_newchunk", "_obstack_begin", "_obstack_begin_1", "obstack_*",
    /* The C library's functions that return memory the caller frees: the caller is the
     * site ("split_words via __strndup"). */
    "strdup", "__strdup", "strndup", "__strndup", "wcsdup", "__wcsdup", "asprintf",
    "__asprintf", "vasprintf", "__vasprintf*", "__asprintf_chk", "__vasprintf_chk",
    "getline", "getdelim", "__getdelim",
    /* GLib. */
    "g_malloc*", "g_try_malloc*", "g_realloc*", "g_try_realloc*", "g_new*", "g_renew*",
    "g_slice_alloc*", "g_strdup*", "g_strndup", "g_memdup*", "g_strconcat", "g_strjoin*",
    /* CPython: the object and memory allocators and their helpers (with PYTHONMALLOC=malloc,
     * what the launcher sets, they lie between the interpreter's code and malloc). */
    "PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc", "_PyObject_Malloc",
    "_PyObject_Calloc", "_PyObject_Realloc", "pymalloc_*", "PyMem_*", "_PyMem_*",
    "PyObject_GC_*", "_PyObject_GC_*", "gc_alloc", "_PyObject_New*", "PyObject_New*",
    "PyType_GenericAlloc", "_PyType_AllocNoTrack",
    /* C++: the standard library (containers, strings, streams, shared_ptr, function ...)
     * allocates for its caller; the exception object of a throw. */
    "std::*", "__gnu_cxx::*", "__cxa_allocate_exception", "__cxa_allocate_dependent_exception",
    /* Rust: the standard library's crates, and hashbrown under std's HashMap. A method of
     * "<Type as Trait>" or "<Type>" is the standard library's when both are (mf_rust_std_impl
     * below): <alloc::vec::Vec<u8> as my_crate::Trait>::f is the program's. */
    "alloc::*", "core::*", "std::*", "hashbrown::*",
};

static const char *const mf_startup_patterns[] = {
    /* glibc: process start, constructors, thread start (with glibc's debug information;
     * without it the frames of libc and ld.so at the outer end are unnamed, and go too). */
    "_start", "__libc_start_main*", "__libc_start_call_main", "__libc_csu_init", "call_init",
    "_dl_init", "_dl_start", "_dl_start_user", "start_thread", "clone", "clone3", "__clone*",
    "[libc.so*", "[ld-linux*",
    /* libstdc++ without its debug information: its thread start routine is unnamed. */
    "[libstdc++.so*",
    /* C++ std::thread: libstdc++'s start routine and the invoker of the callable. */
    "execute_native_thread_routine", "std::thread::*", "std::__invoke*", "std::_Bind*",
    /* Rust: the runtime's main (lang_start; the C "main" that calls it is taken by
     * transform.c when lang_start is its callee) and the thread start shims, down to the
     * closure or function the program passed. */
    "std::rt::*", "std::panicking::*", "std::panic::*", "__rust_try", "std::sys::*",
    "std::sys_common::*", "std::thread::*", "core::ops::function::*",
    /* and the closure shims "<F as core::ops::function::FnOnce<()>>::call_once", whatever F */
};

#define MF_N(a) (sizeof a / sizeof *a)

static bool mf_match(const char *const *patterns, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(patterns[i], name, 0) == 0)
            return true;
    return false;
}

const char *mf_without_return_type(const char *name)
{
    /* A C++ template function demangles with its return type first: "void
     * std::vector<int>::_M_realloc_insert<int>(...)". The qualified name starts after the
     * last space outside <> and () before the parameters, unless that space is part of an
     * operator's name ("operator new", "operator delete[]"). Only a C++ name, with a scope
     * and parameters, has one: a symbol of another language may hold spaces of its own. */
    if (!strchr(name, '(') || !strstr(name, "::"))
        return name;
    int depth = 0;
    const char *start = name;
    for (const char *p = name; *p; p++) {
        if (*p == '<' || *p == '(' || *p == '[' || *p == '{') {
            if (depth == 0 && *p == '(')
                break;
            if (!(p >= name + 8 && strncmp(p - 8, "operator", 8) == 0))
                depth++;
        } else if ((*p == '>' || *p == ')' || *p == ']' || *p == '}') && depth > 0) {
            if (!(p >= name + 8 && strncmp(p - 8, "operator", 8) == 0))
                depth--;
        } else if (*p == ' ' && depth == 0) {
            if (p - name >= 8 && strncmp(p - 8, "operator", 8) == 0)
                break;
            start = p + 1;
        }
    }
    return strstr(start, "::") ? start : name;
}

static bool mf_std_crate(const char *s)
{
    static const char *const crates[] = {"alloc::", "core::", "std::", "hashbrown::"};
    for (size_t i = 0; i < MF_N(crates); i++)
        if (strncmp(s, crates[i], strlen(crates[i])) == 0)
            return true;
    return false;
}

/* A Rust type of the standard library, or a primitive one: u8, str, [T], (A, B), &T, *const T,
 * dyn core::..., fn(..); or a type parameter, T. */
static bool mf_std_type(const char *s, size_t n)
{
    static const char *const prims[] = {"bool", "char", "str", "u8", "u16", "u32", "u64",
                                        "u128", "usize", "i8", "i16", "i32", "i64", "i128",
                                        "isize", "f32", "f64"};
    if (mf_std_crate(s) || *s == '[' || *s == '(' || *s == '&' || *s == '*' ||
        strncmp(s, "dyn ", 4) == 0 || strncmp(s, "fn(", 3) == 0)
        return true;
    for (size_t i = 0; i < MF_N(prims); i++)
        if (strlen(prims[i]) == n && strncmp(s, prims[i], n) == 0)
            return true;
    /* A type parameter (legacy mangling: "<T as alloc::...>"): the trait decides. */
    if (n > 0 && n <= 2 && s[0] >= 'A' && s[0] <= 'Z')
        return true;
    return false;
}

/* "<Type as Trait>::f" or "<Type>::f" (Rust): the self type and the trait, split at the
 * " as " outside brackets. Returns false if name is not of that form. */
static bool mf_rust_impl(const char *name, const char **type, size_t *ntype, const char **trait)
{
    if (name[0] != '<')
        return false;
    int depth = 0;
    *trait = NULL;
    for (const char *p = name; *p; p++) {
        if (*p == '<' || *p == '(' || *p == '[') {
            depth++;
        } else if ((*p == '>' || *p == ')' || *p == ']') && !(*p == '>' && p[-1] == '-')) {
            if (--depth == 0) {
                *type = name + 1;
                *ntype = (size_t)((*trait ? *trait - 4 : p) - *type);
                return strncmp(p + 1, "::", 2) == 0;
            }
        } else if (depth == 1 && strncmp(p, " as ", 4) == 0 && !*trait) {
            *trait = p + 4;
        }
    }
    return false;
}

/* A method of the standard library's: its type and trait are both the standard library's
 * (a trait of the program's on Vec<u8>, or std's Clone on the program's type, is not). A
 * trait may itself be declared in such an impl: "<u8 as <[_]>::to_vec_in::ConvertVec>". */
static bool mf_rust_std_impl(const char *name)
{
    const char *type, *trait;
    size_t ntype;
    return mf_rust_impl(name, &type, &ntype, &trait) && mf_std_type(type, ntype) &&
           (!trait || mf_std_crate(trait) || (*trait == '<' && mf_rust_std_impl(trait)));
}

/* A closure shim of the runtime: "<F as core::ops::function::FnOnce<()>>::call_once". */
static bool mf_rust_fn_shim(const char *name)
{
    const char *type, *trait;
    size_t ntype;
    return mf_rust_impl(name, &type, &ntype, &trait) && trait &&
           strncmp(trait, "core::ops::function::", 21) == 0;
}

bool mf_trim_function(const char *name)
{
    return mf_match(mf_plumbing_patterns, MF_N(mf_plumbing_patterns), name);
}

bool mf_wrapper_function(const char *name)
{
    const char *bare = mf_without_return_type(name);
    return mf_match(mf_wrapper_patterns, MF_N(mf_wrapper_patterns), name) ||
           (bare != name && mf_match(mf_wrapper_patterns, MF_N(mf_wrapper_patterns), bare)) ||
           mf_rust_std_impl(name);
}

bool mf_startup_function(const char *name)
{
    const char *bare = mf_without_return_type(name);
    return mf_match(mf_startup_patterns, MF_N(mf_startup_patterns), name) ||
           (bare != name && mf_match(mf_startup_patterns, MF_N(mf_startup_patterns), bare)) ||
           mf_rust_fn_shim(name);
}

bool mf_trim_module(const char *basename)
{
    /* The preload library: every frame in it is the profiler or its malloc entry points. */
    return strncmp(basename, "libmalloc_freq", 14) == 0;
}
