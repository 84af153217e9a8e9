package train

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gpreduce/gpreduce/internal/kernel"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Spec is a training job's method, the settings every method shares, and the method's own
// settings message. Bounds are in standardized units: inputs and target are scaled to zero
// mean and unit variance by the training data's moments, so a lengthscale of 1 is one
// standard deviation of its input column and a noise variance of 0.1 is a tenth of the
// target's variance. A Spec comes from a pb.JobSpec through SpecFromJobSpec.
type Spec struct {
	Method string // auto or a registered method (Methods)
	Kernel string // rbf, matern12, matern32, matern52, or KernelAuto (auto and the methods with ChoosesKernel)
	Seed   uint64

	// Names of the input columns and the target, recorded in the model (the CLI fills them
	// from the data).
	Columns []string
	Target  string

	LengthscaleBounds    [2]float64
	SignalVarianceBounds [2]float64
	NoiseVarianceBounds  [2]float64
	// MaxIter is the optimizer's budget; 0 takes the method's default (defaultMaxIter).
	MaxIter int

	// PredictMin and PredictMax bound the inputs the model will predict at, per input column
	// in original units (both or neither; eval sets them from its test rows): gl sizes its
	// grid so its domain covers them as well as the training inputs.
	PredictMin []float64
	PredictMax []float64

	// Settings is the method's settings message (the registered Method.Settings type, e.g.
	// *pb.CGSettings for cg; *pb.AutoSettings for auto). nil means the method's defaults; a
	// zero field means that setting's default, which the method's file defines.
	Settings proto.Message
}

// Defaults every method shares, used when a Spec leaves a field at its zero value. The
// methods' own defaults are in their files.
const (
	// DefaultMaxIter is the optimizer budget of a method without its own (Method.MaxIter):
	// L-BFGS iterations (exact, gl, rff, grief type2 and type2-weights, the search's polish,
	// which is kmcg's fit) or Adam steps (cg, vof's TrigVOF and minibatch runs); L-BFGS stops
	// earlier when converged.
	DefaultMaxIter      = 100
	DefaultMaxFeatures  = 8192  // max_features of gl, rff, grief and auto
	DefaultExactMaxRows = 5000  // exact_max_rows of exact, kmcg and auto
	DefaultCGMaxRows    = 20000 // cg_max_rows of auto
)

// Default hyperparameter bounds, standardized units (each input and the target scaled to unit
// variance by the training data).
//
// Lengthscales [0.05, 100]: the upper bound is 100 standard deviations of the input, at least
// 14 times the standardized range of any column with n <= 10^9 Gaussian rows (about 12 sd) and
// 29 times that of a uniform or binary column, so an irrelevant input can be switched off
// (its kernel factor then stays above exp(-1/200) across the data; ARD needs a lengthscale far
// above the spread, and the former bound of 2 could not reach it). The lower bound 0.05 is
// 1/20 of a standard deviation: on n <= 10^5 rows shorter lengthscales only fit noise, and
// it keeps the feature methods' frequency box finite (gl sizes its grid from these bounds).
// Signal variance [0.05, 20] and noise variance [1e-4, 2] bracket the target's unit variance.
var (
	DefaultLengthscaleBounds    = [2]float64{0.05, 100}
	DefaultSignalVarianceBounds = [2]float64{0.05, 20}
	DefaultNoiseVarianceBounds  = [2]float64{1e-4, 2}
)

// KernelAuto is the kernel setting with which a method that fits the exact GP's likelihood
// (Method.ChoosesKernel: exact, cg, kmcg) chooses the family by the evidence (chooseKernel: rbf,
// matern52 or matern32, whichever has the highest log marginal likelihood at its fitted
// hyperparameters on the search's sampled rows; exact, cg and kmcg check that choice on all
// rows when the sample was smaller, kernelOnAllRows). It is the default of those methods and of
// method auto; every other method, and auto when it chooses another method, takes
// KernelDefault.
const KernelAuto = "auto"

// KernelDefault is the kernel of the methods that do not choose one: the squared exponential
// (SE-ARD) of the five papers.
const KernelDefault = "rbf"

// choosesKernel reports whether method takes KernelAuto: auto, or a registered method with
// ChoosesKernel.
func choosesKernel(method string) bool {
	if method == Auto {
		return true
	}
	m, ok := LookupMethod(method)
	return ok && m.ChoosesKernel
}

// defaultKernel is the kernel a spec of the method gets when the job names none.
func defaultKernel(method string) string {
	if choosesKernel(method) {
		return KernelAuto
	}
	return KernelDefault
}

