//! The real-time work: C = A × B for n×n matrices of f64 (the DROPS paper's 64×64 matrix
//! multiply). f64 because it is what such a kernel computes in practice; three 64×64
//! matrices take 96 KiB, more than an L1 and less than most L2s.

use std::hint::black_box;

/// The three matrices, allocated and filled before anything is timed.
pub struct Matrices {
    n: usize,
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Matrices {
    pub fn new(n: usize) -> Self {
        let fill = |seed: f64| -> Vec<f64> {
            (0..n * n)
                .map(|i| ((i % 17) as f64 + seed) / 16.0)
                .collect()
        };
        Matrices {
            n,
            a: fill(1.0),
            b: fill(2.0),
            c: vec![0.0; n * n],
        }
    }

    /// Bytes the three matrices take.
    pub fn bytes(n: usize) -> u64 {
        (3 * n * n * std::mem::size_of::<f64>()) as u64
    }

    /// One multiply; returns an element so the work cannot be optimised away.
    #[inline(never)]
    pub fn multiply(&mut self) -> f64 {
        let n = self.n;
        let (a, b) = (black_box(&self.a), black_box(&self.b));
        for (i, row) in self.c.chunks_exact_mut(n).enumerate() {
            row.fill(0.0);
            for (k, &aik) in a[i * n..(i + 1) * n].iter().enumerate() {
                for (cij, &bkj) in row.iter_mut().zip(&b[k * n..(k + 1) * n]) {
                    *cij += aik * bkj;
                }
            }
        }
        black_box(self.c[n * n / 2 + n / 3])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_is_right() {
        let mut m = Matrices::new(3);
        m.a = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        m.b = vec![1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0];
        m.multiply();
        assert_eq!(m.c, vec![1.0, 4.0, 9.0, 4.0, 10.0, 18.0, 7.0, 16.0, 27.0]);
        // Run twice: C is recomputed, not accumulated.
        m.multiply();
        assert_eq!(m.c[8], 27.0);
        assert_eq!(Matrices::bytes(64), 96 * 1024);
    }
}
