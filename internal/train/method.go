package train

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/model"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Method is a registered training method. Each method's file registers it in an init
// function; nothing outside the registry enumerates the methods.
type Method struct {
	// Name is the method's name, as --method and JobSpec.method give it; it is also the name
	// of its case in JobSpec's settings oneof.
	Name string
	// Summary is one line for help texts.
	Summary string
	// Settings returns a fresh, zero settings message of the method (e.g. &pb.CGSettings{}).
	Settings func() proto.Message
	// Tasks are the kinds of map task the method runs, named as the fields of pb.Task's
	// kind oneof ("moments", "gram", "rff", "rows", "distinct", "sample", "kernel", "loo").
	Tasks []string
	// Draws says what the job's seed draws for the method (rff: "frequencies"), for the help
	// of --seed; empty when the method draws nothing of its own.
	Draws string
	// ChoosesKernel says the method takes the kernel setting KernelAuto, its default: its
	// hyperparameters are the exact GP's (exact by Cholesky, cg by conjugate gradients, kmcg
	// from the exact fit on a sample), so it chooses the kernel family by the evidence on
	// the search's sampled rows (chooseKernel).
	ChoosesKernel bool
	// MaxIter is the method's default optimizer budget (Spec.MaxIter, --max-iter) for a spec
	// with these settings; nil means DefaultMaxIter.
	MaxIter func(s *Spec) int

	// validate checks the method's settings (s.Settings is nil or of the Settings type) for d
	// input columns (0: unknown); errors start with the setting's kebab-case name.
	validate func(s *Spec, d int) error
	// train trains the method after the moments pass.
	train func(ctx context.Context, r *run, eng engine.Engine, p *prepared) (*model.Model, error)
}

// methods is the registry, filled by init functions and read-only after.
var methods = map[string]Method{}

// register adds a method; a second registration of a name, or a method without its
// functions, is a programming error.
func register(m Method) {
	if m.Name == "" || m.Name == Auto || m.Settings == nil || m.validate == nil || m.train == nil {
		panic(fmt.Sprintf("train: register %q: a method needs a name other than auto, Settings, validate and train", m.Name))
	}
	if _, dup := methods[m.Name]; dup {
		panic(fmt.Sprintf("train: method %q registered twice", m.Name))
	}
	methods[m.Name] = m
}

// Methods returns the registered methods sorted by name.
func Methods() []Method {
	out := make([]Method, 0, len(methods))
	for _, m := range methods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupMethod returns the registered method of that name.
func LookupMethod(name string) (Method, bool) {
	m, ok := methods[name]
	return m, ok
}

// NewSettings returns a fresh settings message of a method, or of auto (*pb.AutoSettings).
func NewSettings(method string) (proto.Message, bool) {
	if method == Auto {
		return &pb.AutoSettings{}, true
	}
	m, ok := methods[method]
	if !ok {
		return nil, false
	}
	return m.Settings(), true
}

// MethodNames returns auto and the registered methods' names, auto first.
func MethodNames() []string {
	out := []string{Auto}
	for _, m := range Methods() {
		out = append(out, m.Name)
	}
	return out
}

// methodChoices lists the method names for an error message: "auto, cg, exact ... or rff".
func methodChoices() string {
	n := MethodNames()
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// SettingOwners returns the methods whose settings message has a field of that name
// (e.g. "cg_iters": cg and kmcg), sorted by name with auto last.
func SettingOwners(setting string) []string {
	var out []string
	for _, name := range append(MethodNames()[1:], Auto) {
		msg, _ := NewSettings(name)
		if msg.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(setting)) != nil {
			out = append(out, name)
		}
	}
	return out
}

// Setting is one setting as the CLI shows it: a field that one or more settings messages
// (of auto and the registered methods) have, with the same name and type in each.
type Setting struct {
	Name   protoreflect.Name              // the field's name, e.g. cg_iters
	Fields []protoreflect.FieldDescriptor // the field in each owner's message, in Owners' order
	Owners []string                       // the methods that have it, sorted, auto last
}

// Settings returns every setting of every method (and auto), sorted by name. Settings two
// messages share must have the same kind and cardinality; a mismatch is a programming error
// that TestRegistry reports.
func Settings() []Setting {
	byName := map[protoreflect.Name]*Setting{}
	for _, name := range append(MethodNames()[1:], Auto) {
		msg, _ := NewSettings(name)
		fields := msg.ProtoReflect().Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			f := fields.Get(i)
			st := byName[f.Name()]
			if st == nil {
				st = &Setting{Name: f.Name()}
				byName[f.Name()] = st
			}
			st.Fields = append(st.Fields, f)
			st.Owners = append(st.Owners, name)
		}
	}
	out := make([]Setting, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