// resolveKernel is the kernel setting a run of method (a registered method, not auto) uses:
// KernelAuto stays for the methods that choose by the evidence (ChoosesKernel); any other
// method takes KernelDefault for it.
func resolveKernel(k, method string) string {
	if k == KernelAuto && !choosesKernel(method) {
		return KernelDefault
	}
	return k
}

// kernelAutoMethods names the methods that take KernelAuto, for error messages.
func kernelAutoMethods() string {
	var names []string
	for _, m := range Methods() {
		if m.ChoosesKernel {
			names = append(names, m.Name)
		}
	}
	return strings.Join(names, ", ")
}

// DefaultSpec returns the defaults for a method: kernel KernelAuto for auto and the methods
// with ChoosesKernel (exact, cg, kmcg), KernelDefault (rbf) for the others, DefaultLengthscaleBounds,
// DefaultSignalVarianceBounds and DefaultNoiseVarianceBounds (standardized units), and a
// fresh settings message of the method (nil for an unknown method).
func DefaultSpec(method string) Spec {
	s := Spec{
		Method:               method,
		Kernel:               defaultKernel(method),
		LengthscaleBounds:    DefaultLengthscaleBounds,
		SignalVarianceBounds: DefaultSignalVarianceBounds,
		NoiseVarianceBounds:  DefaultNoiseVarianceBounds,
	}
	if m, ok := NewSettings(method); ok {
		s.Settings = m
	}
	s.MaxIter = defaultMaxIter(&s)
	return s
}

// defaultMaxIter is the optimizer budget of s's method with s's settings (Method.MaxIter),
// or DefaultMaxIter.
func defaultMaxIter(s *Spec) int {
	if m, ok := methods[s.Method]; ok && m.MaxIter != nil {
		return m.MaxIter(s)
	}
	return DefaultMaxIter
}

// SpecFromJobSpec is the one conversion from a job's message to a Spec: the common fields
// (bounds left out take the defaults), the method's settings message (the settings oneof,
// or, for jobs stored before it, the deprecated flat fields, read into the method's message),
// then Validate(0). A setting of another method is a SettingError. Errors name the setting
// in kebab case, as the CLI's flags do ("cg-iters: ...").
func SpecFromJobSpec(js *pb.JobSpec) (Spec, error) {
	method := strings.TrimSpace(js.GetMethod())
	if method == "" {
		return Spec{}, fmt.Errorf("method: not set; use %s", methodChoices())
	}
	msg, ok := NewSettings(method)
	if !ok {
		return Spec{}, fmt.Errorf("method: unknown method %q; use %s", method, methodChoices())
	}
	s := DefaultSpec(method)
	s.Seed = js.GetSeed()
	if k := strings.TrimSpace(js.GetKernel()); k != "" {
		s.Kernel = k
	}
	for _, b := range []struct {
		name string
		v    []float64
		dst  *[2]float64
	}{
		{"lengthscale-bounds", js.GetLengthscaleBounds(), &s.LengthscaleBounds},
		{"signal-variance-bounds", js.GetSignalVarianceBounds(), &s.SignalVarianceBounds},
		{"noise-variance-bounds", js.GetNoiseVarianceBounds(), &s.NoiseVarianceBounds},
	} {
		switch len(b.v) {
		case 0:
		case 2:
			*b.dst = [2]float64{b.v[0], b.v[1]}
		default:
			return Spec{}, fmt.Errorf("%s: %d values; give two, the lower and the upper bound (or none for the default %g,%g)", b.name, len(b.v), b.dst[0], b.dst[1])
		}
	}
	if err := settingsOf(js, method, msg); err != nil {
		return Spec{}, err
	}
	s.Settings = msg
	// The budget may depend on the settings (vof's L-BFGS against its Adam runs).
	s.MaxIter = defaultMaxIter(&s)
	if v := js.GetMaxIter(); v != 0 {
		s.MaxIter = int(v)
	}
	if err := s.Validate(0); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// settingsOf fills msg, a fresh settings message of method, from the job's settings oneof
// and its deprecated flat fields, trimming the strings.
func settingsOf(js *pb.JobSpec, method string, msg proto.Message) error {
	jr := js.ProtoReflect()
	dst := msg.ProtoReflect()
	oneof := jr.Descriptor().Oneofs().ByName("settings")
	if fd := jr.WhichOneof(oneof); fd != nil {
		given := jr.Get(fd).Message()
		if string(fd.Name()) != method {
			var err error
			given.Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
				if dst.Descriptor().Fields().ByName(f.Name()) != nil {
					err = fmt.Errorf("%s: given under %s, but the method is %s; put it under %s", kebab(f.Name()), fd.Name(), method, method)
				} else {
					err = WrongMethod(string(f.Name()), method)
				}
				return false
			})
			if err == nil {
				err = fmt.Errorf("%s: the settings of method %s; drop them for method %s", fd.Name(), fd.Name(), method)
			}
			return err
		}
		proto.Merge(msg, given.Interface())
	}
	var err error
	jr.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !f.Options().(*descriptorpb.FieldOptions).GetDeprecated() {
			return true
		}
		to := dst.Descriptor().Fields().ByName(f.Name())
		switch {
		case to == nil && legacyEveryMethod[f.Name()]:
			return true
		case to == nil:
			err = WrongMethod(string(f.Name()), method)
			return false
		case dst.Has(to):
			err = fmt.Errorf("%s: given twice, as a flat field and under %s; keep the one under %s", kebab(f.Name()), method, method)
			return false
		case f.IsList():
			l := dst.Mutable(to).List()
			for i := 0; i < v.List().Len(); i++ {
				l.Append(v.List().Get(i))
			}
		default:
			dst.Set(to, v)
		}
		return true
	})
	if err != nil {
		return err
	}
	fields := dst.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if f := fields.Get(i); f.Kind() == protoreflect.StringKind && !f.IsList() && dst.Has(f) {
			dst.Set(f, protoreflect.ValueOfString(strings.TrimSpace(dst.Get(f).String())))
		}
	}
	return nil
}

