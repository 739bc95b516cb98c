//! The workload with every allocation counted by malloc_freq.
#[path = "../workload.rs"]
mod workload;

#[global_allocator]
static GLOBAL: malloc_freq::ProfAllocator = malloc_freq::ProfAllocator;

fn main() {
    workload::main();
}
