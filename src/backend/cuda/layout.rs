//! The outer points of a phase sum sorted into compact thread blocks, each
//! with its float64 reference feature vector: what the host computes for a
//! side (`phase_sum::Side`) before anything goes to the device. Within a
//! block, out(o) = Σ_i w(i)·exp(±i2π Σ_f a_f(i)·v_f(o)) splits into the
//! block's exact reference phase Σ_f a_f(i)·vref_f and small float32
//! differences a_f(i)·(v_f(o) − vref_f).

use crate::error::{checked_len, try_collect, try_vec, Result};

/// What the host computes for a side before anything goes to the device.
pub(super) struct SideLayout {
    /// Features that vary over the outer points and meet non-zero inner values.
    pub(super) effective: Vec<usize>,
    /// Sorted position → outer point (`u32::MAX` pads the last block).
    pub(super) perm: Vec<u32>,
    /// blocks × terms reference feature vectors.
    pub(super) vref: Vec<f64>,
    pub(super) blocks: usize,
}

/// Sorts the outer points into compact blocks of `blk` (Morton order of up to
/// three features that move the phase most) and takes each block's midrange
/// as its reference feature vector. Its tables grow with the outer points:
/// allocated fallibly (`OutOfMemory` naming them).
pub(super) fn layout(
    outer: &[f64],
    inner: &[f64],
    terms: usize,
    o: usize,
    i: usize,
    blk: usize,
) -> Result<SideLayout> {
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    };
    let mut stats = Vec::with_capacity(terms);
    let mut effective = Vec::new();
    for f in 0..terms {
        let (lo, hi) = range(&outer[f * o..(f + 1) * o]);
        let amax = inner[f * i..(f + 1) * i]
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()));
        if hi > lo && amax > 0.0 {
            effective.push(f);
        }
        stats.push((lo, hi, (hi - lo) * amax));
    }
    // Up to three sort keys: features moving the phase by ≥ 5 % of the largest.
    let mut order: Vec<usize> = effective.clone();
    order.sort_by(|a, b| stats[*b].2.total_cmp(&stats[*a].2));
    let top = order.first().map_or(0.0, |f| stats[*f].2);
    let keys: Vec<usize> = order
        .into_iter()
        .filter(|f| stats[*f].2 >= 0.05 * top)
        .take(3)
        .collect();
    // Coordinates in cycles of phase: feature value × largest inner coefficient.
    let coords = keys
        .iter()
        .map(|&f| {
            let amax = stats[f].2 / (stats[f].1 - stats[f].0);
            let column = outer[f * o..(f + 1) * o].iter().map(|v| v * amax);
            try_collect(column, "outer sort keys (points)")
        })
        .collect::<Result<Vec<Vec<f64>>>>()?;
    let mut order = try_collect(0..o as u32, "outer point order (points)")?;
    bisect(&mut order, &coords, blk);
    drop(coords);
    let blocks = o.div_ceil(blk);
    let padded = checked_len(blocks, blk, "outer permutation (blocks x block size)")?;
    let mut perm = try_vec(padded, u32::MAX, "outer permutation (blocks x block size)")?;
    perm[..o].copy_from_slice(&order);
    drop(order);
    let references = checked_len(blocks, terms, "block reference features (blocks x terms)")?;
    let mut vref = try_vec(references, 0.0, "block reference features (blocks x terms)")?;
    for b in 0..blocks {
        let members = &perm[b * blk..((b + 1) * blk).min(o)];
        for f in 0..terms {
            let (lo, hi) =
                members
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &p| {
                        let x = outer[f * o + p as usize];
                        (lo.min(x), hi.max(x))
                    });
            vref[b * terms + f] = 0.5 * (lo + hi);
        }
    }
    Ok(SideLayout {
        effective,
        perm,
        vref,
        blocks,
    })
}

/// Bisections of at least this many points sort their halves in parallel.
const PARALLEL_POINTS: usize = 1 << 14;

/// Orders `points` into groups of `blk` (the last may be short) that are
/// compact in `coords`: recursive bisection along the widest coordinate, at a
/// multiple of `blk` (a k-d tree whose leaves are the thread blocks).
fn bisect(points: &mut [u32], coords: &[Vec<f64>], blk: usize) {
    if points.len() <= blk || coords.is_empty() {
        return;
    }
    let widest = coords
        .iter()
        .map(|c| {
            let (lo, hi) = points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &p| {
                    (lo.min(c[p as usize]), hi.max(c[p as usize]))
                });
            hi - lo
        })
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (d, w)| {
            if w > best.1 {
                (d, w)
            } else {
                best
            }
        })
        .0;
    let left = points.len().div_ceil(blk) / 2 * blk;
    let c = &coords[widest];
    points.select_nth_unstable_by(left, |a, b| c[*a as usize].total_cmp(&c[*b as usize]));
    let parallel = points.len() >= PARALLEL_POINTS;
    let (l, r) = points.split_at_mut(left);
    // The halves are independent: large ones in parallel (on the calling
    // thread's rayon pool; the same order either way).
    if parallel {
        rayon::join(|| bisect(l, coords, blk), || bisect(r, coords, blk));
    } else {
        bisect(l, coords, blk);
        bisect(r, coords, blk);
    }
}

#[cfg(test)]
mod tests {
    use super::bisect;

    /// Bisection keeps every point once and tiles a 64×32 grid into 8×8... blocks.
    #[test]
    fn bisection_is_a_permutation_into_compact_blocks() {
        let (w, h, blk) = (64usize, 32usize, 64usize);
        let x: Vec<f64> = (0..w * h).map(|p| (p % w) as f64).collect();
        let y: Vec<f64> = (0..w * h).map(|p| (p / w) as f64).collect();
        let mut order: Vec<u32> = (0..(w * h) as u32).collect();
        bisect(&mut order, &[x.clone(), y.clone()], blk);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert!(seen.iter().enumerate().all(|(i, &p)| p as usize == i));
        for block in order.chunks(blk) {
            let span = |c: &[f64]| {
                let v: Vec<f64> = block.iter().map(|&p| c[p as usize]).collect();
                v.iter().cloned().fold(f64::MIN, f64::max)
                    - v.iter().cloned().fold(f64::MAX, f64::min)
            };
            assert!(
                span(&x) <= 7.0 && span(&y) <= 7.0,
                "block spans {} x {}",
                span(&x),
                span(&y)
            );
        }
    }
}