// legacyEveryMethod are the deprecated flat fields that clients before the settings oneof
// sent with every job, whatever its method (the CLI's flag defaults max-features 8192 and
// exact-max-rows 5000): a stored job of a method without them drops them.
var legacyEveryMethod = map[protoreflect.Name]bool{"max_features": true, "exact_max_rows": true}

// JobSpec is the message form of s's method and settings (the common fields and the
// settings oneof; the caller adds the data and the shards). SpecFromJobSpec(s.JobSpec())
// gives s back, except for Columns, Target, PredictMin and PredictMax, which the message
// does not carry.
func (s Spec) JobSpec() *pb.JobSpec {
	js := &pb.JobSpec{
		Method:               s.Method,
		Kernel:               s.Kernel,
		Seed:                 s.Seed,
		LengthscaleBounds:    append([]float64(nil), s.LengthscaleBounds[:]...),
		SignalVarianceBounds: append([]float64(nil), s.SignalVarianceBounds[:]...),
		NoiseVarianceBounds:  append([]float64(nil), s.NoiseVarianceBounds[:]...),
		MaxIter:              int32(s.MaxIter),
	}
	if s.Settings != nil {
		jr := js.ProtoReflect()
		if fd := jr.Descriptor().Fields().ByName(protoreflect.Name(s.Method)); fd != nil && fd.ContainingOneof() != nil &&
			fd.Message().FullName() == s.Settings.ProtoReflect().Descriptor().FullName() {
			jr.Set(fd, protoreflect.ValueOfMessage(proto.Clone(s.Settings).ProtoReflect()))
		}
	}
	return js
}

// Validate checks the spec up front and says which setting to change (errors start with its
// kebab-case name). d is the number of input columns; d <= 0 skips the checks that need it.
func (s *Spec) Validate(d int) error {
	var m Method
	switch s.Method {
	case Auto:
	case "":
		return fmt.Errorf("method: not set; use %s", methodChoices())
	default:
		var ok bool
		if m, ok = LookupMethod(s.Method); !ok {
			return fmt.Errorf("method: unknown method %q; use %s", s.Method, methodChoices())
		}
	}
	if s.Kernel == KernelAuto {
		if !choosesKernel(s.Method) {
			return fmt.Errorf("kernel: auto (the choice by the evidence) is for the methods that fit the exact GP's likelihood (%s); name the kernel for %s: one of %s", kernelAutoMethods(), s.Method, strings.Join(kernel.FamilyNames(), ", "))
		}
	} else if _, err := kernel.ParseFamily(s.Kernel); err != nil {
		return fmt.Errorf("kernel: %w; or auto with %s", err, kernelAutoMethods())
	}
	for _, b := range []struct {
		name string
		v    [2]float64
	}{{"lengthscale-bounds", s.LengthscaleBounds}, {"signal-variance-bounds", s.SignalVarianceBounds}, {"noise-variance-bounds", s.NoiseVarianceBounds}} {
		lo, hi := b.v[0], b.v[1]
		if !(lo > 0) || math.IsInf(hi, 0) || math.IsNaN(hi) {
			return fmt.Errorf("%s: %g,%g must be positive and finite", b.name, lo, hi)
		}
		if lo > hi {
			return fmt.Errorf("%s: lower bound %g is above upper bound %g; swap them", b.name, lo, hi)
		}
	}
	if s.MaxIter < 0 {
		return fmt.Errorf("max-iter: %d is negative", s.MaxIter)
	}
	if len(s.PredictMin) != len(s.PredictMax) || (d > 0 && len(s.PredictMin) != 0 && len(s.PredictMin) != d) {
		return fmt.Errorf("predict-range: %d minima and %d maxima for %d input columns; give one of each per column", len(s.PredictMin), len(s.PredictMax), d)
	}
	for k := range s.PredictMin {
		if !(s.PredictMin[k] <= s.PredictMax[k]) || math.IsInf(s.PredictMin[k], 0) || math.IsInf(s.PredictMax[k], 0) {
			return fmt.Errorf("predict-range: column %d has %g,%g; give finite LO <= HI", k, s.PredictMin[k], s.PredictMax[k])
		}
	}
	if s.Settings != nil {
		want, _ := NewSettings(s.Method)
		if got := s.Settings.ProtoReflect().Descriptor(); got.FullName() != want.ProtoReflect().Descriptor().FullName() {
			var err error
			s.Settings.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
				err = WrongMethod(string(f.Name()), s.Method)
				return false
			})
			if err == nil {
				err = fmt.Errorf("settings: %s are not the settings of method %s", got.Name(), s.Method)
			}
			return err
		}
		if err := checkFinite(s.Settings); err != nil {
			return err
		}
	}
	if s.Method == Auto {
		return validateAuto(s)
	}
	return m.validate(s, d)
}

