package train

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/linalg"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
)

// BenchmarkSyrk times the symmetric rank-k update G += Z^T Z alone on one row block
// (tasks.GramBlockRows x s), the kernel of the Gram pass, by the compute core (linalg.Syrk, what
// tasks.GramTask calls) and by gonum's pure-Go blas64.Syrk for the ratio; GFLOP/s counts
// rows * s^2 flops (the upper triangle's s(s+1)/2 multiply-adds per row, two flops each, to
// leading order), as BenchmarkGramShard does, so the two rates compare directly.
func BenchmarkSyrk(b *testing.B) {
	for _, s := range []int{256, 1024} {
		for _, impl := range []struct {
			name string
			f    func(blas.Transpose, float64, blas64.General, float64, blas64.Symmetric)
		}{{"linalg", linalg.Syrk}, {"gonum", blas64.Syrk}} {
			b.Run(fmt.Sprintf("s=%d/%s", s, impl.name), func(b *testing.B) {
				z := make([]float64, tasks.GramBlockRows*s)
				for i := range z {
					z[i] = math.Sin(float64(i))
				}
				g := make([]float64, s*s)
				Z := blas64.General{Rows: tasks.GramBlockRows, Cols: s, Stride: s, Data: z}
				G := blas64.Symmetric{Uplo: blas.Upper, N: s, Stride: s, Data: g}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					impl.f(blas.Trans, 1, Z, 1, G)
				}
				flops := float64(b.N) * tasks.GramBlockRows * float64(s) * float64(s+1)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGramShard times the GL map step on one shard (features + Syrk + Gemv), reporting
// rows per second and the Syrk-equivalent GFLOP/s.
func BenchmarkGramShard(b *testing.B) {
	for _, c := range []struct{ d, nodes int }{{1, 256}, {1, 1024}, {2, 32}} {
		b.Run(fmt.Sprintf("d=%d/s=%d", c.d, int(math.Pow(float64(c.nodes), float64(c.d)))), func(b *testing.B) {
			tab := synthTable(8192, c.d, 1)
			gl, task := benchGL(b, tab, c.nodes)
			s := gl.NumFeatures()
			ref := shard.Ref{Rows: tab.N()}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := task.Map(context.Background(), ref, tab); err != nil {
					b.Fatal(err)
				}
			}
			rows := float64(b.N) * float64(tab.N())
			b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(rows*float64(s)*float64(s+1)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGramPass times one full pass (the moments are not included) over 2^17 rows in
// 16 shards on the local engine with all cores: the rows per second of the Gram round.
func BenchmarkGramPass(b *testing.B) {
	tab := synthTable(1<<17, 1, 2)
	eng := localEngine(b, tab, 16, runtime.NumCPU())
	_, task := benchGL(b, tab, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := eng.Reduce(context.Background(), task); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(tab.N())/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkGLIteration times one likelihood-and-gradient evaluation from the reduced
// statistics, after a Gram pass over n rows: it must be flat in n (O(s^3), the n-free form
// derived from Fink Shustin & Avron 2022, §4.2).
// The pass itself is set-up and is not timed (for n = 1e6 it takes about a minute).
func BenchmarkGLIteration(b *testing.B) {
	for _, n := range []int{1e4, 1e5, 1e6} {
		b.Run(fmt.Sprintf("n=%d/s=256", n), func(b *testing.B) {
			tab := synthTable(n, 1, 3)
			eng := localEngine(b, tab, (n+65535)/65536, runtime.NumCPU())
			p, err := prepare(context.Background(), eng, Spec{}, func(Event) {})
			if err != nil {
				b.Fatal(err)
			}
			gl, err := features.NewGL(kernel.RBF, []float64{20}, []int{256})
			if err != nil {
				b.Fatal(err)
			}
			st, err := eng.Reduce(context.Background(), &tasks.GramTask{Features: gl, Transform: p.tf})
			if err != nil {
				b.Fatal(err)
			}
			lik := newGLLikelihood(gl, st.(*reduce.Gram))
			theta := []float64{math.Log(0.5), 0, math.Log(0.01)}
			grad := make([]float64, 3)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := lik.objective(theta, grad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchGL(b *testing.B, tab *shard.Table, nodes int) (*features.GL, *tasks.GramTask) {
	b.Helper()
	U := make([]float64, tab.D)
	np := make([]int, tab.D)
	for k := range U {
		U[k], np[k] = 20, nodes
	}
	gl, err := features.NewGL(kernel.RBF, U, np)
	if err != nil {
		b.Fatal(err)
	}
	m := reduce.NewMoments(tab.D + 1)
	row := make([]float64, tab.D+1)
	for i := 0; i < tab.N(); i++ {
		copy(row, tab.Row(i))
		row[tab.D] = tab.Y[i]
		m.Add(row)
	}
	tf, err := shard.NewTransform(m, nil)
	if err != nil {
		b.Fatal(err)
	}
	return gl, &tasks.GramTask{Features: gl, Transform: tf}
}
