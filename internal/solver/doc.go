// Package solver holds the dense and iterative linear algebra of gpreduce: the exact-GP
// reference by Cholesky (log marginal likelihood, gradient, predictions), which every
// approximation is tested against; the n-independent likelihood of feature models computed
// from reduced Gram statistics alone (digest 000 §2.3); and, for GP training by conjugate
// gradients, batched preconditioned CG over an operator, the pivoted-Cholesky/Woodbury
// preconditioner, Lanczos quadrature and stochastic log-determinants, and the unbiased
// Russian-roulette truncation of CG (digest 004).
package solver
