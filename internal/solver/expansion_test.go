package solver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// denseExpansion builds the expansion of the exact posterior on random data (n rows, d
// columns): Alpha = (K + s2 I)^-1 y and Minus = L^-T with K + s2 I = L L^T, so
// Minus Minus^T = (K + s2 I)^-1. It also returns the Exact solve of the same problem.
func denseExpansion(t testing.TB, fam kernel.Family, n, d int, seed uint64) (*ExpansionPredictor, *Exact) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	X, y := randData(rng, n, d)
	ls := make([]float64, d)
	for i := range ls {
		ls[i] = 0.6 + rng.Float64()
	}
	k := kernel.Kernel{Family: fam, Lengthscales: ls, SignalVariance: 1.3}
	const s2 = 0.05
	e, err := NewExact(k, s2, X, d, y)
	if err != nil {
		t.Fatal(err)
	}
	K := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			K.SetSym(i, j, k.Eval(X[i*d:(i+1)*d], X[j*d:(j+1)*d]))
		}
		K.SetSym(i, i, K.At(i, i)+s2)
	}
	var ch mat.Cholesky
	if !ch.Factorize(K) {
		t.Fatal("K + s2 I not positive definite")
	}
	var alpha mat.VecDense
	if err := ch.SolveVecTo(&alpha, mat.NewVecDense(n, y)); err != nil {
		t.Fatal(err)
	}
	var L mat.TriDense
	ch.LTo(&L)
	var Linv mat.TriDense
	if err := Linv.InverseTri(&L); err != nil {
		t.Fatal(err)
	}
	minus := make([]float64, n*n) // L^-T: entry (i, j) is (L^-1)_{j,i}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			minus[i*n+j] = Linv.At(j, i)
		}
	}
	p := &ExpansionPredictor{Kernel: k, X: X, D: d, Alpha: append([]float64(nil), alpha.RawVector().Data...), Minus: minus, RMinus: n}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p, e
}

func testInputs(rng *rand.Rand, rows, d int) []float64 {
	xs := make([]float64, rows*d)
	for i := range xs {
		xs[i] = 3*rng.Float64() - 1.5
	}
	// The first row is far from every stored input: its variance is the prior k(x,x).
	for k := 0; k < d && rows > 0; k++ {
		xs[k] = 40
	}
	return xs
}

func closeTo(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// TestExpansionMatchesExact: with Minus = L^-T the expansion is the exact posterior.
func TestExpansionMatchesExact(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.RBF, kernel.Matern32} {
		t.Run(fam.String(), func(t *testing.T) {
			const n, d = 40, 2
			p, e := denseExpansion(t, fam, n, d, 3)
			rng := rand.New(rand.NewPCG(4, 5))
			for _, rows := range []int{0, 1, 63, 64, 65, 150} {
				xs := testInputs(rng, rows, d)
				mean, lv := make([]float64, rows), make([]float64, rows)
				wm, wv := make([]float64, rows), make([]float64, rows)
				p.Predict(xs, mean, lv)
				e.Predictor().Predict(xs, wm, wv)
				only := make([]float64, rows)
				p.Predict(xs, only, nil)
				for i := 0; i < rows; i++ {
					if !closeTo(mean[i], wm[i], 1e-10) || !closeTo(lv[i], wv[i], 1e-10) {
						t.Fatalf("rows %d, row %d: mean %v var %v, exact %v %v", rows, i, mean[i], lv[i], wm[i], wv[i])
					}
					if only[i] != mean[i] {
						t.Fatalf("rows %d, row %d: mean without variance %v, with %v", rows, i, only[i], mean[i])
					}
				}
				if rows > 0 && !closeTo(lv[0], 1.3, 1e-12) {
					t.Errorf("far row: latent variance %v, want the prior 1.3", lv[0])
				}
			}
		})
	}
}

