// Package features builds the finite-dimensional feature maps z(x) that turn a stationary kernel
// into a low-rank sum k~(x, x') = sigma_f^2 sum_j h_j z_j(x) z_j(x'): deterministic Gauss-Legendre
// features on a truncated tensor grid of spectral frequencies (with the automatic choice of the box
// and the node counts), and the random-Fourier-feature baseline with fixed base frequencies. It also
// provides the Gauss-Legendre quadrature rule those features are built from.
package features
