//go:build !amd64

package kernel

// hasAVX is false off amd64: there is no assembly here.
const hasAVX = false

// distVec does nothing here: distArgs uses distArgsGo for every column.
func distVec(root bool, c, na float64, nb, row, e []float64) int { return 0 }
