package linalg

import "golang.org/x/sys/cpu"

// hasAVX2FMA reports whether the assembly kernels may run: AVX2 and FMA3, with the OS saving
// the YMM state (cpu.X86.HasAVX2 includes that check).
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// asmKernels are the AVX2 + FMA micro-kernels.
var asmKernels = &kernels{tile: kernelAVX2, direct: kernelDirectAVX2, narrow: kernelNarrowAVX2}

// bestKernel is the assembly pair when the CPU has AVX2 and FMA, else the portable one.
var bestKernel = pickKernel()

func pickKernel() kernelFunc {
	if hasAVX2FMA {
		return asmKernels
	}
	return goKernels
}

// kernelAVX2 is kernelGo in AVX2 + FMA assembly (kernel_amd64.s).
//
//go:noescape
func kernelAVX2(k int, a, b, c []float64, ldc int, alpha float64)

// axpyNegAVX2 sets y[j] = fma(-t, x[j], y[j]) for j < len(y) (kernel_amd64.s); x must be at
// least as long as y.
//
//go:noescape
func axpyNegAVX2(t float64, x, y []float64)

// axpyNeg sets y = fma(-t, x, y) elementwise, in assembly when the CPU allows.
func axpyNeg(t float64, x, y []float64) {
	if len(y) == 0 {
		return
	}
	if hasAVX2FMA {
		_ = x[len(y)-1]
		axpyNegAVX2(t, x, y)
		return
	}
	axpyNegGo(t, x, y)
}

// expAVX2 sets dst[i] = expGo(x[i]) for i < len(dst) rounded down to a multiple of 4
// (kernel_amd64.s), with the constants of expTable and expTable4.
//
//go:noescape
func expAVX2(dst, x []float64, table, table4 *float64)

// expTable4 holds ln 2 (high, low) and the Taylor coefficients of expTable (degree 13 down to
// 0), each repeated four times: full-width memory operands for the assembly. Set once here
// and only read afterwards.
var expTable4 = func() (t [(2 + expDeg + 1) * 4]float64) {
	vals := append([]float64{expLn2Hi, expLn2Lo}, expTable[8:]...)
	for i, v := range vals {
		for l := range 4 {
			t[i*4+l] = v
		}
	}
	return t
}()

// expVec computes the exponential of the leading multiple of four elements in assembly when
// the CPU allows, and returns how many it did.
func expVec(dst, x []float64) int {
	if !hasAVX2FMA || len(dst) < 4 {
		return 0
	}
	_ = x[len(dst)-1]
	expAVX2(dst, x, &expTable[0], &expTable4[0])
	return len(dst) &^ 3
}

// kernelDirectAVX2 is kernelDirectGo in assembly (kernel_amd64.s).
//
//go:noescape
func kernelDirectAVX2(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64)

// kernelNarrowAVX2 is kernelNarrowGo in assembly (kernel_amd64.s).
//
//go:noescape
func kernelNarrowAVX2(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64)
