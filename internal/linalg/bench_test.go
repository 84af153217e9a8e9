package linalg

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// The benchmarks report GFLOP/s; compare with the reference measured in the same run (README,
// "Compute core"). They are not part of CI.

// BenchmarkSyrkGram is the Gram accumulation G += Z^T Z over n = 20000 rows in blocks of 256
// rows (as tasks.GramTask does); flops counted as n s^2 (the upper triangle's multiply-adds).
func BenchmarkSyrkGram(b *testing.B) {
	const n, block = 20000, 256
	for _, s := range []int{256, 1024} {
		for _, impl := range []struct {
			name string
			f    func(blas.Transpose, float64, blas64.General, float64, blas64.Symmetric)
		}{{"linalg", Syrk}, {"gonum", blas64.Syrk}} {
			b.Run(fmt.Sprintf("s=%d/%s", s, impl.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				z := randGeneral(rng, block, s, 0)
				g := blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: make([]float64, s*s)}
				b.ResetTimer()
				for b.Loop() {
					for lo := 0; lo < n; lo += block {
						z.Rows = min(block, n-lo)
						impl.f(blas.Trans, 1, z, 1, g)
					}
				}
				b.ReportMetric(float64(n)*float64(s)*float64(s)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemm is C = A B for square n x n matrices (2 n^3 flops).
func BenchmarkGemm(b *testing.B) {
	for _, n := range []int{512, 2048} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			x, y, c := randGeneral(rng, n, n, 0), randGeneral(rng, n, n, 0), randGeneral(rng, n, n, 0)
			for b.Loop() {
				Gemm(blas.NoTrans, blas.NoTrans, 1, x, y, 0, c)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPotrf is the Cholesky factorisation of an s x s SPD matrix (s^3/3 flops), lower
// and upper (mat.Cholesky's layout) triangle, against gonum's lapack64.Potrf.
func BenchmarkPotrf(b *testing.B) {
	for _, s := range []int{1024, 4096} {
		for _, impl := range []struct {
			name string
			f    func(blas64.Symmetric) (blas64.Triangular, bool)
		}{{"linalg", Potrf}, {"gonum", lapack64.Potrf}} {
			if impl.name == "gonum" && s > 1024 && !testing.Verbose() {
				continue // minutes per factorisation; run with -v to include it
			}
			b.Run(fmt.Sprintf("s=%d/%s", s, impl.name), func(b *testing.B) {
				a := randSPD(rand.New(rand.NewPCG(1, 1)), s)
				work := make([]float64, len(a))
				for b.Loop() {
					copy(work, a)
					if _, ok := impl.f(blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: work}); !ok {
						b.Fatal("not positive definite")
					}
				}
				b.ReportMetric(float64(s)*float64(s)*float64(s)/3*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmKV is the CG product of a cached kernel block with a few vectors,
// C (rows x k) = K_block (rows x n) V^T with V^T k x n (tasks.KernelTask's shape): k = 11 is
// cg's ten probes and y, on the narrow tile ("narrow") and on the two 6 x 8 tiles it
// replaced ("wide"); 934 x 14940 is one of elevators' 16 shards.
func BenchmarkGemmKV(b *testing.B) {
	wide := &kernels{tile: bestKernel.tile, direct: bestKernel.direct}
	for _, sz := range [][3]int{{256, 4096, 11}, {934, 14940, 11}} {
		rows, n, k := sz[0], sz[1], sz[2]
		rng := rand.New(rand.NewPCG(1, 1))
		kb, vt, c := randGeneral(rng, rows, n, 0), randGeneral(rng, k, n, 0), randGeneral(rng, rows, k, 0)
		for _, p := range []struct {
			name string
			kern kernelFunc
		}{{"narrow", bestKernel}, {"wide", wide}} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", rows, n, k, p.name), func(b *testing.B) {
				for b.Loop() {
					gemmWith(p.kern, blas.NoTrans, blas.Trans, 1, kb, vt, 0, c)
				}
				b.ReportMetric(2*float64(rows*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkInverse is Cholesky.InverseTo at n = 3000 (the exact GP's gradient on 3000 rows),
// about n^3 flops.
func BenchmarkInverse(b *testing.B) {
	const n = 3000
	var c Cholesky
	if !c.Factorize(mat.NewSymDense(n, randSPD(rand.New(rand.NewPCG(1, 1)), n))) {
		b.Fatal("not positive definite")
	}
	var inv mat.SymDense
	for b.Loop() {
		if err := c.InverseTo(&inv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkTrsmRows is the triangular solve GRIEF-II's gradient pass makes per block of rows
// (tasks.GRIEFGradTask): X L^T = B and X L = B for B of 256 rows and L lower triangular, p x p
// (p^2 flops per row and solve).
func BenchmarkTrsmRows(b *testing.B) {
	const rows = 256
	for _, p := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			l := randGeneral(rng, p, p, 0)
			for i := range p {
				for j := i + 1; j < p; j++ {
					l.Data[i*p+j] = 0
				}
				l.Data[i*p+i] = float64(p)
			}
			L := blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: p, Stride: p, Data: l.Data}
			x := randGeneral(rng, rows, p, 0)
			for b.Loop() {
				Trsm(blas.Right, blas.Trans, 1, L, x)
				Trsm(blas.Right, blas.NoTrans, 1, L, x)
			}
			b.ReportMetric(2*float64(rows)*float64(p)*float64(p)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
