// Package model holds trained models: the learned hyperparameters, the standardization of
// the training data and the posterior each method needs to predict, with a versioned binary
// encoding. Predictions (mean, latent variance, noisy variance) are in the original units of
// the target; Evaluate scores them against held-out rows.
package model
