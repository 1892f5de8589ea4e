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

/// Partial sums of [`lanes`].
pub const LANES: usize = 8;

/// Σ_i term(i) for i < `len` on one thread in [`LANES`] partial sums (of the
/// indices i ≡ 0 … LANES − 1 mod LANES, the rest after the last full group in
/// one), added in lane order at the end: a fixed order whose independent
/// chains the compiler turns into vector adds, where a single running sum is
/// one chain of dependent adds (4 cycles each). For short sums inside
/// parallel work; [`sum`] splits long ones over the threads.
#[inline(always)]
pub fn lanes(len: usize, mut term: impl FnMut(usize) -> f64) -> f64 {
    let mut lanes = [0.0f64; LANES];
    let full = len - len % LANES;
    for base in (0..full).step_by(LANES) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane += term(base + i);
        }
    }
    let tail: f64 = (full..len).map(term).sum();
    lanes.iter().sum::<f64>() + tail
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

    #[test]
    fn lanes_sum_every_term_in_a_fixed_order() {
        for len in [0, 1, LANES - 1, LANES, LANES + 1, 3 * LANES + 5, 1000] {
            let v = values(len);
            let mut lane = [0.0f64; LANES];
            let full = len - len % LANES;
            for (i, x) in v[..full].iter().enumerate() {
                lane[i % LANES] += x;
            }
            let expected = lane.iter().sum::<f64>() + v[full..].iter().sum::<f64>();
            assert_eq!(
                lanes(len, |i| v[i]).to_bits(),
                expected.to_bits(),
                "len {len}"
            );
            let plain: f64 = v.iter().sum();
            assert!(
                (lanes(len, |i| v[i]) - plain).abs()
                    <= 1e-9 * v.iter().map(|x| x.abs()).sum::<f64>()
            );
        }
    }
}
