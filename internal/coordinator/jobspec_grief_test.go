package coordinator

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestPlanFromSpecGRIEF: the GP-GRIEF fields map to train.Spec and back.
func TestPlanFromSpecGRIEF(t *testing.T) {
	js := &pb.JobSpec{Method: "grief", Inference: " type1 ", Grid: 8, Eigenfunctions: 500, Samples: 90, Data: &pb.DataSource{Uri: "d.csv"}}
	p, err := planFromSpec(js)
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.GRIEFSettings{Inference: "type1", Grid: 8, Eigenfunctions: 500, Samples: 90}
	if !proto.Equal(p.Spec.Settings, want) {
		t.Fatalf("settings %v, want %v", p.Spec.Settings, want)
	}
	back := specFromPlan(p)
	if !proto.Equal(back.GetGrief(), want) || back.GetInference() != "" {
		t.Fatalf("JobSpec %v: want the settings under grief, and no flat fields", back)
	}
	p2, err := planFromSpec(back)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(specFromPlan(p2), back) {
		t.Error("the stored spec does not round-trip")
	}
	for field, bad := range map[string]*pb.JobSpec{
		"inference":      {Method: "grief", Inference: "type3"},
		"grid":           {Method: "grief", Grid: -1},
		"eigenfunctions": {Method: "grief", Eigenfunctions: -2},
		"samples":        {Method: "grief", Samples: 5}, // type1 only
	} {
		bad.Data = &pb.DataSource{Uri: "d.csv"}
		_, err := planFromSpec(bad)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", field, err)
			continue
		}
		if want := "spec." + field; len(status.Convert(err).Message()) < len(want) || status.Convert(err).Message()[:len(want)] != want {
			t.Errorf("%s: message %q does not name the field", field, status.Convert(err).Message())
		}
	}
}
