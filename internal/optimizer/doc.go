// Package optimizer minimises the hyperparameter objectives of gpreduce over
// log-hyperparameters: a projected (box-constrained) L-BFGS for exact objectives and Adam with
// learning-rate schedules for stochastic ones. Neither ever evaluates the objective outside the
// box it is given, and both keep their whole state in plain exported structs that can be
// gob- or JSON-encoded, so a run resumed from a saved state continues bit for bit like an
// uninterrupted one.
package optimizer
