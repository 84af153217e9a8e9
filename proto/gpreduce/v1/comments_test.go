package gpreducev1

import (
	"strings"
	"testing"
)

// TestSettingsFieldsHaveComments: every field of every settings message (the cases of
// JobSpec's settings oneof) has a comment, which the CLI shows as the flag's help.
func TestSettingsFieldsHaveComments(t *testing.T) {
	oneof := (&JobSpec{}).ProtoReflect().Descriptor().Oneofs().ByName("settings")
	if oneof == nil || oneof.Fields().Len() == 0 {
		t.Fatal("JobSpec has no settings oneof")
	}
	for i := 0; i < oneof.Fields().Len(); i++ {
		md := oneof.Fields().Get(i).Message()
		for j := 0; j < md.Fields().Len(); j++ {
			f := md.Fields().Get(j)
			if c := FieldComment(string(md.Name()), string(f.Name())); len(c) < 10 {
				t.Errorf("%s.%s: comment %q; document the field in coordinator.proto", md.Name(), f.Name(), c)
			}
		}
	}
}

func TestParseFieldComments(t *testing.T) {
	src := `// Top.
message A {
  // one
  // two
  int32 x = 1;
  int32 y = 2;
  oneof o {
    // in a oneof
    B b = 3;
  }
  // repeated
  repeated double z = 4 [deprecated = true];
}
// other
message B {
  string x = 1; // trailing comments are not taken
}
`
	got := parseFieldComments(src)
	want := map[string]string{"A.x": "one two", "A.b": "in a oneof", "A.z": "repeated"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if c := FieldComment("CGSettings", "cg_iters"); !strings.Contains(c, "J per solve") {
		t.Errorf("CGSettings.cg_iters: %q", c)
	}
}
