// Package vof is the numerical core of variational orthogonal features (Burt, Rasmussen and
// van der Wilk, "Variational Orthogonal Features"; VOF): sparse variational GP regression whose
// inter-domain features are orthonormal under the prior, so Kuu = I and neither the ELBO nor
// prediction needs an M x M factorisation of the prior covariance.
//
// Two bases are supported. Hermite VOF (Section 3.1.1, Appendix B) have a closed-form
// cross-covariance Kuf for the SE kernel; the data enter the ELBO through the sufficient
// statistics KufStats (sum y^2, sum k_n y_n, sum k_n k_n^T and their derivatives in the
// kernel and feature parameters), which depend on the hyperparameters and so are recomputed
// when they change. TrigVOF (Section 3.1.2, with the standard orthonormal Fourier basis on
// [-a, a]) work for any kernel with a spectral density; their Kuf is an integral estimated
// by Monte Carlo (Section 3.3) on two stratified frequency grids drawn by the coordinator
// (Appendix E.1), and the data enter through TrigStats, which depend only on the data and the
// frequencies: the unbiased ELBO and all its gradients follow on the coordinator. With the
// grid and a held fixed the TrigStats are accumulated once ("fixed grid" mode).
//
// Both statistics types implement reduce.Stats: workers compute them from blocks of rows and
// the coordinator merges them in shard order. Prediction (Section 2, eq. 2 with Kuu = I) uses
// the closed form for Hermite and a deterministic Gauss-Legendre rule on [-a, a] for TrigVOF.
//
// Inputs of dimension d > 1 use tensor products of the 1-D bases or an additive model (one
// 1-D VOF per input), see features.VOFLayout.
//
// One optimisation step, Hermite (or TrigVOF with quadrature Kuf):
//
//	coordinator: p (Params) -> workers
//	worker:      fm := NewFeatureMap(mod, p, 0, xmax); st := AccumulateKuf(fm, p, X, y, d, true)
//	coordinator: merge the shards' st in shard order; F := ELBOKuf(mod, p, st, nTotal, g)
//
// For a full batch, OptimalQ gives the optimal m and S at p's hyperparameters, and ELBOKuf
// there is the collapsed bound with its hyperparameter gradient (an L-BFGS objective in theta
// alone). One step, TrigVOF:
//
//	coordinator: grid := TrigGridForStep(mod, T1, seed, step) -> workers with p.Feature
//	worker:      st := AccumulateTrig(grid, p.Feature, X, y, learnA)
//	coordinator: merge in shard order; F := ELBOTrig(mod, p, grid, st, nTotal, g)
//
// In fixed-grid mode the grid (one step) and a are fixed and the statistics are accumulated
// once. Pack, Unpack and PackGrad map Params and Grad to the flat vectors of the optimisers.
package vof
