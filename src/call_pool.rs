//! The thread pool of the plan call a thread is running ([`within`]), for
//! the host-side loops of backends that hold no pool themselves (the CUDA
//! operators' copies into page-locked memory): every parallel loop of the
//! library runs on the calling plan's pool, never on rayon's global one.

use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The pools of the plan calls this thread is inside, innermost last.
    static POOLS: RefCell<Vec<Arc<rayon::ThreadPool>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` as a call of the plan whose pool is `pool` (nested calls, such as
/// operators applied from a progress callback, stack).
pub fn within<R>(pool: &Arc<rayon::ThreadPool>, f: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            POOLS.with(|p| p.borrow_mut().pop());
        }
    }
    POOLS.with(|p| p.borrow_mut().push(pool.clone()));
    let _leave = Leave;
    f()
}

/// `f` on the current call's pool: inline on a pool's thread already, on
/// the pool of the innermost [`within`] otherwise, and inline outside any
/// call (where `f`'s parallel loops must then not start the global pool:
/// see [`on_a_pool`]).
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if on_a_pool() {
        return f();
    }
    match POOLS.with(|p| p.borrow().last().cloned()) {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Whether this thread is one of a rayon pool's (parallel loops then run on
/// that pool; elsewhere they would start the global one).
pub fn on_a_pool() -> bool {
    rayon::current_thread_index().is_some()
}

/// Values per task of [`copy`].
const COPY_GRAIN: usize = 1 << 16;

/// dst ← src (equal lengths), by the pool's threads on a pool's thread and
/// serially elsewhere.
pub fn copy<T: Copy + Send + Sync>(src: &[T], dst: &mut [T]) {
    if on_a_pool() {
        dst.par_chunks_mut(COPY_GRAIN)
            .zip(src.par_chunks(COPY_GRAIN))
            .for_each(|(d, s)| d.copy_from_slice(s));
    } else {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_runs_on_the_innermost_call_pool_and_inline_outside() {
        let pool = |n| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .unwrap(),
            )
        };
        let (outer, inner) = (pool(2), pool(3));
        assert!(!install(on_a_pool));
        within(&outer, || {
            assert_eq!(install(rayon::current_num_threads), 2);
            within(&inner, || {
                assert_eq!(install(rayon::current_num_threads), 3)
            });
            assert_eq!(install(rayon::current_num_threads), 2);
            // already on a pool's thread: inline, on that pool
            assert_eq!(inner.install(|| install(rayon::current_num_threads)), 3);
        });
        assert!(!install(on_a_pool));
        // a panic inside leaves the stack as it was
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            within(&outer, || panic!("inside"))
        }));
        assert!(caught.is_err());
        assert!(!install(on_a_pool));
    }

    #[test]
    fn copies_on_and_off_a_pool() {
        let src: Vec<u32> = (0..3 * COPY_GRAIN as u32 + 7).collect();
        let mut dst = vec![0; src.len()];
        copy(&src, &mut dst);
        assert_eq!(dst, src);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let mut again = vec![0; src.len()];
        pool.install(|| copy(&src, &mut again));
        assert_eq!(again, src);
    }
}
