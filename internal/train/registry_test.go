package train

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// protoOwners returns the cases of JobSpec's settings oneof whose message has the field
// setting, sorted by name with auto last.
func protoOwners(t *testing.T, setting string) []string {
	t.Helper()
	oneof := (&pb.JobSpec{}).ProtoReflect().Descriptor().Oneofs().ByName("settings")
	if oneof == nil {
		t.Fatal("pb.JobSpec has no settings oneof")
	}
	var out []string
	auto := false
	for i := 0; i < oneof.Fields().Len(); i++ {
		fd := oneof.Fields().Get(i)
		if fd.Message().Fields().ByName(protoreflect.Name(setting)) == nil {
			continue
		}
		if string(fd.Name()) == Auto {
			auto = true
			continue
		}
		out = append(out, string(fd.Name()))
	}
	slices.Sort(out)
	if auto {
		out = append(out, Auto)
	}
	return out
}

// taskKinds are the map-task kinds, the fields of pb.Task's kind oneof.
func taskKinds(t *testing.T) []string {
	t.Helper()
	oneof := (&pb.Task{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	if oneof == nil {
		t.Fatal("pb.Task has no kind oneof")
	}
	var out []string
	for i := 0; i < oneof.Fields().Len(); i++ {
		out = append(out, string(oneof.Fields().Get(i).Name()))
	}
	return out
}

// TestRegistry: every registered method has a summary, a settings message that is the case
// of JobSpec's settings oneof named after it, and task kinds pb.Task knows; Methods is sorted;
// a setting two methods share has one kind and cardinality (so it can be one flag).
func TestRegistry(t *testing.T) {
	ms := Methods()
	if len(ms) < 6 {
		t.Fatalf("%d methods registered, want at least gl, rff, exact, grief, cg and kmcg", len(ms))
	}
	if !slices.IsSortedFunc(ms, func(a, b Method) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Methods is not sorted by name")
	}
	kinds := taskKinds(t)
	oneof := (&pb.JobSpec{}).ProtoReflect().Descriptor().Oneofs().ByName("settings")
	for _, m := range append(ms, Method{Name: Auto}) {
		msg, ok := NewSettings(m.Name)
		if !ok || msg == nil {
			t.Errorf("%s: no settings message", m.Name)
			continue
		}
		fd := oneof.Fields().ByName(protoreflect.Name(m.Name))
		if fd == nil || fd.Message().FullName() != msg.ProtoReflect().Descriptor().FullName() {
			t.Errorf("%s: JobSpec.settings has no case %q of type %s", m.Name, m.Name, msg.ProtoReflect().Descriptor().FullName())
		}
		if again, _ := NewSettings(m.Name); again == msg {
			t.Errorf("%s: Settings returns the same message twice; it must be fresh", m.Name)
		}
		if m.Name == Auto {
			continue
		}
		if got, ok := LookupMethod(m.Name); !ok || got.Name != m.Name {
			t.Errorf("LookupMethod(%q) = %v, %v", m.Name, got.Name, ok)
		}
		if m.Summary == "" || strings.Contains(m.Summary, "\n") {
			t.Errorf("%s: summary %q; give one line", m.Name, m.Summary)
		}
		if len(m.Tasks) == 0 {
			t.Errorf("%s: no tasks", m.Name)
		}
		for _, k := range m.Tasks {
			if !slices.Contains(kinds, k) {
				t.Errorf("%s: task kind %q is not a case of pb.Task's kind (%v)", m.Name, k, kinds)
			}
		}
	}
	if oneof.Fields().Len() != len(ms)+1 {
		t.Errorf("JobSpec.settings has %d cases for %d methods and auto", oneof.Fields().Len(), len(ms))
	}
	for _, st := range Settings() {
		for i, f := range st.Fields {
			if f.Kind() != st.Fields[0].Kind() || f.IsList() != st.Fields[0].IsList() {
				t.Errorf("setting %s: %s has %v (list %v), %s has %v (list %v); a shared setting needs one type",
					st.Name, st.Owners[0], st.Fields[0].Kind(), st.Fields[0].IsList(), st.Owners[i], f.Kind(), f.IsList())
			}
		}
	}
	if _, ok := LookupMethod(Auto); ok {
		t.Error("auto is registered as a method; it is the default choice among them")
	}
}

// TestWrongMethodError: a setting given for a method without it names the methods it
// belongs to, the one message for flags, job files and the API. The owners of a setting that
// only the CG methods have are written out; those of settings that many methods share
// (max_features, exact_max_rows) are read from the proto, the cases of JobSpec's settings
// oneof whose message has the field, so that a new method with the setting needs no edit here.
func TestWrongMethodError(t *testing.T) {
	for _, c := range []struct{ setting, method, want string }{
		{"cg_iters", "gl", "cg-iters: a setting of cg and kmcg; drop it for method gl"},
		{"inference", "auto", "inference: a setting of grief; drop it for method auto"},
	} {
		err := WrongMethod(c.setting, c.method)
		if err.Error() != c.want || !IsSettingError(err) {
			t.Errorf("WrongMethod(%s, %s) = %q, want %q", c.setting, c.method, err, c.want)
		}
	}
	for _, c := range []struct{ setting, flag, method string }{
		{"max_features", "max-features", "exact"},
		{"exact_max_rows", "exact-max-rows", "cg"},
	} {
		owners := protoOwners(t, c.setting)
		if len(owners) < 3 || slices.Contains(owners, c.method) {
			t.Fatalf("the proto gives %s to %v; the test needs a setting of three or more methods, not of %s", c.setting, owners, c.method)
		}
		err := WrongMethod(c.setting, c.method)
		if !IsSettingError(err) {
			t.Errorf("WrongMethod(%s, %s) = %v, not a SettingError", c.setting, c.method, err)
		}
		msg := err.Error()
		prefix, suffix := c.flag+": a setting of ", "; drop it for method "+c.method
		if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, suffix) {
			t.Errorf("WrongMethod(%s, %s) = %q, want %q ... %q", c.setting, c.method, msg, prefix, suffix)
			continue
		}
		list := strings.TrimSuffix(strings.TrimPrefix(msg, prefix), suffix)
		head, last, ok := strings.Cut(list, " and ")
		if got := append(strings.Split(head, ", "), last); !ok || !slices.Equal(got, owners) {
			t.Errorf("WrongMethod(%s, %s) names %q, want the owners %v (sorted, auto last) as \"a, b and c\"", c.setting, c.method, list, owners)
		}
	}
	// The same error from a Spec whose settings are another method's.
	s := DefaultSpec("gl")
	s.Settings = &pb.CGSettings{CgIters: 5}
	if err := s.Validate(0); err == nil || err.Error() != "cg-iters: a setting of cg and kmcg; drop it for method gl" {
		t.Errorf("Validate: %v", err)
	}
}

// TestSpecFromJobSpecRoundTrip: Spec.JobSpec and SpecFromJobSpec are inverse for every
// method (settings under the method's case), and the flat fields of a stored job read into
// the method's message.
func TestSpecFromJobSpecRoundTrip(t *testing.T) {
	for _, name := range MethodNames() {
		s := DefaultSpec(name)
		s.Seed, s.MaxIter, s.Kernel = 9, 33, "matern32"
		s.LengthscaleBounds = [2]float64{0.1, 9}
		back, err := SpecFromJobSpec(s.JobSpec())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(back.Settings, s.Settings) || back.Seed != 9 || back.MaxIter != 33 || back.Kernel != "matern32" || back.LengthscaleBounds != s.LengthscaleBounds {
			t.Errorf("%s: %+v, want %+v", name, back, s)
		}
	}
	s, err := SpecFromJobSpec(&pb.JobSpec{Method: "grief", Inference: " type1 ", Samples: 12, MaxFeatures: 4000, ExactMaxRows: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&pb.GRIEFSettings{Inference: "type1", Samples: 12, MaxFeatures: 4000}); !proto.Equal(s.Settings, want) {
		t.Errorf("flat fields: %v, want %v", s.Settings, want)
	}
	if _, err := SpecFromJobSpec(&pb.JobSpec{Method: "rff", Settings: &pb.JobSpec_Rff{Rff: &pb.RFFSettings{Features: 7}}}); err == nil || !strings.HasPrefix(err.Error(), "features:") {
		t.Errorf("odd features: %v", err)
	}
}

// TestDefaultMaxIter: a job without max_iter gets its method's budget for its settings (vof's
// full-batch L-BFGS VOFLBFGSMaxIter, its Adam runs and every other method DefaultMaxIter),
// the stored spec says so, and a given max_iter stands.
func TestDefaultMaxIter(t *testing.T) {
	for _, c := range []struct {
		name string
		js   *pb.JobSpec
		want int
	}{
		{"auto", &pb.JobSpec{Method: "auto"}, DefaultMaxIter},
		{"exact", &pb.JobSpec{Method: "exact"}, DefaultMaxIter},
		{"cg", &pb.JobSpec{Method: "cg"}, DefaultMaxIter},
		{"grief", &pb.JobSpec{Method: "grief"}, DefaultMaxIter},
		{"vof hermite full batch", &pb.JobSpec{Method: "vof"}, VOFLBFGSMaxIter},
		{"vof hermite named", &pb.JobSpec{Method: "vof", Settings: &pb.JobSpec_Vof{Vof: &pb.VOFSettings{Basis: "hermite"}}}, VOFLBFGSMaxIter},
		{"vof minibatch", &pb.JobSpec{Method: "vof", Settings: &pb.JobSpec_Vof{Vof: &pb.VOFSettings{BatchRows: 100}}}, DefaultMaxIter},
		{"vof trig", &pb.JobSpec{Method: "vof", Settings: &pb.JobSpec_Vof{Vof: &pb.VOFSettings{Basis: "trig"}}}, DefaultMaxIter},
		{"vof matern kernel", &pb.JobSpec{Method: "vof", Kernel: "matern52"}, DefaultMaxIter},
		{"vof given", &pb.JobSpec{Method: "vof", MaxIter: 40}, 40},
		{"exact given", &pb.JobSpec{Method: "exact", MaxIter: 250}, 250},
	} {
		s, err := SpecFromJobSpec(c.js)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.MaxIter != c.want || s.maxIter() != c.want || int(s.JobSpec().GetMaxIter()) != c.want {
			t.Errorf("%s: MaxIter %d, maxIter() %d, stored %d; want %d", c.name, s.MaxIter, s.maxIter(), s.JobSpec().GetMaxIter(), c.want)
		}
	}
	if got := DefaultSpec("vof").MaxIter; got != VOFLBFGSMaxIter {
		t.Errorf("DefaultSpec(vof).MaxIter = %d, want %d", got, VOFLBFGSMaxIter)
	}
	// A spec without a budget takes its method's for its current settings when it runs.
	for _, c := range []struct {
		s    Spec
		want int
	}{
		{Spec{Method: "vof", Kernel: "rbf"}, VOFLBFGSMaxIter},
		{Spec{Method: "vof", Kernel: "rbf", Settings: &pb.VOFSettings{Basis: "trig"}}, DefaultMaxIter},
		{Spec{Method: "exact"}, DefaultMaxIter},
	} {
		if got := c.s.maxIter(); got != c.want {
			t.Errorf("%s %v: maxIter() = %d, want %d", c.s.Method, c.s.Settings, got, c.want)
		}
	}
}

// TestAutoCarriesSettings: the method auto chooses gets the auto settings it has by name.
func TestAutoCarriesSettings(t *testing.T) {
	a := &pb.AutoSettings{ExactMaxRows: 70, MaxFeatures: 900}
	for _, c := range []struct {
		method string
		want   proto.Message
	}{
		{"exact", &pb.ExactSettings{ExactMaxRows: 70}},
		{"gl", &pb.GLSettings{MaxFeatures: 900}},
		{"grief", &pb.GRIEFSettings{MaxFeatures: 900}},
		{"cg", &pb.CGSettings{}},
	} {
		if got := chosenSettings(c.method, a); !proto.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.method, got, c.want)
		}
	}
}

