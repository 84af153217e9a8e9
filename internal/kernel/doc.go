// Package kernel implements the stationary covariance functions of gpreduce: the squared
// exponential (RBF) and the Matern family with nu = 1/2, 3/2, 5/2, all with ARD lengthscales.
// It gives kernel values, their gradients with respect to the log-hyperparameters, and the
// normalised spectral densities p(eta) in the angular-frequency convention
// k(tau) = sigma_f^2 * Int exp(-i tau^T eta) p(eta) d eta, with their log-gradients, which the
// Fourier-feature methods use.
package kernel
