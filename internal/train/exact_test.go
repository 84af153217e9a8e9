package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/shard"
)

// gpDrawTable draws n inputs uniformly on [-2, 2]^d and y from the GP with kernel k (prior
// draw by Cholesky) plus noise of variance noise.
func gpDrawTable(t *testing.T, n, d int, k kernel.Kernel, noise float64, seed uint64) *shard.Table {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	tab := &shard.Table{Source: "gp-draw", D: d, X: make([]float64, n*d), Y: make([]float64, n)}
	for i := range tab.X {
		tab.X[i] = 4*rng.Float64() - 2
	}
	K := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := k.Eval(tab.X[i*d:(i+1)*d], tab.X[j*d:(j+1)*d])
			if i == j {
				v += 1e-8
			}
			K.SetSym(i, j, v)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(K) {
		t.Fatal("prior covariance not positive definite")
	}
	var L mat.TriDense
	ch.LTo(&L)
	z := make([]float64, n)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	for i := 0; i < n; i++ {
		var f float64
		for j := 0; j <= i; j++ {
			f += L.At(i, j) * z[j]
		}
		tab.Y[i] = f + math.Sqrt(noise)*rng.NormFloat64()
	}
	return tab
}

// TestExactKernelChoice: with the default kernel (KernelAuto) the exact method fits rbf,
// matern52 and matern32 and keeps the one of highest marginal likelihood. The model is
// checked against the three fits with the kernel named (each at its own optimum, on all
// rows, as the choice is when n <= startRows): the chosen family is the argmax of their
// likelihoods, with a clear margin over the others where the data say so (a draw from a
// Matern 3/2 GP, a smooth sine), and the model is that named fit's optimum; the reason
// quotes the likelihoods. A named kernel makes no choice.
func TestExactKernelChoice(t *testing.T) {
	rough := kernel.Kernel{Family: kernel.Matern32, Lengthscales: []float64{0.7, 1.5}, SignalVariance: 1}
	for _, c := range []struct {
		name string
		tab  *shard.Table
		want string
	}{
		{"matern32-draw", gpDrawTable(t, 300, 2, rough, 0.01, 5), "matern32"},
		{"sine", synthTable(300, 2, 9), "rbf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			named := map[string]float64{}
			var bestName string
			for _, fam := range kernelChoices() {
				spec := DefaultSpec("exact")
				spec.Kernel = fam.String()
				m, err := Run(ctx, localEngine(t, c.tab, 3, 2), spec, Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				if m.KernelReason != "" || m.Kernel != fam.String() {
					t.Fatalf("named kernel %s: model kernel %s, reason %q", fam, m.Kernel, m.KernelReason)
				}
				named[fam.String()] = m.LogLik
				if bestName == "" || m.LogLik > named[bestName] {
					bestName = fam.String()
				}
			}
			if bestName != c.want {
				t.Fatalf("named fits' likelihoods %v: best %s, the case expects %s", named, bestName, c.want)
			}
			for n, l := range named {
				if n != bestName && named[bestName]-l < 1 {
					t.Fatalf("likelihoods %v: %s beats %s by less than 1 nat; the case does not separate the families", named, bestName, n)
				}
			}
			spec := DefaultSpec("exact")
			if spec.Kernel != KernelAuto {
				t.Fatalf("exact's default kernel %q, want %q", spec.Kernel, KernelAuto)
			}
			m, err := Run(ctx, localEngine(t, c.tab, 3, 2), spec, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Kernel != c.want {
				t.Fatalf("chose %s (%s), want %s; named fits %v", m.Kernel, m.KernelReason, c.want, named)
			}
			if d := math.Abs(m.LogLik - named[c.want]); d > 1e-3 {
				t.Errorf("chosen model's log likelihood %.6f, the named %s fit's %.6f (|diff| %.2g > 1e-3)", m.LogLik, c.want, named[c.want], d)
			}
			if !strings.Contains(m.KernelReason, "all 300 training rows") {
				t.Errorf("reason %q does not say it compared on all 300 rows", m.KernelReason)
			}
			for n, l := range named {
				if q := fmt.Sprintf("%s %.2f", n, l); !strings.Contains(m.KernelReason, q) {
					t.Errorf("reason %q does not quote %q (the named %s fit's likelihood)", m.KernelReason, q, n)
				}
			}
		})
	}
}

// TestKernelAutoMethods: auto is the default kernel of exact, cg, kmcg and auto, rbf of the other
// methods; naming auto with another method is refused with the setting's name; auto choosing
// another method than those trains it with rbf.
func TestKernelAutoMethods(t *testing.T) {
	for _, c := range []struct{ method, want string }{{"exact", KernelAuto}, {"cg", KernelAuto}, {Auto, KernelAuto}, {"kmcg", KernelAuto}, {"gl", "rbf"}, {"grief", "rbf"}, {"rff", "rbf"}} {
		if got := DefaultSpec(c.method).Kernel; got != c.want {
			t.Errorf("DefaultSpec(%s).Kernel = %q, want %q", c.method, got, c.want)
		}
	}
	spec := DefaultSpec("rff")
	spec.Kernel = KernelAuto
	if err := spec.Validate(2); err == nil || !strings.HasPrefix(err.Error(), "kernel: auto") {
		t.Errorf("rff with kernel auto: %v, want a kernel error", err)
	}
	spec = DefaultSpec(Auto)
	set(&spec, "exact_max_rows", 100)
	set(&spec, "cg_max_rows", 100)
	spec.LengthscaleBounds = [2]float64{0.5, 1}
	spec.MaxIter = 5
	m, err := Run(context.Background(), localEngine(t, synthTable(600, 1, 71), 4, 2), spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Method == "exact" || m.Kernel != "rbf" || m.KernelReason != "" {
		t.Errorf("auto above exact-max-rows trained %s with kernel %s (reason %q), want another method with rbf", m.Method, m.Kernel, m.KernelReason)
	}
}
