//! The encoder's `f32` linear layer (the query/key/value projection): weights kept transposed
//! and padded at load, so a forward pass is a register-blocked loop the compiler vectorises —
//! no packing of the weights and no thread pool woken on every call, which for the few tokens
//! of a query cost more than the product itself.
//!
//! Each output is its bias plus the products summed in input order: in plain Rust (any CPU),
//! or with AVX-512 fused multiply-adds, which round once where plain Rust rounds twice (the
//! tests check this product of the two agrees to a few units in the last place; the whole
//! encoder's passes agree to a per-token cosine of 0.9999, see `encoder.rs`).

/// Output columns computed together: four AVX-512 registers.
const COLS: usize = 64;

/// Tokens computed together, so that one load of weights feeds four of them.
const TOKENS: usize = 4;

/// Which kernel computes a tile. Opaque: only [`Simd::detect`] (and, in tests,
/// `Simd::available`) make one, after checking the CPU has its features, so holding a `Simd`
/// is the proof its kernel may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Simd(SimdKind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimdKind {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Simd {
    /// The fastest kernel this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Simd(SimdKind::Avx512);
        }
        Simd(SimdKind::Plain)
    }

    /// True for the AVX-512 kernel: the CPU has AVX-512 F.
    pub(crate) fn is_avx512(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.0 == SimdKind::Avx512 {
            return true;
        }
        false
    }

    /// Every kernel this CPU can run (for tests comparing them).
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

