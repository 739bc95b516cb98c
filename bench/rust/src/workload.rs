//! The allocation-heavy work both binaries run: strings, vectors, maps and boxed trees, the
//! way an ordinary program allocates. Usage: bench_prof|bench_system ROUNDS.

use std::collections::{BTreeMap, HashMap};

enum Tree {
    Leaf(String),
    Node(Vec<Box<Tree>>),
}

fn build_tree(depth: u32, seed: u64) -> Tree {
    if depth == 0 {
        return Tree::Leaf(format!("leaf{}", seed % 997));
    }
    Tree::Node((0..3).map(|k| Box::new(build_tree(depth - 1, seed * 3 + k))).collect())
}

fn tree_len(tree: &Tree) -> usize {
    match tree {
        Tree::Leaf(s) => s.len(),
        Tree::Node(kids) => kids.iter().map(|k| tree_len(k)).sum(),
    }
}

fn one_round(round: u64) -> usize {
    let mut words: HashMap<String, Vec<u64>> = HashMap::new();
    for i in 0..20_000u64 {
        let key = format!("w{}", (i * 2_654_435_761 + round) % 5_000);
        words.entry(key).or_default().push(i);
    }
    // In key order: the BTreeMap's node allocations must not depend on HashMap's random order.
    let mut keys: Vec<(&String, &Vec<u64>)> = words.iter().collect();
    keys.sort();
    let mut sorted: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in keys {
        let joined: Vec<String> = v.iter().take(4).map(|n| n.to_string()).collect();
        sorted.insert(k.to_uppercase(), joined.join(","));
    }
    let text: String = sorted.iter().map(|(k, v)| format!("{}={};", k, v)).collect();
    let parts: Vec<&str> = text.split(';').collect();
    let tree = build_tree(7, round);
    text.len() + parts.len() + tree_len(&tree)
}

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = match args.get(1).map(|a| a.parse::<u64>()) {
        Some(Ok(n)) if n > 0 && args.len() == 2 => n,
        _ => {
            eprintln!("usage: {} ROUNDS (a positive integer)", args[0]);
            std::process::exit(2);
        }
    };
    let total: usize = (0..rounds).map(one_round).sum();
    println!("{}", total);
}