// TestSettingCommentsNameTheDefaults: the defaults the settings' comments state (the flags'
// help) are the ones the methods' files use, so the two cannot drift apart.
func TestSettingCommentsNameTheDefaults(t *testing.T) {
	for field, def := range map[string]any{
		"GLSettings.max_features":      DefaultMaxFeatures,
		"RFFSettings.features":         DefaultRFFFeatures,
		"RFFSettings.max_features":     DefaultMaxFeatures,
		"ExactSettings.exact_max_rows": DefaultExactMaxRows,
		"GRIEFSettings.grid":           DefaultGRIEFGrid,
		"GRIEFSettings.samples":        DefaultGRIEFSamples,
		"GRIEFSettings.max_features":   DefaultMaxFeatures,
		"CGSettings.cg_iters":          DefaultCGIters,
		"CGSettings.rr_min":            DefaultRRMin,
		"CGSettings.rr_rate":           DefaultRRRate,
		"CGSettings.probes":            DefaultProbes,
		"CGSettings.precond_rank":      "(default: adaptive, grown until no row's left-out prior variance exceeds a tenth of the noise variance",
		"CGSettings.learning_rate":     DefaultCGLearningRate,
		"CGSettings.cg_tol":            DefaultCGPredictTol,
		"KMCGSettings.cg_iters":        DefaultCGIters,
		"KMCGSettings.cg_tol":          DefaultKMCGTol,
		"KMCGSettings.exact_max_rows":  DefaultExactMaxRows,
		"AutoSettings.exact_max_rows":  DefaultExactMaxRows,
		"AutoSettings.max_features":    DefaultMaxFeatures,
		"AutoSettings.cg_max_rows":     DefaultCGMaxRows,
		"GRIEFSettings.eigenfunctions": DefaultGRIEFEigenfunctions,
		"CGSettings.variance_rank":     fmt.Sprintf("%g%%", 100*VarianceGapTol),
		"KMCGSettings.variance_rank":   fmt.Sprintf("%g%%", 100*VarianceGapTol),
		"VOFSettings.features":         DefaultVOFFeatures,
		"VOFSettings.frequencies":      DefaultVOFFrequencies,
		"VOFSettings.learning_rate":    DefaultVOFLearningRate,
		"VOFSettings.max_features":     DefaultMaxVOFFeatures,
	} {
		msg, name, _ := strings.Cut(field, ".")
		c := pb.FieldComment(msg, name)
		want := fmt.Sprintf("(default %v", def)
		if s, ok := def.(string); ok {
			want = s
		} else if msg == "GRIEFSettings" && name == "eigenfunctions" {
			want = fmt.Sprintf("type2-weights: %v", def)
		}
		if !strings.Contains(c, want) {
			t.Errorf("%s: comment %q does not state %q", field, c, want)
		}
	}
}