// TestExpansionPlus checks the Plus term against the formula evaluated directly, one row
// and one entry at a time.
func TestExpansionPlus(t *testing.T) {
	const n, d, rm, rp = 40, 2, 5, 3
	p, _ := denseExpansion(t, kernel.Matern52, n, d, 6)
	rng := rand.New(rand.NewPCG(7, 8))
	// A low-rank Minus so that the clamp at zero is rarely active, and a nonzero Plus.
	p.Minus, p.RMinus = make([]float64, n*rm), rm
	for i := range p.Minus {
		p.Minus[i] = 0.1 * rng.NormFloat64()
	}
	p.Plus, p.RPlus, p.PlusScale = make([]float64, n*rp), rp, 0.7
	for i := range p.Plus {
		p.Plus[i] = 0.1 * rng.NormFloat64()
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	const rows = 130
	xs := testInputs(rng, rows, d)
	mean, lv := make([]float64, rows), make([]float64, rows)
	p.Predict(xs, mean, lv)
	kx := make([]float64, n)
	for r := 0; r < rows; r++ {
		x := xs[r*d : (r+1)*d]
		var mu float64
		for i := 0; i < n; i++ {
			kx[i] = p.Kernel.Eval(x, p.X[i*d:(i+1)*d])
			mu += kx[i] * p.Alpha[i]
		}
		quad := func(M []float64, r int) float64 {
			var s float64
			for j := 0; j < r; j++ {
				var c float64
				for i := 0; i < n; i++ {
					c += M[i*r+j] * kx[i]
				}
				s += c * c
			}
			return s
		}
		v := math.Max(0, p.Kernel.Eval(x, x)-quad(p.Minus, rm)+p.PlusScale*quad(p.Plus, rp))
		if !closeTo(mean[r], mu, 1e-12) || !closeTo(lv[r], v, 1e-12) {
			t.Fatalf("row %d: mean %v var %v, direct %v %v", r, mean[r], lv[r], mu, v)
		}
	}
	// PlusScale = 0 is the same as no Plus term.
	q := *p
	q.PlusScale = 0
	q2 := *p
	q2.Plus, q2.RPlus = nil, 0
	a, b := make([]float64, rows), make([]float64, rows)
	q.Predict(xs, make([]float64, rows), a)
	q2.Predict(xs, make([]float64, rows), b)
	for i := range a {
		if !closeTo(a[i], b[i], 1e-14) {
			t.Fatalf("row %d: PlusScale 0 gives %v, no Plus %v", i, a[i], b[i])
		}
	}
}

// TestExpansionParallelBlocks: with enough stored inputs a block's kernel rows are shared
// among goroutines and the rows span two blocks; the result has the same bits as predicting
// each row alone (linalg's products sum in a fixed order whatever the block).
func TestExpansionParallelBlocks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const m, d, rm, rp, rows = 1500, 3, 7, 2, 1100
	rng := rand.New(rand.NewPCG(11, 12))
	p := &ExpansionPredictor{
		Kernel: kernel.Kernel{Family: kernel.Matern12, Lengthscales: []float64{0.5, 1, 2}, SignalVariance: 0.9},
		X:      make([]float64, m*d), D: d, Alpha: make([]float64, m),
		Minus: make([]float64, m*rm), RMinus: rm, Plus: make([]float64, m*rp), RPlus: rp, PlusScale: 0.2,
	}
	for _, v := range [][]float64{p.X, p.Alpha, p.Minus, p.Plus} {
		for i := range v {
			v[i] = 0.05 * rng.NormFloat64()
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := min(4, expansionBlock, expansionBlock*m/(1<<14)); w < 2 {
		t.Fatalf("test does not reach the shared path (%d workers)", w)
	}
	if b := expansionRows(m); rows <= b {
		t.Fatalf("%d rows fit in one block of %d", rows, b)
	}
	xs := testInputs(rng, rows, d)
	mean, lv := make([]float64, rows), make([]float64, rows)
	p.Predict(xs, mean, lv)
	only := make([]float64, rows)
	p.Predict(xs, only, nil)
	m1, v1 := make([]float64, 1), make([]float64, 1)
	for i := 0; i < rows; i++ {
		p.Predict(xs[i*d:(i+1)*d], m1, v1)
		if mean[i] != m1[0] || lv[i] != v1[0] || only[i] != mean[i] {
			t.Fatalf("row %d: block gives %v %v (mean alone %v), row alone %v %v", i, mean[i], lv[i], only[i], m1[0], v1[0])
		}
	}
}

func TestExpansionValidate(t *testing.T) {
	base := func() *ExpansionPredictor {
		p, _ := denseExpansion(t, kernel.RBF, 6, 2, 9)
		p.Plus, p.RPlus, p.PlusScale = make([]float64, 6*2), 2, 0.1
		return p
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(p *ExpansionPredictor){
		"zero value":            func(p *ExpansionPredictor) { *p = ExpansionPredictor{} },
		"unknown family":        func(p *ExpansionPredictor) { p.Kernel.Family = kernel.Family(9) },
		"negative family":       func(p *ExpansionPredictor) { p.Kernel.Family = -1 },
		"NaN lengthscale":       func(p *ExpansionPredictor) { p.Kernel.Lengthscales[0] = math.NaN() },
		"zero signal":           func(p *ExpansionPredictor) { p.Kernel.SignalVariance = 0 },
		"D zero":                func(p *ExpansionPredictor) { p.D = 0 },
		"D negative":            func(p *ExpansionPredictor) { p.D = -2 },
		"D huge":                func(p *ExpansionPredictor) { p.D = math.MaxInt },
		"D not kernel dim":      func(p *ExpansionPredictor) { p.D = 1; p.X = p.X[:6] },
		"kernel dim not D":      func(p *ExpansionPredictor) { p.Kernel.Lengthscales = []float64{1, 1, 1} },
		"no alpha":              func(p *ExpansionPredictor) { p.Alpha = nil },
		"alpha long":            func(p *ExpansionPredictor) { p.Alpha = append(p.Alpha, 0) },
		"X short":               func(p *ExpansionPredictor) { p.X = p.X[:11] },
		"X one row short":       func(p *ExpansionPredictor) { p.X = p.X[:10] },
		"Minus short":           func(p *ExpansionPredictor) { p.Minus = p.Minus[:35] },
		"RMinus zero":           func(p *ExpansionPredictor) { p.RMinus = 0 },
		"RMinus zero no Minus":  func(p *ExpansionPredictor) { p.RMinus, p.Minus = 0, nil },
		"RMinus negative":       func(p *ExpansionPredictor) { p.RMinus = -6 },
		"RMinus huge":           func(p *ExpansionPredictor) { p.RMinus = math.MaxInt },
		"RMinus min int":        func(p *ExpansionPredictor) { p.RMinus = math.MinInt },
		"RMinus wrong":          func(p *ExpansionPredictor) { p.RMinus = 3 },
		"Plus without rank":     func(p *ExpansionPredictor) { p.RPlus = 0 },
		"RPlus without Plus":    func(p *ExpansionPredictor) { p.Plus = nil },
		"RPlus negative":        func(p *ExpansionPredictor) { p.RPlus = -1 },
		"RPlus min int":         func(p *ExpansionPredictor) { p.RPlus = math.MinInt },
		"RPlus huge":            func(p *ExpansionPredictor) { p.RPlus = math.MaxInt },
		"Plus short":            func(p *ExpansionPredictor) { p.Plus = p.Plus[:11] },
		"PlusScale negative":    func(p *ExpansionPredictor) { p.PlusScale = -0.1 },
		"PlusScale NaN":         func(p *ExpansionPredictor) { p.PlusScale = math.NaN() },
		"PlusScale Inf":         func(p *ExpansionPredictor) { p.PlusScale = math.Inf(1) },
		"NaN X":                 func(p *ExpansionPredictor) { p.X[3] = math.NaN() },
		"Inf alpha":             func(p *ExpansionPredictor) { p.Alpha[2] = math.Inf(-1) },
		"NaN Minus":             func(p *ExpansionPredictor) { p.Minus[7] = math.NaN() },
		"Inf Plus":              func(p *ExpansionPredictor) { p.Plus[5] = math.Inf(1) },
		"NaN Plus with scale 0": func(p *ExpansionPredictor) { p.PlusScale = 0; p.Plus[0] = math.NaN() },
	} {
		t.Run(name, func(t *testing.T) {
			p := base()
			mut(p)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
						t.Errorf("Validate panicked: %v", r)
					}
				}()
				err = p.Validate()
			}()
			if err == nil {
				t.Errorf("Validate accepted it")
			}
		})
	}
	// Valid variants: no Plus at all, and PlusScale 0 with a Plus.
	p := base()
	p.Plus, p.RPlus = nil, 0
	if err := p.Validate(); err != nil {
		t.Errorf("no Plus: %v", err)
	}
	p = base()
	p.PlusScale = 0
	if err := p.Validate(); err != nil {
		t.Errorf("PlusScale 0: %v", err)
	}
}

