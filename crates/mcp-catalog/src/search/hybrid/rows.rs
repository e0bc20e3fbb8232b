//! The tools' vectors as 16-bit integers, one scale per row: half the memory of `f32`, and a
//! cosine scan of 10,000 tools reads 7.7 MB instead of 15 (at 10,000 tools the scan is bound
//! by memory, not arithmetic).
//!
//! A row `v` (unit length) is kept as `round(v / s)` with `s = max |v| / ROW_LEVELS`; a query
//! `q` likewise with its own scale, chosen at each scan so that no sum of products can leave
//! `i32` (see [`Rows::cosines`]). The cosine is then `s_q · s_v · Σ q̂ᵢ v̂ᵢ`, an integer sum
//! the compiler vectorises on any x86-64 (`pmaddwd`). Rounding moves a cosine by about 10⁻⁵
//! (at most `dim · (s_v/2 + s_q/2)`): bfcl's hit@5 and MRR are the same to the third decimal as
//! with `f32` rows (see the `mcp-embed` section of `docs/ARCHITECTURE.md`).

/// The largest code of a row: 12 bits and a sign. With the query's codes bounded by
/// `i32::MAX / Σ|row codes|`, the finer the rows the coarser the query; 4,095 balances the two
/// roundings for vectors of a few hundred dimensions.
const ROW_LEVELS: f32 = 4095.0;

/// Rows of `dim` codes, each with its scale.
#[derive(Debug, Default)]
pub(super) struct Rows {
    dim: usize,
    codes: Vec<i16>,
    scales: Vec<f32>,
    /// The largest `Σ |code|` of any row: bounds a query's codes.
    max_l1: i64,
    /// Changes with every row added, unique among all `Rows` (0: never given a row).
    generation: u64,
}

/// A generation no `Rows` has had.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `x` rounded to the nearest integer (ties to even), as `i16`; `|x| ≤ 32,767`. Adding and
/// taking away 1.5 · 2²³ leaves no fraction bits: plain arithmetic that vectorises, where
/// `f32::round` is a call per number on the baseline x86-64 target.
fn code(x: f32) -> i16 {
    const MAGIC: f32 = 12_582_912.0;
    ((x + MAGIC) - MAGIC) as i16
}

impl Rows {
    /// No rows, of `dim` numbers each.
    pub(super) fn new(dim: usize, capacity: usize) -> Self {
        Self {
            dim,
            codes: Vec::with_capacity(dim * capacity),
            scales: Vec::with_capacity(capacity),
            max_l1: 0,
            generation: next_generation(),
        }
    }

    /// Changes with every row added and differs between `Rows` ever built with rows: while it
    /// stays the same, so do the rows.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// The numbers in a row.
    pub(super) fn dim(&self) -> usize {
        self.dim
    }

    /// How many rows there are.
    pub(super) fn len(&self) -> usize {
        self.scales.len()
    }

    /// Adds a row of `dim` finite numbers.
    pub(super) fn push(&mut self, v: &[f32]) {
        assert_eq!(v.len(), self.dim, "a row of the index's dimension");
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { max / ROW_LEVELS } else { 0.0 };
        let inv = if max > 0.0 { ROW_LEVELS / max } else { 0.0 };
        let start = self.codes.len();
        self.codes.extend(
            v.iter()
                .map(|&x| code((x * inv).clamp(-ROW_LEVELS, ROW_LEVELS))),
        );
        let l1: i64 = self.codes[start..]
            .iter()
            .map(|&c| i64::from(c).abs())
            .sum();
        self.max_l1 = self.max_l1.max(l1);
        self.scales.push(scale);
        self.generation = next_generation();
    }

    /// Row `row` as `f32` (its codes times its scale).
    pub(super) fn get(&self, row: usize) -> Option<Vec<f32>> {
        let scale = *self.scales.get(row)?;
        let codes = &self.codes[row * self.dim..(row + 1) * self.dim];
        Some(codes.iter().map(|&c| f32::from(c) * scale).collect())
    }

    /// The cosine of `query` (`dim` numbers, unit length) with each row `keep` admits, in row
    /// order, into `out`.
    pub(super) fn cosines(&self, query: &[f32], keep: impl Fn(usize) -> bool, out: &mut Vec<f32>) {
        out.clear();
        if query.len() != self.dim || self.dim == 0 {
            return;
        }
        // The query's codes are bounded so that Σ |q̂ᵢ v̂ᵢ| ≤ max |q̂| · Σ |v̂ᵢ| fits in an i32.
        let levels = (i64::from(i32::MAX) / self.max_l1.max(1)).clamp(1, 32_767) as f32;
        let max = query.iter().fold(0f32, |m, x| m.max(x.abs()));
        let (q_scale, inv) = if max > 0.0 {
            (max / levels, levels / max)
        } else {
            (0.0, 0.0)
        };
        let q: Vec<i16> = query
            .iter()
            .map(|&x| code((x * inv).clamp(-levels, levels)))
            .collect();
        for (row, (codes, &scale)) in self
            .codes
            .chunks_exact(self.dim)
            .zip(&self.scales)
            .enumerate()
        {
            if keep(row) {
                out.push(dot_i16(codes, &q) as f32 * scale * q_scale);
            }
        }
    }
}