/// `acc[t][c] = Σ xt[t·k + i] · strip[i·COLS + c]` over `i < k`, summed in order of `i`, for
/// [`TOKENS`] rows of `xt` and the [`COLS`] columns of a strip of weights.
fn tile(simd: Simd, xt: &[f32], wt: &[f32], k: usize, acc: &mut [[f32; COLS]; TOKENS]) {
    match simd.0 {
        SimdKind::Plain => {
            for kk in 0..k {
                let w = &wt[kk * COLS..][..COLS];
                for (t, acc) in acc.iter_mut().enumerate() {
                    let a = xt[t * k + kk];
                    for (o, &w) in acc.iter_mut().zip(w) {
                        *o += a * w;
                    }
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        SimdKind::Avx512 => x86::tile_avx512(simd, xt, wt, k, acc),
    }
}

/// The AVX-512 tile. `unsafe` only for the `std::arch` intrinsics and their unaligned loads:
/// the entry takes the [`Simd`] that [`Simd::detect`] made after detecting AVX-512 F, checks it
/// is its own, and asserts the bounds of every load. Products are summed in the plain kernel's
/// order, each with one rounding (fused multiply-add) where the plain kernel rounds twice: the
/// two agree to a few units in the last place (tested).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{COLS, Simd, SimdKind, TOKENS};

    pub(super) fn tile_avx512(
        simd: Simd,
        xt: &[f32],
        wt: &[f32],
        k: usize,
        acc: &mut [[f32; COLS]; TOKENS],
    ) {
        assert_eq!(simd.0, SimdKind::Avx512);
        assert!(
            xt.len() >= TOKENS * k && wt.len() >= k * COLS,
            "{} inputs and {} weights for {TOKENS} rows of {k}",
            xt.len(),
            wt.len()
        );
        // SAFETY: a `Simd` holding `SimdKind::Avx512` is only made after detecting AVX-512 F
        // (its field is private to `dense`); the loads stay inside `xt` and `wt`, whose lengths
        // were just asserted.
        unsafe { avx512(xt.as_ptr(), wt.as_ptr(), k, acc) }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(xt: *const f32, wt: *const f32, k: usize, out: &mut [[f32; COLS]; TOKENS]) {
        let mut acc = [[_mm512_setzero_ps(); 4]; TOKENS];
        for kk in 0..k {
            let mut w = [_mm512_setzero_ps(); 4];
            for (c, w) in w.iter_mut().enumerate() {
                // SAFETY: kk · COLS + 16c + 16 <= k · COLS, inside `wt`.
                *w = unsafe { _mm512_loadu_ps(wt.add(kk * COLS + 16 * c)) };
            }
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: t · k + kk < TOKENS · k, inside `xt`.
                let a = _mm512_set1_ps(unsafe { *xt.add(t * k + kk) });
                for (acc, &w) in acc.iter_mut().zip(&w) {
                    *acc = _mm512_fmadd_ps(a, w, *acc);
                }
            }
        }
        for (out, acc) in out.iter_mut().zip(&acc) {
            for (c, &v) in acc.iter().enumerate() {
                let o: &mut [f32; 16] = (&mut out[16 * c..16 * c + 16]).try_into().expect("16");
                // SAFETY: `o` is 16 writable floats.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
            }
        }
    }
}

/// `y = x Wᵀ + b` in `f32`.
pub(crate) struct Dense {
    /// `k` rows of `n_pad` (the transposed weight, columns padded with zeros to [`COLS`]).
    wt: Vec<f32>,
    bias: Vec<f32>,
    n: usize,
    k: usize,
    n_pad: usize,
}

impl Dense {
    /// From `weight` (`n` rows of `k`, row-major, as PyTorch stores a linear layer).
    pub(crate) fn new(weight: &[f32], bias: Vec<f32>, n: usize, k: usize) -> Self {
        assert_eq!(weight.len(), n * k, "weight shape");
        assert_eq!(bias.len(), n, "bias shape");
        let n_pad = n.div_ceil(COLS) * COLS;
        // Strips of COLS output columns, each `k` rows of COLS: a tile reads its weights in
        // order, and they stay in cache while every tile of tokens uses them.
        let mut wt = vec![0f32; k * n_pad];
        for (r, row) in weight.chunks_exact(k).enumerate() {
            let (strip, c) = (r / COLS, r % COLS);
            for (i, &v) in row.iter().enumerate() {
                wt[strip * k * COLS + i * COLS + c] = v;
            }
        }
        Self {
            wt,
            bias,
            n,
            k,
            n_pad,
        }
    }

    /// `x` (`m` rows of `k`) → `out` (`m` rows of `n`); `xp` is scratch for the last tile of
    /// tokens, padded to a whole one when `m` is not a multiple of [`TOKENS`] (whole tiles are
    /// read from `x` in place).
    pub(crate) fn forward(&self, simd: Simd, x: &[f32], xp: &mut Vec<f32>, out: &mut Vec<f32>) {
        let (n, k) = (self.n, self.k);
        let m = x.len() / k;
        assert_eq!(x.len(), m * k, "input shape");
        let whole = m / TOKENS * TOKENS;
        xp.clear();
        xp.extend_from_slice(&x[whole * k..]);
        xp.resize(TOKENS * k, 0.0);
        out.clear();
        out.resize(m * n, 0.0);
        for j0 in (0..self.n_pad).step_by(COLS) {
            let strip = &self.wt[j0 * k..(j0 + COLS) * k];
            let cols = COLS.min(n - j0);
            for t0 in (0..m).step_by(TOKENS) {
                let mut acc = [[0f32; COLS]; TOKENS];
                let xt = if t0 < whole {
                    &x[t0 * k..(t0 + TOKENS) * k]
                } else {
                    &xp[..]
                };
                tile(simd, xt, strip, k, &mut acc);
                for (t, acc) in acc.iter().enumerate().take(TOKENS.min(m - t0)) {
                    let o = &mut out[(t0 + t) * n + j0..][..cols];
                    for ((o, &v), &b) in o.iter_mut().zip(acc).zip(&self.bias[j0..]) {
                        *o = v + b;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Dense, Simd};

    #[test]
    fn every_kernel_gives_the_plain_product_for_any_shape() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        for (m, n, k) in [
            (1, 1152, 384),
            (5, 7, 3),
            (9, 130, 65),
            (4, 64, 1),
            (3, 1, 5),
        ] {
            let x: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let dense = Dense::new(&w, b.clone(), n, k);
            for simd in Simd::available() {
                let (mut xp, mut out) = (Vec::new(), vec![9.0; 3]);
                dense.forward(simd, &x, &mut xp, &mut out);
                assert_eq!(out.len(), m * n);
                for t in 0..m {
                    for r in 0..n {
                        // In the same order; a fused multiply-add rounds once, not twice,
                        // so allow a few units in the last place of the magnitudes' sum.
                        let (mut want, mut size) = (0f32, 0f32);
                        for i in 0..k {
                            want += x[t * k + i] * w[r * k + i];
                            size += (x[t * k + i] * w[r * k + i]).abs();
                        }
                        let (got, want) = (out[t * n + r], want + b[r]);
                        let tol = (size + b[r].abs()) * k as f32 * f32::EPSILON;
                        assert!(
                            (got - want).abs() <= tol,
                            "{simd:?} {m}×{k}·{k}×{n} at {t},{r}: {got} vs {want}"
                        );
                        if !simd.is_avx512() {
                            assert_eq!(got, want, "the plain kernel, bit for bit");
                        }
                    }
                }
            }
        }
    }
}