// checkFinite refuses NaN and infinite floats in a settings message.
func checkFinite(m proto.Message) error {
	var err error
	m.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Kind() != protoreflect.DoubleKind {
			return true
		}
		vals := []float64{}
		if f.IsList() {
			for i := 0; i < v.List().Len(); i++ {
				vals = append(vals, v.List().Get(i).Float())
			}
		} else {
			vals = append(vals, v.Float())
		}
		for _, x := range vals {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				err = fmt.Errorf("%s: %g is not a finite number", kebab(f.Name()), x)
				return false
			}
		}
		return true
	})
	return err
}

// SettingError is a setting given for a method that does not have it. It is the one error
// for that mistake, whether the setting came as a flag, a job-file key or an API field.
type SettingError struct {
	Setting string   // the setting's proto field name, e.g. "cg_iters"
	Owners  []string // the methods whose settings have it (auto last), e.g. cg and kmcg
	Method  string   // the job's method
}

// Error names the setting in kebab case (as a flag), the methods it belongs to and the
// job's method: "cg-iters: a setting of cg and kmcg; drop it for method gl".
func (e *SettingError) Error() string {
	if len(e.Owners) == 0 {
		return fmt.Sprintf("%s: not a setting of any method", kebab(protoreflect.Name(e.Setting)))
	}
	return fmt.Sprintf("%s: a setting of %s; drop it for method %s", kebab(protoreflect.Name(e.Setting)), andList(e.Owners), e.Method)
}

// WrongMethod is the error for setting (a settings field name, e.g. "cg_iters") given for
// method, which does not have it.
func WrongMethod(setting, method string) error {
	return &SettingError{Setting: setting, Owners: SettingOwners(setting), Method: method}
}

// IsSettingError reports whether err is (or wraps) a SettingError.
func IsSettingError(err error) bool {
	var se *SettingError
	return errors.As(err, &se)
}

// andList joins "a", "a and b", "a, b and c".
func andList(v []string) string {
	if len(v) <= 1 {
		return strings.Join(v, "")
	}
	return strings.Join(v[:len(v)-1], ", ") + " and " + v[len(v)-1]
}

// kebab is a field name as a flag: cg_iters -> cg-iters.
func kebab(n protoreflect.Name) string { return strings.ReplaceAll(string(n), "_", "-") }

// orInt is v, or def when v is 0.
func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// orFloat is v, or def when v is 0.
func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// maxIter is the spec's optimizer budget: MaxIter, or the method's default.
func (s *Spec) maxIter() int { return orInt(s.MaxIter, defaultMaxIter(s)) }

// nonNegative refuses negative whole-number settings of m, except those named in allow.
func nonNegative(m proto.Message, allow ...protoreflect.Name) error {
	var err error
	m.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Kind() != protoreflect.Int32Kind && f.Kind() != protoreflect.Int64Kind {
			return true
		}
		for _, a := range allow {
			if a == f.Name() {
				return true
			}
		}
		vals := []int64{}
		if f.IsList() {
			for i := 0; i < v.List().Len(); i++ {
				vals = append(vals, v.List().Get(i).Int())
			}
		} else {
			vals = append(vals, v.Int())
		}
		for _, x := range vals {
			if x < 0 {
				err = fmt.Errorf("%s: %d is negative; give a positive number, or 0 for the default", kebab(f.Name()), x)
				return false
			}
		}
		return true
	})
	return err
}
