//! The two floating-point types the CPU kernels are generic over.

use std::ops::{Add, Mul, Neg, Sub};

pub trait Real:
    'static
    + Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
{
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn abs_(self) -> Self;
    fn round_even(self) -> Self;
    /// self·a + b, fused when the caller runs with FMA enabled.
    fn madd<const FMA: bool>(self, a: Self, b: Self) -> Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs_(self) -> Self {
                self.abs()
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                self.round_ties_even()
            }
            #[inline(always)]
            fn madd<const FMA: bool>(self, a: Self, b: Self) -> Self {
                if FMA {
                    self.mul_add(a, b)
                } else {
                    self * a + b
                }
            }
        }
    };
}
real!(f32);
real!(f64);
