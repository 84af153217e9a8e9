package kernel

import "golang.org/x/sys/cpu"

// hasAVX reports whether distAVX may run (AVX with the OS saving the YMM state).
var hasAVX = cpu.X86.HasAVX

// distAVX is distArgsGo for the leading multiple of four columns, in AVX assembly
// (dist_amd64.s); root is 0 or 1.
//
//go:noescape
func distAVX(e, row, nb []float64, na, tiny, c float64, root int)

// distVec runs distAVX when the CPU allows and returns how many columns it did.
func distVec(root bool, c, na float64, nb, row, e []float64) int {
	if !hasAVX || len(e) < 4 {
		return 0
	}
	_, _ = row[len(e)-1], nb[len(e)-1]
	r := 0
	if root {
		r = 1
	}
	distAVX(e, row, nb, na, tinyDist2, c, r)
	return len(e) &^ 3
}
