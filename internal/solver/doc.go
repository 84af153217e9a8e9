// Package solver holds the dense and iterative linear algebra of gpreduce: the exact-GP
// reference by Cholesky (log marginal likelihood, gradient, predictions), which every
// approximation is tested against; the n-independent likelihood of feature models computed
// from reduced Gram statistics alone (a W^(1/2)-scaled form, derived here, of Fink Shustin &
// Avron 2022, §4.2); and, for GP training by conjugate
// gradients, batched preconditioned CG over an operator, the pivoted-Cholesky/Woodbury
// preconditioner, Lanczos quadrature and stochastic log-determinants, the unbiased
// Russian-roulette truncation of CG (Potapczynski et al. 2021), and the block Lanczos basis
// with its variance monitor behind the predictive-variance cache.
package solver
