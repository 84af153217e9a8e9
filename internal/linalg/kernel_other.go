//go:build !amd64

package linalg

const hasAVX2FMA = false

// bestKernel is the portable micro-kernel pair on this architecture.
var bestKernel = goKernels

// asmKernels are the portable kernels on this architecture (no assembly here).
var asmKernels = goKernels

// axpyNeg sets y = fma(-t, x, y) elementwise.
func axpyNeg(t float64, x, y []float64) { axpyNegGo(t, x, y) }

// expVec does nothing here: ExpTo uses expGo for every element.
func expVec(dst, x []float64) int { return 0 }
