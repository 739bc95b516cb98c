//! The uninstrumented baseline: the same workload on the System allocator.
#[path = "../workload.rs"]
mod workload;

#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

fn main() {
    workload::main();
}