// BenchmarkExpansionPredict: m = 50000 stored inputs in D = 4, RMinus = 64, 256 test rows.
func BenchmarkExpansionPredict(b *testing.B) {
	const m, d, r, rows = 50000, 4, 64, 256
	rng := rand.New(rand.NewPCG(1, 1))
	p := &ExpansionPredictor{
		Kernel: kernel.Kernel{Family: kernel.Matern32, Lengthscales: []float64{1, 1, 1, 1}, SignalVariance: 1},
		X:      make([]float64, m*d), D: d, Alpha: make([]float64, m), Minus: make([]float64, m*r), RMinus: r,
	}
	for _, v := range [][]float64{p.X, p.Alpha, p.Minus} {
		for i := range v {
			v[i] = rng.NormFloat64()
		}
	}
	xs := testInputs(rng, rows, d)
	mean, lv := make([]float64, rows), make([]float64, rows)
	b.ResetTimer()
	for b.Loop() {
		p.Predict(xs, mean, lv)
	}
}

// BenchmarkExpansionPredictUCI: the shapes of cg's posterior on energy and concrete split 0
// (m training rows, d = 8, the test rows) at LOVE's rank 100 and at the adaptive cache's rank,
// and on elevators split 0 (m = 14940; d = 8 here, the kernel rows are a small share) at the
// ranks of its rbf and matern32 caches, for 256 rows (the leave-one-out check predicts every
// training row, 14940, the same way).
func BenchmarkExpansionPredictUCI(b *testing.B) {
	for _, c := range []struct {
		name          string
		m, rows, rank int
	}{{"energy/r=100", 692, 76, 100}, {"energy/r=400", 692, 76, 400}, {"concrete/r=100", 927, 103, 100}, {"concrete/r=480", 927, 103, 480},
		{"elevators/r=934", 14940, 256, 934}, {"elevators/r=2245", 14940, 256, 2245}} {
		b.Run(c.name, func(b *testing.B) {
			const d = 8
			rng := rand.New(rand.NewPCG(2, 2))
			p := &ExpansionPredictor{
				Kernel: kernel.Kernel{Family: kernel.RBF, Lengthscales: []float64{1, 2, 1, 2, 1, 2, 1, 2}, SignalVariance: 1},
				X:      make([]float64, c.m*d), D: d, Alpha: make([]float64, c.m), Minus: make([]float64, c.m*c.rank), RMinus: c.rank,
			}
			for _, v := range [][]float64{p.X, p.Alpha, p.Minus} {
				for i := range v {
					v[i] = rng.NormFloat64()
				}
			}
			xs := testInputs(rng, c.rows, d)
			mean, lv := make([]float64, c.rows), make([]float64, c.rows)
			b.ResetTimer()
			for b.Loop() {
				p.Predict(xs, mean, lv)
			}
		})
	}
}
