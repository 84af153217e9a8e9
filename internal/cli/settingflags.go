package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// settingFlag is the flag of one method setting, derived from the settings messages: the
// field cg_iters is --cg-iters, its help the field's comment in coordinator.proto. A name
// that several methods' settings share (cg_iters of cg and kmcg) is one flag that sets the
// chosen method's field.
type settingFlag struct {
	st  train.Setting
	raw string
	set bool
}

// flagName is a settings field's flag name: cg_iters -> cg-iters.
func flagName(n protoreflect.Name) string { return strings.ReplaceAll(string(n), "_", "-") }

// String returns the value as given.
func (f *settingFlag) String() string { return f.raw }

// Set checks that v parses as the setting's type and keeps it.
func (f *settingFlag) Set(v string) error {
	if _, err := parseSetting(f.st.Fields[0], v); err != nil {
		return err
	}
	f.raw, f.set = v, true
	return nil
}

// Type names the value's type in the help: int, uint, float, string, bool, ints or floats.
func (f *settingFlag) Type() string {
	fd := f.st.Fields[0]
	t := "string"
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		t = "int"
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		t = "uint"
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		t = "float"
	case protoreflect.BoolKind:
		t = "bool"
	}
	if fd.IsList() {
		t += "s"
	}
	return t
}

// settingHelp is a setting's help: each owner's field comment, prefixed by the methods it
// belongs to, methods with the same comment grouped ("gl, grief, rff and auto: ...").
func settingHelp(st train.Setting) string {
	var comments []string
	owners := map[string][]string{}
	for i, f := range st.Fields {
		c := pb.FieldComment(string(f.ContainingMessage().Name()), string(f.Name()))
		if _, ok := owners[c]; !ok {
			comments = append(comments, c)
		}
		owners[c] = append(owners[c], st.Owners[i])
	}
	parts := make([]string, len(comments))
	for i, c := range comments {
		parts[i] = strings.Join(owners[c], ", ") + ": " + c
	}
	return strings.Join(parts, "; ")
}

// parseSetting parses a flag's text as the value of field fd: whole numbers, floats, strings,
// booleans, and comma-separated lists of those for a repeated field.
func parseSetting(fd protoreflect.FieldDescriptor, v string) ([]protoreflect.Value, error) {
	items := []string{v}
	if fd.IsList() {
		items = strings.Split(v, ",")
	}
	out := make([]protoreflect.Value, 0, len(items))
	for i, it := range items {
		it = strings.TrimSpace(it)
		what := ""
		if fd.IsList() {
			what = fmt.Sprintf("item %d (%q) ", i+1, it)
		}
		switch fd.Kind() {
		case protoreflect.Int32Kind:
			x, err := strconv.ParseInt(it, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%sis not a whole number between -2^31 and 2^31-1", what)
			}
			out = append(out, protoreflect.ValueOfInt32(int32(x)))
		case protoreflect.Int64Kind:
			x, err := strconv.ParseInt(it, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%sis not a whole number", what)
			}
			out = append(out, protoreflect.ValueOfInt64(x))
		case protoreflect.Uint64Kind:
			x, err := strconv.ParseUint(it, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%sis not a non-negative whole number", what)
			}
			out = append(out, protoreflect.ValueOfUint64(x))
		case protoreflect.DoubleKind:
			x, err := strconv.ParseFloat(it, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%sis not a finite number", what)
			}
			out = append(out, protoreflect.ValueOfFloat64(x))
		case protoreflect.BoolKind:
			x, err := strconv.ParseBool(it)
			if err != nil {
				return nil, fmt.Errorf("%sis not true or false", what)
			}
			out = append(out, protoreflect.ValueOfBool(x))
		case protoreflect.StringKind:
			out = append(out, protoreflect.ValueOfString(it))
		default:
			return nil, fmt.Errorf("settings of kind %s have no flag form", fd.Kind())
		}
	}
	return out, nil
}

// registerSettingFlags adds one flag per setting of every method (train.Settings). A
// boolean setting's flag, like any boolean flag, needs no value: --additive is
// --additive=true.
func registerSettingFlags(cmd *cobra.Command) []*settingFlag {
	var out []*settingFlag
	for _, st := range train.Settings() {
		f := &settingFlag{st: st}
		cmd.Flags().Var(f, flagName(st.Name), settingHelp(st))
		if fd := st.Fields[0]; fd.Kind() == protoreflect.BoolKind && !fd.IsList() {
			cmd.Flags().Lookup(flagName(st.Name)).NoOptDefVal = "true"
		}
		out = append(out, f)
	}
	return out
}

// settingFlagNames are the names of the derived setting flags.
func settingFlagNames() []string {
	var out []string
	for _, st := range train.Settings() {
		out = append(out, flagName(st.Name))
	}
	return out
}

// applySettingFlags sets, in msg (the method's fresh settings message), the fields of the
// setting flags given on the command line. A flag of a setting the method does not have is
// the wrong-method error (train.WrongMethod), which names the methods it belongs to.
func applySettingFlags(flags []*settingFlag, method string, msg proto.Message) error {
	m := msg.ProtoReflect()
	for _, f := range flags {
		if !f.set {
			continue
		}
		fd := m.Descriptor().Fields().ByName(f.st.Name)
		if fd == nil {
			return train.WrongMethod(string(f.st.Name), method)
		}
		vals, err := parseSetting(fd, f.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", flagName(f.st.Name), err)
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			for _, v := range vals {
				l.Append(v)
			}
		} else {
			m.Set(fd, vals[0])
		}
	}
	return nil
}

// setSettings puts msg into js's settings oneof, in the case named after method.
func setSettings(js *pb.JobSpec, method string, msg proto.Message) {
	jr := js.ProtoReflect()
	if fd := jr.Descriptor().Fields().ByName(protoreflect.Name(method)); fd != nil && fd.ContainingOneof() != nil {
		jr.Set(fd, protoreflect.ValueOfMessage(msg.ProtoReflect()))
	}
}
