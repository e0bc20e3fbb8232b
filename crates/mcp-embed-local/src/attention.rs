//! Scaled dot-product attention of one unpadded text, every head, in `f32`.
//!
//! Laid out so the compiler vectorises each step and keeps its sums in registers: a head's
//! keys are copied transposed (one row per key channel, one column per token), so sixteen
//! tokens' scores are summed in one register over the query's channels; the softmax's maximum,
//! exponentials and sum run in sixteen lanes, the exponential a polynomial rather than a call
//! per value; and sixteen channels of the output are summed in one register over the tokens.
//! A text's attention is a small share of the encoder's arithmetic (tokens² against tokens ×
//! weights) and must not cost more than that share, which a score at a time did: a dot product
//! reduced to one number, a call to `exp` each, and sums stored and reloaded for every token.

/// Columns of a transposed key row: tokens padded to a multiple of sixteen lanes.
const LANES: usize = 16;

/// Query rows computed together: each load of keys or values feeds four independent sums,
/// where one sum at a time waits on its previous addition for every product.
const ROWS: usize = 4;

/// Buffers reused from layer to layer and head to head.
#[derive(Default)]
pub(super) struct Buffers {
    /// One head's keys, transposed: `d` rows of the padded token count.
    keys: Vec<f32>,
    /// [`ROWS`] queries of one head, scaled by `1 / √d`; zero past the text's last token.
    queries: Vec<f32>,
    /// Those queries' scores against every (padded) token, then their softmax: [`ROWS`] rows.
    scores: Vec<f32>,
}

/// `ctx` (`n` rows of `h`) ← softmax(Q Kᵀ / √d) V for each of `heads` heads of `d = h / heads`
/// channels, from `qkv`: `n` rows of `3h` (the query, key and value of a token side by side).
#[inline(always)]
pub(super) fn attention(
    qkv: &[f32],
    n: usize,
    h: usize,
    heads: usize,
    ctx: &mut Vec<f32>,
    buf: &mut Buffers,
) {
    assert_eq!(qkv.len(), n * 3 * h, "query/key/value shape");
    assert!(heads > 0 && h.is_multiple_of(heads), "{heads} heads of {h}");
    let d = h / heads;
    let scale = 1.0 / (d as f32).sqrt();
    let padded = n.div_ceil(LANES) * LANES;
    ctx.clear();
    ctx.resize(n * h, 0.0);
    buf.keys.clear();
    buf.keys.resize(d * padded, 0.0);
    buf.scores.clear();
    buf.scores.resize(ROWS * padded, 0.0);
    let part = |t: usize, which: usize, head: usize| &qkv[t * 3 * h + which * h + head * d..][..d];
    for head in 0..heads {
        // Padding columns stay zero: their scores are never read.
        for t in 0..n {
            for (c, &k) in part(t, 1, head).iter().enumerate() {
                buf.keys[c * padded + t] = k;
            }
        }
        for i0 in (0..n).step_by(ROWS) {
            let rows = ROWS.min(n - i0);
            buf.queries.clear();
            for r in 0..rows {
                buf.queries
                    .extend(part(i0 + r, 0, head).iter().map(|q| q * scale));
            }
            buf.queries.resize(ROWS * d, 0.0);
            let q: [&[f32]; ROWS] = std::array::from_fn(|r| &buf.queries[r * d..][..d]);
            // Sixteen tokens' scores of each query at a time, summed in registers over the
            // channels.
            for j0 in (0..padded).step_by(LANES) {
                let mut acc = [[0f32; LANES]; ROWS];
                for (c, keys) in buf.keys.chunks_exact(padded).enumerate() {
                    let keys: &[f32; LANES] = keys[j0..][..LANES].try_into().expect("lanes");
                    for (acc, q) in acc.iter_mut().zip(&q) {
                        let q = q[c];
                        for (a, &k) in acc.iter_mut().zip(keys) {
                            *a += q * k;
                        }
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    buf.scores[r * padded + j0..][..LANES].copy_from_slice(acc);
                }
            }
            // Past the text's last token a row's scores stay zero: it adds nothing below.
            let mut inv = [0f32; ROWS];
            for (r, inv) in inv.iter_mut().enumerate().take(rows) {
                *inv = 1.0 / softmax_unnormalised(&mut buf.scores[r * padded..][..n]);
            }
            let w: [&[f32]; ROWS] = std::array::from_fn(|r| &buf.scores[r * padded..][..n]);
            // Sixteen channels of each query's output at a time, summed in registers over the
            // tokens.
            for c0 in (0..d).step_by(LANES) {
                let len = LANES.min(d - c0);
                let mut acc = [[0f32; LANES]; ROWS];
                if len == LANES {
                    for j in 0..n {
                        let v: &[f32; LANES] =
                            part(j, 2, head)[c0..][..LANES].try_into().expect("lanes");
                        for (acc, w) in acc.iter_mut().zip(&w) {
                            let w = w[j];
                            for (a, &v) in acc.iter_mut().zip(v) {
                                *a += w * v;
                            }
                        }
                    }
                } else {
                    for j in 0..n {
                        let v = &part(j, 2, head)[c0..][..len];
                        for (acc, w) in acc.iter_mut().zip(&w) {
                            for (a, &v) in acc.iter_mut().zip(v) {
                                *a += w[j] * v;
                            }
                        }
                    }
                }
                for r in 0..rows {
                    let out = &mut ctx[(i0 + r) * h + head * d + c0..][..len];
                    for (o, &a) in out.iter_mut().zip(&acc[r]) {
                        *o = a * inv[r];
                    }
                }
            }
        }
    }
}

/// Replaces each score by `exp(score - max)` and returns their sum.
#[inline(always)]
fn softmax_unnormalised(scores: &mut [f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = scores.chunks_exact(LANES);
    let mut max = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    for chunk in chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = if v > *m { v } else { *m };
        }
    }
    for &m in &lanes {
        max = if m > max { m } else { max };
    }
    let mut sums = [0f32; LANES];
    let mut chunks = scores.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (s, v) in sums.iter_mut().zip(chunk) {
            *v = exp(*v - max);
            *s += *v;
        }
    }
    let mut total = 0.0;
    for v in chunks.into_remainder() {
        *v = exp(*v - max);
        total += *v;
    }
    total + sums.iter().sum::<f32>()
}

