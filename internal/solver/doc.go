// Package solver holds the dense linear algebra of gpreduce: the exact-GP reference by
// Cholesky (log marginal likelihood, gradient, predictions), which every approximation is
// tested against, and the n-independent likelihood of feature models computed from reduced
// Gram statistics alone in the stable W^(1/2)-scaled form of digest 000 §2.3.
package solver
