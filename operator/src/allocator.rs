//! What the operator asks of the C allocator: one setting at start, and a trim after each burst.
//!
//! glibc's malloc serves a request of at least its mmap threshold (128 KiB at start) with a mapping
//! of its own, unmapped when freed. Each time such a chunk is freed, it raises the threshold to the
//! chunk's size, up to 32 MiB on 64-bit systems (mallopt(3), `M_MMAP_THRESHOLD`). The watches' initial
//! lists and the lag sampler's answers are buffers of hundreds of KiB: after the first of them is
//! freed, the next ones come from the heap, and the memory they leave free between live objects
//! stays resident. Setting the threshold fixes it at its starting value (and, as mallopt(3) says,
//! turns off the dynamic adjustment of the trim threshold too), so that those buffers keep going back
//! to the system.
//!
//! Smaller chunks freed between live ones stay resident too, until `malloc_trim(3)` hands their
//! pages back. The lag sampler's every sample allocates and frees some KiB per consumer group, in
//! every thread that takes part; [`release_free`] runs after each. docs/performance.md, "The
//! allocator", has the measurements.
//!
//! There is no safe binding of `mallopt` or `malloc_trim`; the two calls are below. Other C libraries
//! (musl) have neither, and nothing is done there.

/// The threshold: glibc's own starting value, kept.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// Fixes glibc's mmap threshold (see the module documentation); `false` if glibc refused it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn fix_mmap_threshold() -> bool {
    // SAFETY: mallopt takes two integers and changes only the allocator's parameters, under the
    // allocator's own lock; it may be called at any time, from any thread.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 }
}

/// Nothing to set outside glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn fix_mmap_threshold() -> bool {
    true
}

/// Hands the free pages of every malloc arena back to the system (see the module documentation).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free() {
    // SAFETY: malloc_trim takes an integer (the bytes to keep at the top of the heap) and works under
    // each arena's own lock; it may be called at any time, from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to release outside glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free() {}
