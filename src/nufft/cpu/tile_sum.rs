//! The inner loops over one point's tile rows, in explicit vector
//! registers where the CPU has them. Type 2's sum ([`tile_sum`]):
//!
//! $$a_k = \sum_{r_z < w_z} \sum_{r_y < w_y} \psi_z(r_z)\,\psi_y(r_y)\; \mathrm{tile}[b + s\,(r_y + e_y r_z) + k],\qquad k < L,$$
//!
//! (b the point's first cell, s the tile's row stride, e_y its y extent; the
//! L values of a row are the x cells' re/im pairs, then summed against the x
//! weights into the point's value), and type 1's update, its transpose
//! ([`tile_add`]):
//!
//! $$\mathrm{tile}[b + s\,(r_y + e_y r_z) + k] \mathrel{+}= c_k\,\psi_z(r_z)\,\psi_y(r_y)$$
//!
//! (c the strength times the x weights, per value). Written as plain loops,
//! LLVM's SLP vectorizer keeps the L accumulators as L/2 two-wide (re, im)
//! vectors inside the point and transform loops: eight 64-bit loads and
//! eight FMAs per float32 row of 16 values (BENCHMARKS.md, 2026-11-26
//! session 4), and checks every row's bounds in the update. Here each row is
//! L/V 256-bit load-FMAs (and stores, for the update; V = 8 float32 or 4
//! float64 values per register) whenever the caller runs with AVX2 and FMA
//! (AVX-512 builds too: the 512-bit intrinsics need Rust 1.89, above this
//! crate's 1.85), with one bounds check per point; the sum keeps two
//! accumulator sets alternating between rows so consecutive FMAs do not
//! wait on each other; without AVX2 the plain loops.

use crate::backend::cpu::real::Real;
use std::any::TypeId;

/// Where a point's rows lie in a tile.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    /// Index of the first value of the first row.
    pub base: usize,
    /// Values from one y row to the next.
    pub stride: usize,
    /// Rows per z plane of the tile (its y extent).
    pub extent_y: usize,
    /// Rows summed along y and z (the kernel width, or 1 along an axis not spread).
    pub count: [usize; 2],
}

impl Rows {
    /// Index of the first value of row (ry, rz).
    #[inline(always)]
    fn start(&self, ry: usize, rz: usize) -> usize {
        self.base + self.stride * (ry + self.extent_y * rz)
    }

    /// The last index any row reads, plus one (for one bounds check).
    #[inline(always)]
    fn end<const L: usize>(&self) -> usize {
        self.start(self.count[0].max(1) - 1, self.count[1].max(1) - 1) + L
    }
}

/// The row weights ψ_z(r_z)·ψ_y(r_y) of a point written to `out`, row
/// (r_y, r_z) at r_y + count_y·r_z (`wy[2·r]`, `wz[2·r]` the y and z weights
/// of row r: the kernel's lanes hold each weight twice, for re and im), for
/// every tile the point reads ([`tile_sum`]). (Spreading computes each row's
/// weight as it goes: read from such a buffer between its stores into the
/// tiles, the weights made ho3d-77k's type 1 ~10 % slower.)
#[inline(always)]
pub fn row_weights<T: Real, const L: usize>(
    rows: &Rows,
    wy: &[T; L],
    wz: &[T; L],
    out: &mut [T; ROW_WEIGHTS],
) {
    let [count_y, count_z] = rows.count;
    for rz in 0..count_z {
        for ry in 0..count_y {
            out[ry + count_y * rz] = wz[2 * rz] * wy[2 * ry];
        }
    }
}

/// Rows per point at most: the widest kernel's, squared.
pub const ROW_WEIGHTS: usize = crate::nufft::params::MAX_WIDTH * crate::nufft::params::MAX_WIDTH;

