package coordinator

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestPlanFromSpecCG: the settings of cg and kmcg map to train.Spec and back, through the
// stored (encoded) form.
func TestPlanFromSpecCG(t *testing.T) {
	data := &pb.DataSource{Uri: "d.csv"}
	for _, tc := range []struct {
		name string
		js   *pb.JobSpec
		want proto.Message
	}{
		{"cg rr",
			&pb.JobSpec{Method: "cg", Settings: &pb.JobSpec_Cg{Cg: &pb.CGSettings{Truncation: " rr ", RrMin: 40, RrRate: 0.1, Probes: 7, PrecondRank: 12,
				LearningRate: 0.02, CgTol: 1e-5, VarianceRank: 50}}, Data: data},
			&pb.CGSettings{Truncation: "rr", RrMin: 40, RrRate: 0.1, Probes: 7, PrecondRank: 12, LearningRate: 0.02, CgTol: 1e-5, VarianceRank: 50}},
		{"cg fixed without preconditioner, flat fields of a stored job",
			&pb.JobSpec{Method: "cg", Truncation: "fixed", CgIters: 30, PrecondRank: -1, Data: data},
			&pb.CGSettings{Truncation: "fixed", CgIters: 30, PrecondRank: -1}},
		{"cg defaults", &pb.JobSpec{Method: "cg", Data: data}, &pb.CGSettings{}},
		{"kmcg", &pb.JobSpec{Method: "kmcg", Settings: &pb.JobSpec_Kmcg{Kmcg: &pb.KMCGSettings{CgIters: 64, CgTol: 0.05, Subset: 2000, VarianceRank: 300, KmcgNoise: " evidence"}}, Data: data},
			&pb.KMCGSettings{CgIters: 64, CgTol: 0.05, Subset: 2000, VarianceRank: 300, KmcgNoise: "evidence"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planFromSpec(tc.js)
			if err != nil {
				t.Fatal(err)
			}
			want := train.DefaultSpec(tc.js.Method)
			want.Settings = tc.want
			if !specEqual(p.Spec, want) {
				t.Fatalf("spec %+v\nwant %+v", p.Spec, want)
			}
			b, err := encodeSpec(specFromPlan(p))
			if err != nil {
				t.Fatal(err)
			}
			stored, err := decodeSpec(b)
			if err != nil {
				t.Fatal(err)
			}
			again, err := planFromSpec(stored)
			if err != nil {
				t.Fatal(err)
			}
			if !planEqual(again, p) {
				t.Fatalf("round trip: %+v\nwant %+v", again.Spec, p.Spec)
			}
			if !proto.Equal(specFromPlan(again), stored) {
				t.Error("the stored spec does not round-trip")
			}
		})
	}
}

// TestPlanFromSpecCGErrors: misplaced or out-of-range CG settings are InvalidArgument errors
// naming the JobSpec field.
func TestPlanFromSpecCGErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		js   *pb.JobSpec
		want string
	}{
		{"unknown truncation", &pb.JobSpec{Method: "cg", Truncation: "geometric"}, "spec.truncation: unknown truncation"},
		{"truncation for kmcg", &pb.JobSpec{Method: "kmcg", Truncation: "rr"}, "spec.truncation: a setting of cg; drop it for method kmcg"},
		{"probes for rff", &pb.JobSpec{Method: "rff", Probes: 3}, "spec.probes: a setting of cg; drop it for method rff"},
		{"rr_min with fixed J", &pb.JobSpec{Method: "cg", CgIters: 50, RrMin: 10}, "spec.rr_min:"},
		{"cg_iters with rr", &pb.JobSpec{Method: "cg", Truncation: "rr", CgIters: 50}, "spec.cg_iters:"},
		{"rr_rate for fixed", &pb.JobSpec{Method: "cg", Truncation: "fixed", RrRate: 0.1}, "spec.rr_rate:"},
		{"negative cg_iters", &pb.JobSpec{Method: "kmcg", CgIters: -1}, "spec.cg_iters:"},
		{"precond_rank -2", &pb.JobSpec{Method: "cg", PrecondRank: -2}, "spec.precond_rank:"},
		{"too many probes", &pb.JobSpec{Method: "cg", Probes: 5000}, "spec.probes:"},
		{"negative learning_rate", &pb.JobSpec{Method: "cg", LearningRate: -0.1}, "spec.learning_rate:"},
		{"cg_tol 1", &pb.JobSpec{Method: "cg", CgTol: 1}, "spec.cg_tol:"},
		{"subset for cg", &pb.JobSpec{Method: "cg", Subset: 100}, "spec.subset: a setting of kmcg; drop it for method cg"},
		{"negative subset", &pb.JobSpec{Method: "kmcg", Subset: -3}, "spec.subset:"},
		{"variance_rank for grief", &pb.JobSpec{Method: "grief", VarianceRank: 10}, "spec.variance_rank: a setting of cg and kmcg; drop it for method grief"},
		{"kmcg_noise for cg", &pb.JobSpec{Method: "cg", KmcgNoise: "evidence"}, "spec.kmcg_noise: a setting of kmcg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.js.Data = &pb.DataSource{Uri: "d.csv"}
			_, err := planFromSpec(tc.js)
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
				t.Fatalf("error %v, want InvalidArgument starting %q", err, tc.want)
			}
		})
	}
}
