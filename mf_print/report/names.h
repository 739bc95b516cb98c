/* Names for people (the tree): C++ template and Rust generic arguments collapsed. The
 * formats for scripts (CSV, JSON, pprof, collapsed) keep full names. */
#ifndef MF_NAMES_H
#define MF_NAMES_H

#include <stdint.h>
#include <stdio.h>

/* The interned name with every argument list of a generic collapsed to "<…>":
 * "std::vector<int, std::allocator<int> >::push_back(int const&)" ->
 * "std::vector<…>::push_back(int const&)"; "<alloc::vec::Vec<u8> as core::ops::Drop>::drop"
 * -> "<alloc::vec::Vec<…> as core::ops::Drop>::drop" (a qualified path's own brackets stay).
 * operator<, operator<<, operator->, ... are not brackets; a Rust hash ("::h0123...") goes. */
uint32_t mf_short_name(uint32_t name);

#endif