/// The point's value (re, im) = (Σ_k a_{2k} w_x[2k], Σ_k a_{2k+1} w_x[2k+1])
/// for a of the module documentation, `weights` the point's
/// [`row_weights`] and `wx` its x weights lane by lane. `WIDE` is the vector
/// width in bytes of the instruction set the caller was compiled for (64
/// AVX-512, 32 AVX2, 0 none); from 32 on, AVX2 registers, and the x weights
/// meet a in them (the lanes' products summed as a tree: its rounding
/// differs from the plain path's chain).
#[inline(always)]
pub fn tile_sum<T: Real, const L: usize, const FMA: bool, const WIDE: usize>(
    tile: &[T],
    rows: &Rows,
    wx: &[T; L],
    weights: &[T; ROW_WEIGHTS],
) -> (T, T) {
    let tile = &tile[..rows.end::<L>()];
    assert!(rows.count[0] * rows.count[1] <= ROW_WEIGHTS);
    #[cfg(target_arch = "x86_64")]
    if WIDE >= 32 {
        // SAFETY: the caller runs with AVX2 and FMA (`isa_kernel!`: WIDE ≥
        // 32); every row read lies in `tile` (checked above: rows start at
        // `Rows::start` ≤ the last row's start and span L values) and every
        // row's weight in `weights` (checked above); the casts only
        // reinterpret T as the type it is (TypeId).
        unsafe {
            if TypeId::of::<T>() == TypeId::of::<f32>() {
                let tile = &*(tile as *const [T] as *const [f32]);
                let wx = &*(wx as *const [T; L] as *const [f32; L]);
                let weights = &*(weights as *const [T; ROW_WEIGHTS] as *const [f32; ROW_WEIGHTS]);
                let (re, im) = x86::sum_f32::<L>(tile, rows, wx, weights);
                return (T::from_f64(re as f64), T::from_f64(im as f64));
            }
            if TypeId::of::<T>() == TypeId::of::<f64>() {
                let tile = &*(tile as *const [T] as *const [f64]);
                let wx = &*(wx as *const [T; L] as *const [f64; L]);
                let weights = &*(weights as *const [T; ROW_WEIGHTS] as *const [f64; ROW_WEIGHTS]);
                let (re, im) = x86::sum_f64::<L>(tile, rows, wx, weights);
                return (T::from_f64(re), T::from_f64(im));
            }
        }
    }
    let mut acc = [T::default(); L];
    let count_y = rows.count[0];
    for rz in 0..rows.count[1] {
        for ry in 0..count_y {
            let weight = weights[ry + count_y * rz];
            let cells = &tile[rows.start(ry, rz)..][..L];
            for (a, &v) in acc.iter_mut().zip(cells) {
                *a = v.madd::<FMA>(weight, *a);
            }
        }
    }
    let (mut re, mut im) = (T::default(), T::default());
    for k in 0..L / 2 {
        re = acc[2 * k].madd::<FMA>(wx[2 * k], re);
        im = acc[2 * k + 1].madd::<FMA>(wx[2 * k + 1], im);
    }
    (re, im)
}

/// The update of the module documentation: `c` the L values added per row
/// before the row's weight, `wy[2·r]`, `wz[2·r]` the y and z weights of row
/// r; `WIDE` as for [`tile_sum`]. Rounding is that of one FMA per value
/// and row, on every path.
#[inline(always)]
pub fn tile_add<T: Real, const L: usize, const FMA: bool, const WIDE: usize>(
    tile: &mut [T],
    rows: &Rows,
    c: &[T; L],
    wy: &[T; L],
    wz: &[T; L],
) {
    let tile = &mut tile[..rows.end::<L>()];
    #[cfg(target_arch = "x86_64")]
    if WIDE >= 32 {
        // SAFETY: as in `tile_sum` (AVX2 and FMA, every row inside `tile`,
        // casts only to T's own type).
        unsafe {
            if TypeId::of::<T>() == TypeId::of::<f32>() {
                let tile = &mut *(tile as *mut [T] as *mut [f32]);
                let [c, wy, wz] = [c, wy, wz].map(|v| &*(v as *const [T; L] as *const [f32; L]));
                return x86::add_f32::<L>(tile, rows, c, wy, wz);
            }
            if TypeId::of::<T>() == TypeId::of::<f64>() {
                let tile = &mut *(tile as *mut [T] as *mut [f64]);
                let [c, wy, wz] = [c, wy, wz].map(|v| &*(v as *const [T; L] as *const [f64; L]));
                return x86::add_f64::<L>(tile, rows, c, wy, wz);
            }
        }
    }
    for rz in 0..rows.count[1] {
        for ry in 0..rows.count[0] {
            let weight = wz[2 * rz] * wy[2 * ry];
            let cells = &mut tile[rows.start(ry, rz)..][..L];
            for (v, &a) in cells.iter_mut().zip(c) {
                *v = a.madd::<FMA>(weight, *v);
            }
        }
    }
}

