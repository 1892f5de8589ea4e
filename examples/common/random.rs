//! Reproducible random inputs of the NUFFT examples (no crate needed).
#![allow(dead_code)] // each example uses part of it

use num_complex::Complex64;

/// xorshift64 from a fixed seed: uniform numbers in [0, 1).
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `count` NUFFT points uniform in [−π, π) (radians).
    pub fn points(&mut self, count: usize) -> Vec<f64> {
        (0..count)
            .map(|_| (2.0 * self.uniform() - 1.0) * std::f64::consts::PI)
            .collect()
    }

    /// `count` complex values with parts uniform in [−½, ½).
    pub fn complex(&mut self, count: usize) -> Vec<Complex64> {
        (0..count)
            .map(|_| Complex64::new(self.uniform() - 0.5, self.uniform() - 0.5))
            .collect()
    }
}
