/* The table of plumbing frames. Stacks are recorded from inside the profiler, so their
 * innermost frames are always the profiler's own and the allocator entry point, often
 * followed by a language runtime's allocation layers (operator new, std::allocator, Rust's
 * __rust_alloc and RawVec growth). None of these answers "who allocates": the viewer drops
 * them from the innermost end up to the first frame that is not one of them, which becomes
 * the allocation site. Frames further out are never trimmed, and a stack is never trimmed to
 * nothing (report code keeps its last frame).
 *
 * Keep this a plain table: add patterns, not logic. Patterns are fnmatch(3) globs ('*' also
 * matches '/' and ':') against demangled names (libiberty with DMGL_PARAMS: C++ names carry
 * their parameter lists, Rust names no hash). */
#include <fnmatch.h>
#include <string.h>

#include "trim.h"

static const char *const mf_trim_patterns[] = {
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

bool mf_trim_function(const char *name)
{
    for (size_t i = 0; i < sizeof mf_trim_patterns / sizeof *mf_trim_patterns; i++)
        if (fnmatch(mf_trim_patterns[i], name, 0) == 0)
            return true;
    return false;
}

bool mf_trim_module(const char *basename)
{
    /* The preload library: every frame in it is the profiler or its malloc entry points. */
    return strncmp(basename, "libmalloc_freq", 14) == 0;
}
