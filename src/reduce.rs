//! Parallel reductions that give the same bits on every run, whatever the
//! number of threads or the order in which rayon schedules the work.
//!
//! rayon's `sum`, `fold` and `reduce` combine partial results in an order
//! that depends on work stealing, so a float64 sum can differ in its last
//! bits from one run to the next; CG amplifies such differences where the
//! system is singular (after it has converged, its residual is rounding
//! noise). Here the index range 0..len is cut into fixed chunks of
//! [`CHUNK`] indices, each chunk is reduced in index order by `partial`
//! on some thread, and the chunks' results are combined in chunk order:
//!
//!   result = combine(… combine(combine(p₀, p₁), p₂) …, p_last)
//!
//! with p_c = partial(c·CHUNK .. min((c+1)·CHUNK, len)).

use rayon::prelude::*;
use std::ops::Range;

/// Indices per chunk.
const CHUNK: usize = 4096;

/// partial(chunk) for every chunk of 0..`len`, in chunk order (computed in
/// parallel on the current rayon pool).
pub fn partials<A: Send>(len: usize, partial: impl Fn(Range<usize>) -> A + Sync) -> Vec<A> {
    (0..len.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| partial(c * CHUNK..((c + 1) * CHUNK).min(len)))
        .collect()
}

/// Σ_i term(i) for i < `len`, summed chunk by chunk in index order and the
/// chunks' sums added in chunk order (0.0 when `len` is 0).
pub fn sum(len: usize, term: impl Fn(usize) -> f64 + Sync) -> f64 {
    partials(len, |range| range.map(&term).sum::<f64>())
        .into_iter()
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize) -> Vec<f64> {
        (0..len)
            .map(|i| ((i * 7919 % 1009) as f64 - 504.0) * 1.000_000_1f64.powi(i as i32 % 97))
            .collect()
    }

    #[test]
    fn the_sum_does_not_depend_on_the_thread_count() {
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 17] {
            let v = values(len);
            let reference: f64 = v.chunks(CHUNK).map(|c| c.iter().sum::<f64>()).sum();
            for threads in [1, 2, 3, 7, 16] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                for _ in 0..4 {
                    let s = pool.install(|| sum(len, |i| v[i]));
                    assert_eq!(
                        s.to_bits(),
                        reference.to_bits(),
                        "len {len}, {threads} threads"
                    );
                }
            }
        }
    }

    #[test]
    fn partials_come_in_chunk_order() {
        let len = 3 * CHUNK + 5;
        let p = partials(len, |r| (r.start, r.end));
        assert_eq!(
            p,
            vec![
                (0, CHUNK),
                (CHUNK, 2 * CHUNK),
                (2 * CHUNK, 3 * CHUNK),
                (3 * CHUNK, len)
            ]
        );
    }
}
