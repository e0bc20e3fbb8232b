//! Which instruction set the encoder's `f32` pass (embeddings, LayerNorm, attention, GELU, the
//! int8 layers' scaling back) is compiled for: AVX-512 when the CPU has it, plain x86-64
//! otherwise (see `encoder.rs`).
//!
//! This file held the `f32` query/key/value product until that projection moved to int8 with
//! its largest input channels in `f32` (`int8.rs`, `QLinear::with_outliers`).

/// Which instruction set the encoder's `f32` pass is compiled for. Opaque: only
/// [`Simd::detect`] (and, in tests, `Simd::available`) make one, after checking the CPU has its
/// features, so holding a `Simd` is the proof that code compiled for them may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Simd(SimdKind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimdKind {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Simd {
    /// The widest instruction set this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Simd(SimdKind::Avx512);
        }
        Simd(SimdKind::Plain)
    }

    /// True when the CPU has AVX-512 F.
    pub(crate) fn is_avx512(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.0 == SimdKind::Avx512 {
            return true;
        }
        false
    }

    /// Every instruction set this CPU can run (for tests comparing them).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        let mut all = vec![Simd(SimdKind::Plain)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            all.push(Simd(SimdKind::Avx512));
        }
        all
    }
}
