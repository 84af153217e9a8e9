package train

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// set sets the setting called name in s's settings message to v (int, []int, float64,
// []float64 or string) when s's method has that setting, and does nothing otherwise: tests
// that loop over methods give every method the same list of settings, and each takes its own.
func set(s *Spec, name string, v any) {
	if s.Settings == nil {
		s.Settings, _ = NewSettings(s.Method)
	}
	m := s.Settings.ProtoReflect()
	f := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if f == nil {
		return
	}
	scalar := func(x any) protoreflect.Value {
		switch x := x.(type) {
		case int:
			if f.Kind() == protoreflect.Int64Kind {
				return protoreflect.ValueOfInt64(int64(x))
			}
			return protoreflect.ValueOfInt32(int32(x))
		case float64:
			return protoreflect.ValueOfFloat64(x)
		case string:
			return protoreflect.ValueOfString(x)
		case bool:
			return protoreflect.ValueOfBool(x)
		}
		panic(fmt.Sprintf("set %s: %T", name, x))
	}
	switch v := v.(type) {
	case []int:
		l := m.Mutable(f).List()
		l.Truncate(0)
		for _, x := range v {
			l.Append(scalar(x))
		}
	case []float64:
		l := m.Mutable(f).List()
		l.Truncate(0)
		for _, x := range v {
			l.Append(scalar(x))
		}
	default:
		m.Set(f, scalar(v))
	}
}

// switchMethod sets s's method and gives it a settings message of that method holding the
// settings of the old one that the new method has too.
func switchMethod(s *Spec, method string) {
	old := s.Settings
	s.Method = method
	s.Settings, _ = NewSettings(method)
	if old == nil {
		return
	}
	dst := s.Settings.ProtoReflect()
	old.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if to := dst.Descriptor().Fields().ByName(f.Name()); to != nil {
			if f.IsList() {
				l := dst.Mutable(to).List()
				for i := 0; i < v.List().Len(); i++ {
					l.Append(v.List().Get(i))
				}
			} else {
				dst.Set(to, v)
			}
		}
		return true
	})
}
