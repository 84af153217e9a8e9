package model

// Describe lists what `model show` prints about a valid model, in this order: method (and,
// for --method auto, method_requested and method_reason), kernel (and kernel_reason when
// the exact, cg or kmcg method chose it by the evidence), d, columns and target when
// named, n_train, the hyperparameters in the original units of the data (lengthscales,
// signal_variance, noise_variance), log_likelihood (and log_likelihood_se when it is an
// estimate), iterations, domain and train_box (in original units, when the model has them), warnings (as
// "code: message", when any), then posterior (its registered name) and the posterior's own
// fields (Posterior.Describe). Names are stable snake_case keys; values are plain types (see
// Field).
func (m *Model) Describe() []Field {
	f := []Field{{"method", m.Method}}
	if c := m.Choice; c != nil {
		f = append(f, Field{"method_requested", c.Requested}, Field{"method_reason", c.Reason})
	}
	f = append(f, Field{"kernel", m.Kernel})
	if m.KernelReason != "" {
		f = append(f, Field{"kernel_reason", m.KernelReason})
	}
	f = append(f, Field{"d", m.D})
	if len(m.Columns) > 0 {
		f = append(f, Field{"columns", m.Columns})
	}
	if m.Target != "" {
		f = append(f, Field{"target", m.Target})
	}
	h := m.Original()
	f = append(f,
		Field{"n_train", m.NTrain},
		Field{"lengthscales", h.Lengthscales},
		Field{"signal_variance", h.SignalVariance},
		Field{"noise_variance", h.NoiseVariance},
		Field{"log_likelihood", m.LogLik},
	)
	if m.LogLikSE != 0 {
		f = append(f, Field{"log_likelihood_se", m.LogLikSE})
	}
	f = append(f, Field{"iterations", m.Iterations})
	if m.Domain != nil {
		f = append(f, Field{"domain", m.DomainString()})
	}
	if m.TrainBox != nil {
		f = append(f, Field{"train_box", m.TrainBoxString()})
	}
	if len(m.Warnings) > 0 {
		w := make([]string, len(m.Warnings))
		for i, x := range m.Warnings {
			w[i] = x.String()
		}
		f = append(f, Field{"warnings", w})
	}
	if m.Posterior != nil {
		f = append(f, Field{"posterior", m.Posterior.Name()})
		f = append(f, m.Posterior.Describe()...)
	}
	return f
}