/// The explicit-vector kernels: a sum and an update per type, generated by
/// `kernels!`. The sum keeps two sets of L/V accumulators (even and odd
/// rows) and adds them at the end; the update holds the L/V added vectors
/// and loads, adds into and stores each row.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Rows;
    use std::arch::x86_64::*;

    /// The sum ([`super::tile_sum`]) and the update ([`super::tile_add`]) for
    /// one type and its 256-bit intrinsics.
    macro_rules! kernels {
        ($sum:ident, $update:ident, $t:ty, $v:ty, $lanes:expr, $zero:ident, $load:ident, $set1:ident, $fma:ident, $add:ident, $store:ident, $pair:ident) => {
            /// See [`super::tile_sum`]; L a multiple of the register's lanes.
            #[inline(always)]
            pub unsafe fn $sum<const L: usize>(
                tile: &[$t],
                rows: &Rows,
                wx: &[$t; L],
                weights: &[$t; super::ROW_WEIGHTS],
            ) -> ($t, $t) {
                const MAX: usize = 8;
                let n = L / $lanes;
                debug_assert!(n * $lanes == L && n <= MAX);
                let mut even: [$v; MAX] = [$zero(); MAX];
                let mut odd: [$v; MAX] = [$zero(); MAX];
                let ptr = tile.as_ptr();
                let [count_y, count_z] = rows.count;
                for rz in 0..count_z {
                    let mut ry = 0;
                    while ry < count_y {
                        let row = ptr.add(rows.start(ry, rz));
                        let weight = $set1(*weights.get_unchecked(ry + count_y * rz));
                        for (i, a) in even.iter_mut().enumerate().take(n) {
                            *a = $fma($load(row.add(i * $lanes)), weight, *a);
                        }
                        if ry + 1 < count_y {
                            let row = ptr.add(rows.start(ry + 1, rz));
                            let weight = $set1(*weights.get_unchecked(ry + 1 + count_y * rz));
                            for (i, a) in odd.iter_mut().enumerate().take(n) {
                                *a = $fma($load(row.add(i * $lanes)), weight, *a);
                            }
                        }
                        ry += 2;
                    }
                }
                // Σ_i (even_i + odd_i) ⊙ w_x,i, then the (re, im) lane pairs added.
                let mut weighted = $zero();
                for (i, (e, o)) in even.iter().zip(&odd).enumerate().take(n) {
                    weighted = $fma($add(*e, *o), $load(wx.as_ptr().add(i * $lanes)), weighted);
                }
                $pair(weighted)
            }

            /// See [`super::tile_add`]; L a multiple of the register's lanes.
            #[inline(always)]
            pub unsafe fn $update<const L: usize>(
                tile: &mut [$t],
                rows: &Rows,
                c: &[$t; L],
                wy: &[$t; L],
                wz: &[$t; L],
            ) {
                const MAX: usize = 8;
                let n = L / $lanes;
                debug_assert!(n * $lanes == L && n <= MAX);
                let mut values: [$v; MAX] = [$zero(); MAX];
                for (i, v) in values.iter_mut().enumerate().take(n) {
                    *v = $load(c.as_ptr().add(i * $lanes));
                }
                let ptr = tile.as_mut_ptr();
                let [count_y, count_z] = rows.count;
                for rz in 0..count_z {
                    for ry in 0..count_y {
                        let row = ptr.add(rows.start(ry, rz));
                        let weight = $set1(wz[2 * rz] * wy[2 * ry]);
                        for (i, v) in values.iter().enumerate().take(n) {
                            let cell = row.add(i * $lanes);
                            $store(cell, $fma(*v, weight, $load(cell)));
                        }
                    }
                }
            }
        };
    }

    /// (Σ of the even lanes, Σ of the odd lanes) of (re, im) pairs.
    #[inline(always)]
    unsafe fn pairs_f32(v: __m256) -> (f32, f32) {
        let half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
        (_mm_cvtss_f32(pair), _mm_cvtss_f32(_mm_movehdup_ps(pair)))
    }

    /// As [`pairs_f32`], for float64 lanes.
    #[inline(always)]
    unsafe fn pairs_f64(v: __m256d) -> (f64, f64) {
        let pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
        (
            _mm_cvtsd_f64(pair),
            _mm_cvtsd_f64(_mm_unpackhi_pd(pair, pair)),
        )
    }

    kernels!(
        sum_f32,
        add_f32,
        f32,
        __m256,
        8,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        _mm256_storeu_ps,
        pairs_f32
    );
    kernels!(
        sum_f64,
        add_f64,
        f64,
        __m256d,
        4,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_set1_pd,
        _mm256_fmadd_pd,
        _mm256_add_pd,
        _mm256_storeu_pd,
        pairs_f64
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The point's (re, im) (the sum weighted by w_x) and the updated tile
    /// (tile + c·w_z w_y on the rows) in float64 by the formulas (values as
    /// f64).
    fn reference<const L: usize>(
        tile: &[f64],
        rows: &Rows,
        c: &[f64],
        [wx, wy, wz]: [&[f64]; 3],
    ) -> ([f64; 2], Vec<f64>) {
        let (mut a, mut updated) = ([0.0; L], tile.to_vec());
        for rz in 0..rows.count[1] {
            for ry in 0..rows.count[0] {
                let weight = wz[2 * rz] * wy[2 * ry];
                for k in 0..L {
                    a[k] += weight * tile[rows.start(ry, rz) + k];
                    updated[rows.start(ry, rz) + k] += weight * c[k];
                }
            }
        }
        let mut value = [0.0; 2];
        for k in 0..L {
            value[k % 2] += a[k] * wx[k];
        }
        (value, updated)
    }

    /// The sum and the update of `tile` on one path.
    #[inline(always)]
    fn both<T: Real, const L: usize, const WIDE: usize>(
        tile: &[T],
        rows: &Rows,
        [c, x, y, z]: [&[T; L]; 4],
    ) -> ([T; 2], Vec<T>) {
        let mut updated = tile.to_vec();
        tile_add::<T, L, true, WIDE>(&mut updated, rows, c, y, z);
        let mut weights = [T::default(); ROW_WEIGHTS];
        row_weights(rows, y, z, &mut weights);
        let (re, im) = tile_sum::<T, L, true, WIDE>(tile, rows, x, &weights);
        ([re, im], updated)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    unsafe fn wide512<T: Real, const L: usize>(
        t: &[T],
        r: &Rows,
        w: [&[T; L]; 4],
    ) -> ([T; 2], Vec<T>) {
        both::<T, L, 64>(t, r, w)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn wide256<T: Real, const L: usize>(
        t: &[T],
        r: &Rows,
        w: [&[T; L]; 4],
    ) -> ([T; 2], Vec<T>) {
        both::<T, L, 32>(t, r, w)
    }

    /// Every path this CPU has (AVX-512, AVX2, plain) against float64, on
    /// random tiles, row layouts, weights and added values; the update must
    /// leave every value outside the rows as it was.
    fn check<T: Real, const L: usize>(seed: &mut u64, tolerance: f64) {
        let mut next = move || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..20 {
            // At most L/2 rows per axis: the weights of row r are at lane 2r.
            let most = (L / 2) as f64;
            let count = [1 + (next() * most) as usize, 1 + (next() * most) as usize];
            let stride = L + 2 * (next() * 5.0) as usize;
            let extent_y = count[0] + (next() * 3.0) as usize;
            let base = (next() * 7.0) as usize;
            let rows = Rows {
                base,
                stride,
                extent_y,
                count,
            };
            let len = rows.end::<L>() + (next() * 3.0) as usize;
            let tile: Vec<f64> = (0..len).map(|_| next() - 0.5).collect();
            let (wy, wz): (Vec<f64>, Vec<f64>) = (0..L).map(|_| (next(), next())).unzip();
            let wx: Vec<f64> = (0..L).map(|_| next()).collect();
            let c: Vec<f64> = (0..L).map(|_| next() - 0.5).collect();
            let (want, want_tile) = reference::<L>(&tile, &rows, &c, [&wx, &wy, &wz]);
            let tile_t: Vec<T> = tile.iter().map(|&v| T::from_f64(v)).collect();
            let [c_t, wx_t, wy_t, wz_t] =
                [&c, &wx, &wy, &wz].map(|v| std::array::from_fn::<T, L, _>(|k| T::from_f64(v[k])));
            let w = [&c_t, &wx_t, &wy_t, &wz_t];
            // The value's scale: Σ over the rows and lanes of |tile|·w.
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs())) * L as f64;
            let mut results = vec![("plain", both::<T, L, 0>(&tile_t, &rows, w))];
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has AVX2 and FMA.
                    results.push(("avx2", unsafe { wide256(&tile_t, &rows, w) }));
                }
                if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512dq")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has these features.
                    results.push(("avx512", unsafe { wide512(&tile_t, &rows, w) }));
                }
            }
            for (name, (got, got_tile)) in results {
                let bytes = std::mem::size_of::<T>();
                for k in 0..2 {
                    let error = (got[k].to_f64() - want[k]).abs() / scale;
                    assert!(
                        error <= tolerance,
                        "{name} sum L={L} {bytes} bytes, rows {count:?}, part {k}: {error:e}"
                    );
                }
                for (i, (g, w)) in got_tile.iter().zip(&want_tile).enumerate() {
                    let error = (g.to_f64() - w).abs();
                    assert!(
                        error <= tolerance,
                        "{name} update L={L} {bytes} bytes, rows {count:?}, value {i}: {error:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_vector_path_sums_and_updates_the_rows() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        check::<f32, 8>(&mut seed, 1e-5);
        check::<f32, 16>(&mut seed, 1e-5);
        check::<f32, 24>(&mut seed, 1e-5);
        check::<f32, 32>(&mut seed, 1e-5);
        check::<f64, 8>(&mut seed, 1e-13);
        check::<f64, 16>(&mut seed, 1e-13);
        check::<f64, 24>(&mut seed, 1e-13);
        check::<f64, 32>(&mut seed, 1e-13);
    }
}
