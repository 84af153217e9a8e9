//go:build !amd64

package linalg

const hasAVX2FMA = false

// bestKernel is the portable micro-kernel on this architecture.
var bestKernel kernelFunc = kernelGo

// kernelAVX2 is only available on amd64; elsewhere it is the portable kernel.
func kernelAVX2(k int, a, b, c []float64, ldc int, alpha float64) { kernelGo(k, a, b, c, ldc, alpha) }

// axpyNeg sets y = fma(-t, x, y) elementwise.
func axpyNeg(t float64, x, y []float64) { axpyNegGo(t, x, y) }

// expVec does nothing here: ExpTo uses expGo for every element.
func expVec(dst, x []float64) int { return 0 }