/// `eˣ` to within a few units in the last place for `x` in [-87, 88] (below -87 it gives e⁻⁸⁷,
/// about 1.6 · 10⁻³⁸, never 0; a softmax only asks for `x <= 0`): `x = m·ln 2 + r` with `|r| <= ln 2
/// / 2`, a degree-6 polynomial for `eʳ` (Cephes' minimax coefficients), and `2ᵐ` made in the
/// exponent bits. Branch-free, so loops over it vectorise; a NaN stays a NaN.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, so that m · LN2_HI is exact for the m that occur.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let m = super::int8::round_to_i32(x * LOG2E);
    let mf = m as f32;
    let r = x - mf * LN2_HI - mf * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // m is in [-126, 127]: a normal power of two.
    er * f32::from_bits(((m + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::{Buffers, attention, exp};

    /// The textbook attention, a score at a time in `f64`.
    fn reference(qkv: &[f32], n: usize, h: usize, heads: usize) -> Vec<f32> {
        let d = h / heads;
        let at = |t: usize, which: usize, head: usize, c: usize| {
            f64::from(qkv[t * 3 * h + which * h + head * d + c])
        };
        let mut ctx = vec![0f32; n * h];
        for head in 0..heads {
            for i in 0..n {
                let scores: Vec<f64> = (0..n)
                    .map(|j| {
                        (0..d)
                            .map(|c| at(i, 0, head, c) * at(j, 1, head, c))
                            .sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = e.iter().sum();
                for c in 0..d {
                    let v: f64 = (0..n).map(|j| e[j] / total * at(j, 2, head, c)).sum();
                    ctx[i * h + head * d + c] = v as f32;
                }
            }
        }
        ctx
    }

    #[test]
    fn every_head_matches_the_textbook_attention() {
        let mut seed = 9u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 6.0
        };
        let mut buf = Buffers::default();
        let mut ctx = vec![7.0; 5];
        // Token counts below, at and past a multiple of the lanes; a head of one channel, and one of
        // twenty (a whole block of sixteen channels and a partial one).
        for (n, h, heads) in [
            (1, 8, 2),
            (5, 12, 3),
            (16, 64, 4),
            (33, 384, 12),
            (7, 3, 3),
            (9, 40, 2),
        ] {
            let qkv: Vec<f32> = (0..n * 3 * h).map(|_| next()).collect();
            attention(&qkv, n, h, heads, &mut ctx, &mut buf);
            let want = reference(&qkv, n, h, heads);
            assert_eq!(ctx.len(), want.len());
            for (k, (&got, &want)) in ctx.iter().zip(&want).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{n} tokens, {heads} heads of {h}: {got} vs {want} at {k}"
                );
            }
        }
    }

    #[test]
    fn exp_is_within_a_few_units_in_the_last_place() {
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            assert!(
                ((got - want) / want).abs() < 4.0 * f64::from(f32::EPSILON),
                "exp({x}) = {got}, not {want}"
            );
            x += 0.001_3;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
        assert!(exp(f32::NAN).is_nan());
    }
}
