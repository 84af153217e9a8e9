package kernel

import "math"

// distArgs turns row (-2 a.b_j for the columns of a tile) into the exponential's arguments:
// with r^2 = dist2(na + nb_j, row_j), e_j = -r^2/2 (root false), or row_j = a = c r and
// e_j = -a (root true). Four columns at a time in AVX assembly when the CPU allows; the bits
// are the same either way (distArgsGo).
func distArgs(root bool, c, na float64, nb, row, e []float64) {
	nb, e = nb[:len(row)], e[:len(row)]
	done := distVec(root, c, na, nb, row, e)
	distArgsGo(root, c, na, nb[done:], row[done:], e[done:])
}

// distArgsGo is distArgs in Go, the same operations as the assembly lane by lane.
func distArgsGo(root bool, c, na float64, nb, row, e []float64) {
	nb, e = nb[:len(row)], e[:len(row)]
	if !root {
		for j, x := range row {
			e[j] = -dist2(na+nb[j], x) / 2
		}
		return
	}
	for j, x := range row {
		row[j] = c * math.Sqrt(dist2(na+nb[j], x))
		e[j] = -row[j]
	}
}
