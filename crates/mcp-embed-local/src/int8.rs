//! Int8 linear layers: weights quantized per output row when the model loads, activations per
//! token at each call, products summed in `i32` and scaled back to `f32`.
//!
//! The dot products run on the best kernel the CPU has, chosen once at run time: AVX-512 VNNI
//! (`vpdpbusd`, 64 products an instruction), AVX2 (`vpmaddubsw` on the absolute value of the
//! activation and the weight carrying its sign, as ggml does: two products of at most
//! 127 × 127 never saturate the `i16` sum), or plain Rust. Every kernel computes the same
//! integers, which the tests check against the plain one.
//!
//! A layer may keep a few input channels out of the int8 product ([`QLinear::with_outliers`]):
//! at each call the channels largest over the call's tokens are zeroed before the tokens are
//! quantized and their share of the product added in `f32`, so that they no longer set each
//! token's scale (as LLM.int8() does; chosen from the input, so nothing is calibrated).
//! Smoothing instead (dividing channel `j` by a fixed `s_j` and multiplying weight column `j`
//! by it, as SmoothQuant does) was measured with `s_j` from the preceding LayerNorm's
//! `|γ_j| + |β_j|` and the weights' column maxima and left out: the LayerNorm's parameters do
//! not predict its large outputs (channel 99 of all-MiniLM-L6-v2, 6 to 11 times the median
//! channel at every layer's input, has `|γ| + |β|` at 0.7 to 0.9 times the median), and with
//! the query/key/value projection in int8 the cosine to the `f32` model fell (0.9885 to 0.9909
//! at α from 0.15 to 1 on 200 bfcl queries, against 0.9908 without smoothing).

/// Rows are padded with zeros to a multiple of this many bytes (one AVX-512 register).
const LANE: usize = 64;

/// Weight rows handled together by a kernel, so that one activation load feeds four of them.
const ROWS: usize = 4;

/// Tokens handled together by a kernel, so that one weight load feeds up to four of them.
const TOKENS: usize = 4;

/// The longest row (`k`) a [`QLinear`] takes: the VNNI kernel sums `(a + 128) · w` (at most
/// 255 × 127 a product) over the padded row in `i32`, which 65,536 products never overflow.
pub(crate) const MAX_K: usize = 65_535;

/// Which dot-product kernel this CPU runs. Opaque: only [`Kernel::detect`] (and, in tests,
/// `Kernel::available`) make one, after checking the CPU has its features, so holding a
/// `Kernel` is the proof that its SIMD code may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kernel(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Plain Rust (any CPU).
    Scalar,
    /// AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 with VNNI.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                return Kernel(Kind::Avx512Vnni);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Kernel(Kind::Avx2);
            }
        }
        Kernel(Kind::Scalar)
    }

    /// Every kernel this CPU can run (for tests comparing them).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        let mut all = vec![Kernel(Kind::Scalar)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                all.push(Kernel(Kind::Avx2));
            }
            if Self::detect() == Kernel(Kind::Avx512Vnni) {
                all.push(Kernel(Kind::Avx512Vnni));
            }
        }
        all
    }

    /// The plain kernel (tests' reference).
    #[cfg(test)]
    fn scalar() -> Self {
        Kernel(Kind::Scalar)
    }
}

fn padded(k: usize) -> usize {
    k.div_ceil(LANE) * LANE
}

/// 1.5 · 2²³: a float of that size has no fraction bits, and for `|x| < 2²²` the integer
/// nearest `x` sits in the low bits of `x + MAGIC`.
const MAGIC: f32 = 12_582_912.0;

