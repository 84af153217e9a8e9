package coordinator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestMetricsRecords: the metrics stored with a model decode to the pb.JobMetrics they were
// encoded from, and the JSON records of earlier versions (the runner's own struct) still
// decode, field by field.
func TestMetricsRecords(t *testing.T) {
	full := &pb.JobMetrics{
		Hyperparameters: &pb.Hyperparameters{Lengthscales: []float64{0.5, 2}, SignalVariance: 1.5, NoiseVariance: 0.01},
		NTrain:          1500, LogLikelihood: -123.25, Iterations: 17, TrainSeconds: 2.5, ModelBytes: 4096,
		MethodChoice: &pb.MethodChoice{Method: "exact", Reason: "n = 40 <= exact-max-rows 5000"},
		Warnings:     []*pb.Warning{{Code: "not_converged", Message: "raise max-iter"}},
		Kernel:       "matern32", KernelReason: "matern32: the highest log marginal likelihood",
	}
	enc, err := encodeMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		record []byte
		want   *pb.JobMetrics
	}{
		{"encoded now", enc, full},
		{"earlier JSON record", []byte(`{"hyperparameters":{"lengthscales":[0.5,2],"signal_variance":1.5,"noise_variance":0.01},` +
			`"n_train":1500,"log_likelihood":-123.25,"iterations":17,"train_seconds":2.5,` +
			`"method_choice":{"method":"exact","reason":"n = 40 <= exact-max-rows 5000"},"warnings":[{"code":"not_converged","message":"raise max-iter"}]}`),
			&pb.JobMetrics{
				Hyperparameters: full.Hyperparameters, NTrain: 1500, LogLikelihood: -123.25, Iterations: 17, TrainSeconds: 2.5,
				MethodChoice: full.MethodChoice, Warnings: full.Warnings,
			}},
		{"earlier record without choice or warnings", []byte(`{"hyperparameters":{"lengthscales":[1],"signal_variance":1,"noise_variance":0.5},"n_train":3,"log_likelihood":-1,"iterations":2,"train_seconds":0.5}`),
			&pb.JobMetrics{Hyperparameters: &pb.Hyperparameters{Lengthscales: []float64{1}, SignalVariance: 1, NoiseVariance: 0.5},
				NTrain: 3, LogLikelihood: -1, Iterations: 2, TrainSeconds: 0.5}},
	} {
		got, err := decodeMetrics(tc.record)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !proto.Equal(got, tc.want) {
			t.Errorf("%s: decoded %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := decodeMetrics([]byte(`{"n_train":`)); err == nil {
		t.Error("a truncated record decoded")
	}
}