/// `Σ aᵢ bᵢ` with wrapping adds: the caller's bounds keep the true sum inside `i32`, and debug
/// builds must not differ. Summed in blocks of 32, which the compiler turns into full-width
/// `pmaddwd`s on any x86-64 (a plain fold loads eight bytes at a time and unpacks them).
fn dot_i16(a: &[i16], b: &[i16]) -> i32 {
    let (a32, b32) = (a.chunks_exact(32), b.chunks_exact(32));
    let mut sum = a32
        .remainder()
        .iter()
        .zip(b32.remainder())
        .fold(0i32, |s, (&x, &y)| {
            s.wrapping_add(i32::from(x) * i32::from(y))
        });
    for (x, y) in a32.zip(b32) {
        let mut block = 0i32;
        for l in 0..32 {
            block = block.wrapping_add(i32::from(x[l]) * i32::from(y[l]));
        }
        sum = sum.wrapping_add(block);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::{ROW_LEVELS, Rows, dot_i16};

    fn unit(seed: &mut u64, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                (*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn cosines_are_those_of_f32_within_the_rounding_bound() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for dim in [384, 3, 17, 1024] {
            let vectors: Vec<Vec<f32>> = (0..200).map(|_| unit(&mut seed, dim)).collect();
            let mut rows = Rows::new(dim, vectors.len());
            for v in &vectors {
                rows.push(v);
            }
            assert_eq!(rows.len(), 200);
            let levels = (i64::from(i32::MAX) / rows.max_l1).clamp(1, 32_767) as f64;
            let max = |v: &[f32]| f64::from(v.iter().fold(0f32, |m, x| m.max(x.abs())));
            let (mut out, mut total, mut worst) = (Vec::new(), 0f64, 0f64);
            for _ in 0..20 {
                let q = unit(&mut seed, dim);
                rows.cosines(&q, |_| true, &mut out);
                assert_eq!(out.len(), 200);
                let s_q = max(&q) / levels;
                for (v, &got) in vectors.iter().zip(&out) {
                    let s_v = max(v) / f64::from(ROW_LEVELS);
                    let (mut want, mut bound) = (0f64, 1e-6);
                    for (&a, &b) in v.iter().zip(&q) {
                        want += f64::from(a) * f64::from(b);
                        bound += f64::from(b.abs()) * s_v / 2.0
                            + f64::from(a.abs()) * s_q / 2.0
                            + s_v * s_q / 4.0;
                    }
                    let error = (f64::from(got) - want).abs();
                    assert!(error <= bound, "{dim}: {got} vs {want}, bound {bound}");
                    total += error;
                    worst = worst.max(error);
                }
            }
            if dim >= 384 {
                // A few parts in 100,000 of a cosine, as the module says.
                assert!(
                    total / 4000.0 < 2e-5 && worst < 1e-4,
                    "{dim}: {total} {worst}"
                );
            }
            let back = rows.get(7).unwrap();
            let top = max(&vectors[7]) as f32;
            for (a, b) in back.iter().zip(&vectors[7]) {
                assert!((a - b).abs() <= top / ROW_LEVELS / 2.0 + 1e-7, "{a} vs {b}");
            }
            assert!(rows.get(200).is_none());
        }
    }

    #[test]
    fn the_filter_keeps_row_order_and_odd_inputs_give_nothing_or_zero() {
        let mut rows = Rows::new(2, 3);
        rows.push(&[1.0, 0.0]);
        rows.push(&[0.0, 0.0]);
        rows.push(&[0.0, -1.0]);
        let mut out = vec![9.0];
        rows.cosines(&[0.6, -0.8], |r| r != 0, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], 0.0);
        assert!((out[1] - 0.8).abs() < 1e-3);
        rows.cosines(&[1.0, 0.0, 0.0], |_| true, &mut out);
        assert!(out.is_empty(), "a query of another dimension");
        rows.cosines(&[0.0, 0.0], |_| true, &mut out);
        assert_eq!(out, vec![0.0; 3]);
    }

    #[test]
    fn the_worst_rows_and_query_do_not_overflow() {
        // Every component at its largest: Σ|row codes| is at its bound, and so is the sum.
        let dim = 4096;
        let flat = vec![1.0 / (dim as f32).sqrt(); dim];
        let mut rows = Rows::new(dim, 1);
        rows.push(&flat);
        let mut out = Vec::new();
        rows.cosines(&flat, |_| true, &mut out);
        assert!((out[0] - 1.0).abs() < 1e-3, "{}", out[0]);
        let negative: Vec<f32> = flat.iter().map(|x| -x).collect();
        rows.cosines(&negative, |_| true, &mut out);
        assert!((out[0] + 1.0).abs() < 1e-3, "{}", out[0]);
        assert_eq!(dot_i16(&[32_767; 3], &[2; 3]), 196_602);
        // Blocks of 32 and a tail.
        let a: Vec<i16> = (0..70).map(|i| i * 7 - 200).collect();
        let b: Vec<i16> = (0..70).map(|i| 300 - i * 11).collect();
        let want: i32 = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        assert_eq!(dot_i16(&a, &b), want);
    }
}