/// `x` rounded to the nearest integer (ties to even) as an `i32`, for `|x| < 2²²`: read from
/// the bits of `x + MAGIC`. A float-to-integer `as` cast saturates and maps NaN to zero, which
/// the compiler turns into a scalar conversion and two compares per value; this is a float
/// add and an integer subtraction, both vectorised (`f32::round` is a call per value on the
/// baseline x86-64 target). A NaN gives an unspecified value.
#[inline(always)]
pub(super) fn round_to_i32(x: f32) -> i32 {
    (x + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// Quantizes `x` (symmetric, scale `max |x| / 127`) into `out`, returning the scale; `out` is
/// at least `x.len()` long and its tail is left zero.
#[inline(always)]
fn quantize_row(x: &[f32], out: &mut [i8]) -> f32 {
    // In sixteen lanes, so that it vectorises (`f32::max` passes over a NaN either way).
    let mut lanes = [0f32; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder().iter().fold(0f32, |m, v| m.max(v.abs()));
    for chunk in chunks {
        for (m, v) in lanes.iter_mut().zip(chunk) {
            *m = m.max(v.abs());
        }
    }
    let max = lanes.iter().fold(tail, |m, &v| m.max(v));
    if max == 0.0 || !max.is_finite() {
        out.fill(0);
        return 0.0;
    }
    let inv = 127.0 / max;
    for (o, v) in out.iter_mut().zip(x) {
        // Through the float's bits, not a saturating conversion (see `round_to_i32`): the
        // value is a whole number within ±127, so the `i8` keeps it.
        // A NaN (which the maximum passed over) becomes 0, as a select that still vectorises.
        let y = if v.is_nan() { 0.0 } else { v * inv };
        *o = round_to_i32(y.clamp(-127.0, 127.0)) as i8;
    }
    out[x.len()..].fill(0);
    max / 127.0
}

/// A linear layer `y = x Wᵀ + b` with `W` in int8, one scale per output row.
pub(crate) struct QLinear {
    /// `n` rows of `k_pad` bytes.
    weights: Vec<i8>,
    /// One per output row.
    scales: Vec<f32>,
    /// Each row's sum of weights (the VNNI kernel's correction for unsigned activations).
    sums: Vec<i32>,
    bias: Vec<f32>,
    /// For a layer that keeps its largest input channels in `f32` (see
    /// [`QLinear::with_outliers`]): how many, and the weight transposed (`k` rows of `n`).
    outliers: usize,
    wt: Vec<f32>,
    n: usize,
    k: usize,
    k_pad: usize,
}

impl QLinear {
    /// Quantizes `weight` (`n` rows of `k`, row-major, as PyTorch stores a linear layer).
    pub(crate) fn new(weight: &[f32], bias: Vec<f32>, n: usize, k: usize) -> Self {
        assert_eq!(weight.len(), n * k, "weight shape");
        assert_eq!(bias.len(), n, "bias shape");
        assert!((1..=MAX_K).contains(&k), "row length {k}");
        let k_pad = padded(k);
        // Rows padded with zero rows to a whole tile, so kernels always run full tiles.
        let mut weights = vec![0i8; n.div_ceil(ROWS) * ROWS * k_pad];
        let mut scales = Vec::with_capacity(n);
        let mut sums = Vec::with_capacity(n);
        for (row, out) in weight.chunks_exact(k).zip(weights.chunks_exact_mut(k_pad)) {
            scales.push(quantize_row(row, out));
            sums.push(out.iter().map(|&w| i32::from(w)).sum());
        }
        Self {
            weights,
            scales,
            sums,
            bias,
            outliers: 0,
            wt: Vec::new(),
            n,
            k,
            k_pad,
        }
    }

    /// Like [`QLinear::new`], but each call takes the `count` input channels of largest size
    /// (the largest `|x_tj|` over the call's tokens) out of the int8 product and adds theirs in
    /// `f32`, as LLM.int8() does: a LayerNorm's output has a few channels several times the
    /// others' size, which would set each token's scale and take the others' precision away.
    /// Chosen at each call from the input itself, so nothing is calibrated; it keeps a
    /// transposed `f32` copy of the weight for those channels' columns.
    pub(crate) fn with_outliers(
        weight: &[f32],
        bias: Vec<f32>,
        n: usize,
        k: usize,
        count: usize,
    ) -> Self {
        let mut lin = Self::new(weight, bias, n, k);
        if count == 0 {
            return lin;
        }
        lin.outliers = count.min(k);
        lin.wt = vec![0f32; k * n];
        for (r, row) in weight.chunks_exact(k).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                lin.wt[i * n + r] = v;
            }
        }
        lin
    }

    /// `x` (`m` rows of `k`) → `out` (`m` rows of `n`), quantizing `x` in `scratch`.
    #[inline(always)]
    pub(crate) fn forward(
        &self,
        kernel: Kernel,
        x: &[f32],
        scratch: &mut Activations,
        out: &mut Vec<f32>,
    ) {
        let m = x.len() / self.k;
        assert_eq!(x.len(), m * self.k, "input shape");
        scratch.quantize(x, m, self.k, self.k_pad, self.outliers);
        out.clear();
        out.resize(m * self.n, 0.0);
        // The integer products first, then one pass that scales them back row by row, which
        // vectorises where interleaving the two did not.
        // Rows of `n` padded to whole tiles, so that every tile's sums are copied in one move of
        // a known size (a copy of `rows` values was a call to `memcpy` per tile).
        let n_pad = self.n.div_ceil(ROWS) * ROWS;
        let dots_all = &mut scratch.dots;
        dots_all.clear();
        dots_all.resize(m * n_pad, 0);
        let mut dots = [0i32; ROWS * TOKENS];
        for r0 in (0..self.n).step_by(ROWS) {
            let w = &self.weights[r0 * self.k_pad..(r0 + ROWS) * self.k_pad];
            for t0 in (0..m).step_by(TOKENS) {
                let tokens = TOKENS.min(m - t0);
                let a = &scratch.q[t0 * self.k_pad..(t0 + TOKENS) * self.k_pad];
                dot_block(kernel, a, w, self.k_pad, &mut dots);
                for t in 0..tokens {
                    let d = &mut dots_all[(t0 + t) * n_pad + r0..][..ROWS];
                    d.copy_from_slice(&dots[t * ROWS..][..ROWS]);
                }
            }
        }
        let unsigned = kernel_is_unsigned(kernel);
        for ((o, d), &sa) in out
            .chunks_exact_mut(self.n)
            .zip(dots_all.chunks_exact(n_pad))
            .zip(&scratch.scales)
        {
            for ((((o, &d), &sum), &sw), &b) in o
                .iter_mut()
                .zip(d)
                .zip(&self.sums)
                .zip(&self.scales)
                .zip(&self.bias)
            {
                // Wrapping, so that debug and release builds agree; with k <= MAX_K the true
                // value fits and nothing wraps.
                let d = if unsigned {
                    d.wrapping_sub(sum.wrapping_mul(128))
                } else {
                    d
                };
                *o = d as f32 * sa * sw + b;
            }
        }
        // The channels left out of the int8 product, in `f32`.
        for (o, x) in out.chunks_exact_mut(self.n).zip(x.chunks_exact(self.k)) {
            for &j in &scratch.picked {
                let v = x[j];
                for (o, &w) in o.iter_mut().zip(&self.wt[j * self.n..][..self.n]) {
                    *o += v * w;
                }
            }
        }
    }
}

fn kernel_is_unsigned(kernel: Kernel) -> bool {
    #[cfg(target_arch = "x86_64")]
    if kernel.0 == Kind::Avx512Vnni {
        return true;
    }
    let _ = kernel;
    false
}

/// Quantized activations, reused from call to call.
#[derive(Default)]
pub(crate) struct Activations {
    q: Vec<i8>,
    scales: Vec<f32>,
    /// The integer products of the last call, `m` rows of `n` padded to whole tiles.
    dots: Vec<i32>,
    /// The input channels of the last call kept out of the int8 product, in increasing order.
    picked: Vec<usize>,
    order: Vec<usize>,
    /// Each channel's largest size over the call's tokens, then a token without the picked
    /// channels.
    work: Vec<f32>,
}

impl Activations {
    #[inline(always)]
    fn quantize(&mut self, x: &[f32], m: usize, k: usize, k_pad: usize, outliers: usize) {
        self.q.clear();
        // Token rows padded with zero rows to a whole tile, as weight rows are.
        self.q.resize(m.div_ceil(TOKENS) * TOKENS * k_pad, 0);
        self.scales.clear();
        self.picked.clear();
        if outliers == 0 {
            for (row, out) in x.chunks_exact(k).zip(self.q.chunks_exact_mut(k_pad)) {
                self.scales.push(quantize_row(row, out));
            }
            return;
        }
        self.work.clear();
        self.work.resize(k, 0.0);
        for row in x.chunks_exact(k) {
            for (m, v) in self.work.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
        // The `outliers` largest, ties to the lower channel.
        self.order.clear();
        self.order.extend(0..k);
        let size = &self.work;
        self.order.select_nth_unstable_by(outliers - 1, |&a, &b| {
            size[b].total_cmp(&size[a]).then(a.cmp(&b))
        });
        self.picked.extend_from_slice(&self.order[..outliers]);
        self.picked.sort_unstable();
        for (row, out) in x.chunks_exact(k).zip(self.q.chunks_exact_mut(k_pad)) {
            self.work.clear();
            self.work.extend_from_slice(row);
            for &j in &self.picked {
                self.work[j] = 0.0;
            }
            self.scales.push(quantize_row(&self.work, out));
        }
    }
}

/// `dots[t * ROWS + r]` = Σ `a[t]·w[r]` over [`TOKENS`] activation rows and [`ROWS`] weight rows
/// of `k_pad` bytes each. The VNNI kernel treats activations as unsigned (`a + 128`), so its
/// results exceed the others by `128 · Σ w[r]`, which the caller subtracts.
fn dot_block(kernel: Kernel, a: &[i8], w: &[i8], k_pad: usize, dots: &mut [i32; ROWS * TOKENS]) {
    match kernel.0 {
        Kind::Scalar => scalar(a, w, k_pad, dots),
        #[cfg(target_arch = "x86_64")]
        Kind::Avx2 => x86::avx2(kernel, a, w, k_pad, dots),
        #[cfg(target_arch = "x86_64")]
        Kind::Avx512Vnni => x86::avx512_vnni(kernel, a, w, k_pad, dots),
    }
}

fn scalar(a: &[i8], w: &[i8], k_pad: usize, dots: &mut [i32; ROWS * TOKENS]) {
    for t in 0..TOKENS {
        let a = &a[t * k_pad..][..k_pad];
        for r in 0..ROWS {
            let w = &w[r * k_pad..][..k_pad];
            dots[t * ROWS + r] = a
                .iter()
                .zip(w)
                .map(|(&x, &y)| i32::from(x) * i32::from(y))
                .sum();
        }
    }
}

/// The SIMD kernels. `unsafe` is allowed here only: for the `std::arch` intrinsics (each entry
/// takes the [`Kernel`] that [`Kernel::detect`] made after detecting its features, and checks
/// it is its own) and their unaligned loads, whose bounds each entry asserts itself.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Kernel, Kind, LANE, ROWS, TOKENS};

    // `reduce16` sums a tile of exactly four rows by four tokens.
    const _: () = assert!(ROWS == 4 && TOKENS == 4);

    /// The bounds every kernel's loads rely on: `a` holds [`TOKENS`] and `w` [`ROWS`] rows of
    /// `k_pad` bytes, a whole number of [`LANE`]s.
    fn check_bounds(a: &[i8], w: &[i8], k_pad: usize) {
        assert!(k_pad.is_multiple_of(LANE), "row of {k_pad} bytes");
        assert!(
            a.len() >= TOKENS * k_pad && w.len() >= ROWS * k_pad,
            "tile of {} and {} bytes for rows of {k_pad}",
            a.len(),
            w.len()
        );
    }

    pub(super) fn avx2(
        kernel: Kernel,
        a: &[i8],
        w: &[i8],
        k_pad: usize,
        dots: &mut [i32; ROWS * TOKENS],
    ) {
        assert_eq!(kernel.0, Kind::Avx2);
        check_bounds(a, w, k_pad);
        // SAFETY: a `Kernel` holding `Kind::Avx2` is only made by `Kernel::detect`/`available`
        // after detecting AVX2 (its field is private to `int8`); the loads stay inside `a` and
        // `w`, whose lengths were just asserted.
        unsafe { avx2_impl(a.as_ptr(), w.as_ptr(), k_pad, dots) }
    }

    pub(super) fn avx512_vnni(
        kernel: Kernel,
        a: &[i8],
        w: &[i8],
        k_pad: usize,
        dots: &mut [i32; ROWS * TOKENS],
    ) {
        assert_eq!(kernel.0, Kind::Avx512Vnni);
        check_bounds(a, w, k_pad);
        // SAFETY: a `Kernel` holding `Kind::Avx512Vnni` is only made after detecting AVX-512
        // F, BW and VNNI; the bounds were just asserted, as above.
        unsafe { avx512_impl(a.as_ptr(), w.as_ptr(), k_pad, dots) }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn avx2_impl(a: *const i8, w: *const i8, k_pad: usize, dots: &mut [i32; ROWS * TOKENS]) {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_si256(); ROWS]; TOKENS];
        let mut k = 0;
        while k < k_pad {
            for half in [0, 32] {
                let mut wv = [_mm256_setzero_si256(); ROWS];
                for (r, wv) in wv.iter_mut().enumerate() {
                    // SAFETY: k + half + 32 <= k_pad, inside row r.
                    *wv = unsafe { _mm256_loadu_si256(w.add(r * k_pad + k + half).cast()) };
                }
                for (t, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: as above, inside token row t.
                    let av = unsafe { _mm256_loadu_si256(a.add(t * k_pad + k + half).cast()) };
                    let abs = _mm256_sign_epi8(av, av);
                    for (acc, &wv) in acc.iter_mut().zip(&wv) {
                        let p = _mm256_maddubs_epi16(abs, _mm256_sign_epi8(wv, av));
                        *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(p, ones));
                    }
                }
            }
            k += LANE;
        }
        for (t, acc) in acc.iter().enumerate() {
            for (r, &v) in acc.iter().enumerate() {
                let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
                dots[t * ROWS + r] = _mm_cvtsi128_si32(s);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn avx512_impl(
        a: *const i8,
        w: *const i8,
        k_pad: usize,
        dots: &mut [i32; ROWS * TOKENS],
    ) {
        let flip = _mm512_set1_epi8(-128);
        let mut acc = [[_mm512_setzero_si512(); ROWS]; TOKENS];
        let mut k = 0;
        while k < k_pad {
            let mut wv = [_mm512_setzero_si512(); ROWS];
            for (r, wv) in wv.iter_mut().enumerate() {
                // SAFETY: k + 64 <= k_pad, inside row r.
                *wv = unsafe { _mm512_loadu_si512(w.add(r * k_pad + k).cast()) };
            }
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: as above, inside token row t.
                let av = unsafe { _mm512_loadu_si512(a.add(t * k_pad + k).cast()) };
                // a + 128 as unsigned bytes.
                let au = _mm512_xor_si512(av, flip);
                for (acc, &wv) in acc.iter_mut().zip(&wv) {
                    *acc = _mm512_dpbusd_epi32(*acc, au, wv);
                }
            }
            k += LANE;
        }
        // SAFETY: `dots` is sixteen writable `i32`s.
        unsafe { _mm512_storeu_si512(dots.as_mut_ptr().cast(), reduce16(&acc)) };
    }

    /// The sixteen registers' sums in one register, lane `4t + r` holding `acc[t][r]`'s: a
    /// transpose-and-add tree (pairs within 128-bit lanes, then the lanes across registers) of
    /// 30 shuffles and 15 additions, where sixteen separate reductions take four of each apiece.
    #[target_feature(enable = "avx512f")]
    fn reduce16(acc: &[[__m512i; ROWS]; TOKENS]) -> __m512i {
        // Within each 128-bit lane: [v0₀ + v0₂, v1₀ + v1₂, v0₁ + v0₃, v1₁ + v1₃].
        let pair = |v0: __m512i, v1: __m512i| {
            _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1))
        };
        // Within each 128-bit lane: the lane's sums of v0, v1, v2, v3, in that order.
        let quad = |v: &[__m512i; 4]| {
            let (s01, s23) = (pair(v[0], v[1]), pair(v[2], v[3]));
            _mm512_add_epi32(
                _mm512_unpacklo_epi64(s01, s23),
                _mm512_unpackhi_epi64(s01, s23),
            )
        };
        let [q0, q1, q2, q3] = [quad(&acc[0]), quad(&acc[1]), quad(&acc[2]), quad(&acc[3])];
        // [a₀ + a₂, a₁ + a₃, b₀ + b₂, b₁ + b₃] of the 128-bit lanes of a and b.
        let halve = |a: __m512i, b: __m512i| {
            _mm512_add_epi32(
                _mm512_shuffle_i32x4::<0b01_00_01_00>(a, b),
                _mm512_shuffle_i32x4::<0b11_10_11_10>(a, b),
            )
        };
        let (r01, r23) = (halve(q0, q1), halve(q2, q3));
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0b10_00_10_00>(r01, r23),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(r01, r23),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    #[test]
    fn every_kernel_gives_the_plain_integers() {
        let mut seed = 7;
        for (m, n, k) in [
            (1, 4, 384),
            (5, 7, 100),
            (9, 13, 1536),
            (4, 1, 64),
            (3, 5, 1),
        ] {
            let x: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed) * 3.0).collect();
            let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed)).collect();
            let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let lin = QLinear::new(&w, b, n, k);
            let mut scratch = Activations::default();
            let mut want = Vec::new();
            lin.forward(Kernel::scalar(), &x, &mut scratch, &mut want);
            for kernel in Kernel::available() {
                let mut got = Vec::new();
                lin.forward(kernel, &x, &mut scratch, &mut got);
                assert_eq!(got, want, "{kernel:?} at {m}×{k}·{k}×{n}");
            }
            // And the integers approximate the f32 product.
            for t in 0..m {
                for r in 0..n {
                    let exact: f32 =
                        (0..k).map(|i| x[t * k + i] * w[r * k + i]).sum::<f32>() + lin.bias[r];
                    let got = want[t * n + r];
                    let tol = 0.02 * (k as f32).sqrt() * 3.0;
                    assert!((exact - got).abs() < tol, "{exact} vs {got}");
                }
            }
        }
    }

    #[test]
    fn outlier_channels_in_f32_rescue_the_others_precision() {
        // Two channels forty times the others' size, as a LayerNorm's output has.
        let (m, n, k) = (6, 24, 96);
        let mut seed = 13;
        let big = |i: usize| if i % 48 == 5 { 40.0 } else { 1.0 };
        let x: Vec<f32> = (0..m * k).map(|i| lcg(&mut seed) * big(i % k)).collect();
        let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed)).collect();
        let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
        let plain = QLinear::new(&w, b.clone(), n, k);
        let split = QLinear::with_outliers(&w, b.clone(), n, k, 2);
        let mut scratch = Activations::default();
        let mut error = |lin: &QLinear, kernel: Kernel| {
            let mut out = Vec::new();
            lin.forward(kernel, &x, &mut scratch, &mut out);
            let mut worst = 0f32;
            for t in 0..m {
                for r in 0..n {
                    let exact: f32 =
                        (0..k).map(|i| x[t * k + i] * w[r * k + i]).sum::<f32>() + b[r];
                    worst = worst.max((exact - out[t * n + r]).abs());
                }
            }
            (worst, out)
        };
        let (plain_error, _) = error(&plain, Kernel::scalar());
        let (split_error, reference) = error(&split, Kernel::scalar());
        assert!(
            split_error < plain_error / 4.0,
            "error {split_error} with the two channels in f32, {plain_error} without"
        );
        for kernel in Kernel::available() {
            assert_eq!(error(&split, kernel).1, reference, "{kernel:?}");
        }
        assert_eq!(scratch.picked, [5, 53]);
        // Every channel in f32 is the f32 product (summed in another order).
        let all = QLinear::with_outliers(&w, b.clone(), n, k, k + 1);
        let mut out = Vec::new();
        all.forward(Kernel::detect(), &x, &mut scratch, &mut out);
        for t in 0..m {
            for r in 0..n {
                let exact: f32 = (0..k).map(|i| x[t * k + i] * w[r * k + i]).sum::<f32>() + b[r];
                assert!((exact - out[t * n + r]).abs() < 1e-3, "{t},{r}");
            }
        }
    }

    #[test]
    fn rounding_is_to_the_nearest_integer_ties_to_even() {
        let mut seed = 11;
        let mut xs: Vec<f32> = (0..10_000).map(|_| lcg(&mut seed) * 127.0).collect();
        xs.extend([
            0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -126.5, 127.0, -127.0, 0.0, 0.49999997,
        ]);
        for x in xs {
            assert_eq!(round_to_i32(x), x.round_ties_even() as i32, "{x}");
        }
    }

    #[test]
    fn a_row_scales_to_its_largest_value_past_a_nan_and_an_infinity_zeroes_it() {
        // Twenty values: sixteen lanes and a tail of four.
        let mut x = [0.25f32; 20];
        x[18] = -0.5;
        x[3] = f32::NAN;
        let mut out = [1i8; 24];
        assert_eq!(quantize_row(&x, &mut out), 0.5 / 127.0);
        assert_eq!((out[0], out[3], out[18], out[19]), (64, 0, -127, 64));
        // A NaN with a payload is 0 too.
        x[3] = f32::from_bits(0x7fc0_0001);
        quantize_row(&x, &mut out);
        assert_eq!(out[3], 0);
        assert_eq!(&out[20..], &[0; 4]);
        x[7] = f32::INFINITY;
        assert_eq!(quantize_row(&x, &mut out), 0.0);
        assert_eq!(out, [0; 24]);
    }

    #[test]
    fn extreme_values_do_not_saturate() {
        let k = 256;
        let x = vec![-1.0f32; k];
        let w = vec![-1.0f32; k];
        let lin = QLinear::new(&w, vec![0.0], 1, k);
        let mut scratch = Activations::default();
        for kernel in Kernel::available() {
            let mut out = Vec::new();
            lin.forward(kernel, &x, &mut scratch, &mut out);
            assert!((out[0] - k as f32).abs() < 1e-3, "{kernel:?}: {}", out[0]);
        }
    }

    #[test]
    fn the_longest_row_does_not_overflow() {
        // Activations of +127 are the VNNI kernel's worst case: (127 + 128) · 127 a product.
        let k = MAX_K;
        let lin = QLinear::new(&vec![1.0f32; k], vec![0.0], 1, k);
        let mut scratch = Activations::default();
        for kernel in Kernel::available() {
            let mut out = Vec::new();
            lin.forward(kernel, &vec![1.0f32; k], &mut scratch, &mut out);
            assert!((out[0] - k as f32).abs() < 1.0, "{kernel:?}: {}", out[0]);
        }
    }

    #[test]
    fn a_zero_row_stays_zero() {
        let lin = QLinear::new(&[0.0; 8], vec![0.5, 0.5], 2, 4);
        let mut out = Vec::new();
        lin.forward(
            Kernel::detect(),
            &[0.0; 4],
            &mut Activations::default(),
            &mut out,
        );
        assert_eq!(out, vec![0.5, 0.5]);
    }
}
