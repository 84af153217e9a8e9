package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
)

// bodyParts locates the parts of a model's Version-2 body: the posterior's name string
// starts at nameAt, its length-prefixed section at payloadAt, the tagged sections' count at
// trailerAt.
type bodyParts struct {
	nameAt, payloadAt, trailerAt int
}

func bodySplit(t testing.TB, m *Model) bodyParts {
	t.Helper()
	var buf bytes.Buffer
	e := &Encoder{w: &buf}
	e.common(m)
	payload, err := section(m.Posterior.Encode)
	if e.err != nil || err != nil {
		t.Fatal(e.err, err)
	}
	nameAt := buf.Len()
	payloadAt := nameAt + 8 + len(m.Posterior.Name())
	return bodyParts{nameAt: nameAt, payloadAt: payloadAt, trailerAt: payloadAt + 8 + len(payload)}
}

// registryFixtures maps each registered posterior to the keys of the hand-built models that
// carry it, sorted.
func registryFixtures() map[string][]string {
	out := map[string][]string{}
	for key, m := range validModels() {
		out[m.Posterior.Name()] = append(out[m.Posterior.Name()], key)
	}
	for _, keys := range out {
		sort.Strings(keys)
	}
	return out
}

// TestPosteriorRegistryRoundTrip walks the posterior registry: every registered posterior
// has a hand-built model, which encodes to the same bytes twice, with the posterior's name
// and section where the layout puts them, decodes to a model that encodes to the same bytes
// and predicts the same bits over several blocks, and describes itself.
func TestPosteriorRegistryRoundTrip(t *testing.T) {
	names := PosteriorNames()
	for _, want := range []string{"exact", "expansion", "gl", "grief", "rff"} {
		if !slices.Contains(names, want) {
			t.Errorf("posterior %q is not registered (registered: %v)", want, names)
		}
	}
	fixtures := registryFixtures()
	for _, name := range names {
		if len(fixtures[name]) == 0 {
			t.Errorf("posterior %q has no hand-built model in validModels (helpers_test.go); add one", name)
		}
		for _, key := range fixtures[name] {
			t.Run(name+"/"+key, func(t *testing.T) {
				m := validModels()[key]
				b := encode(t, m)
				if !bytes.Equal(encode(t, m), b) {
					t.Fatal("two encodings of the same model differ")
				}
				body, parts := modelBody(b), bodySplit(t, m)
				if got := string(body[parts.nameAt+8 : parts.payloadAt]); got != name {
					t.Fatalf("the body names posterior %q at byte %d, want %q", got, parts.nameAt, name)
				}
				if n := binary.LittleEndian.Uint64(body[parts.trailerAt:]); n != 0 || parts.trailerAt+8 != len(body) {
					t.Fatalf("the body does not end with an empty trailer after the posterior (%d sections, %d of %d bytes)", n, parts.trailerAt+8, len(body))
				}
				d, err := Decode(bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				if d.Posterior.Name() != name {
					t.Fatalf("decoded a %q posterior", d.Posterior.Name())
				}
				if !bytes.Equal(encode(t, d), b) {
					t.Fatal("the decoded model encodes to different bytes")
				}
				const rows = predictBlock + 9
				x := testRows(m, rows, 3)
				p1, err := m.Predict(x, rows)
				if err != nil {
					t.Fatal(err)
				}
				p2, err := d.Predict(x, rows)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < rows; i++ {
					for _, pair := range [][2]float64{{p1.Mean[i], p2.Mean[i]}, {p1.LatentVar[i], p2.LatentVar[i]}, {p1.NoisyVar[i], p2.NoisyVar[i]}} {
						if math.Float64bits(pair[0]) != math.Float64bits(pair[1]) {
							t.Fatalf("row %d: decoded model predicts %v, original %v", i, pair[1], pair[0])
						}
					}
					if !(p1.LatentVar[i] >= 0) || !(p1.NoisyVar[i] > p1.LatentVar[i]) || math.IsNaN(p1.Mean[i]) {
						t.Fatalf("row %d: mean %v, latent %v, noisy %v", i, p1.Mean[i], p1.LatentVar[i], p1.NoisyVar[i])
					}
				}
				own := d.Posterior.Describe()
				if len(own) == 0 {
					t.Fatal("the posterior describes nothing")
				}
				checkFields(t, d.Describe())
				all := d.Describe()
				if i := slices.Index(all, Field{"posterior", name}); i < 0 || fmt.Sprint(all[i+1:]) != fmt.Sprint(own) {
					t.Fatalf("Describe does not end with the posterior's name and fields: %v", all)
				}
			})
		}
	}
}

// checkFields: names are unique snake_case keys and values are of the documented types.
func checkFields(t *testing.T, fields []Field) {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "" || strings.Trim(f.Name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" || seen[f.Name] {
			t.Errorf("field name %q is empty, repeated or not snake_case", f.Name)
		}
		seen[f.Name] = true
		switch f.Value.(type) {
		case string, int, float64, bool, []int, []float64, []string:
		default:
			t.Errorf("field %s has a value of type %T", f.Name, f.Value)
		}
	}
}

// TestDamagedPosteriorSection: for every registered posterior, a section cut short, one with
// bytes after it, an unknown or empty name, and a section length beyond the body are refused
// with an error; a byte changed anywhere in the section is refused or gives a model that
// predicts and re-encodes; none panics. The bodies carry no checksum (the legacy envelope),
// so the damage reaches the section's decoder.
func TestDamagedPosteriorSection(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	str := func(s []byte) []byte { return append(u64(uint64(len(s))), s...) }
	for name, keys := range registryFixtures() {
		m := validModels()[keys[0]]
		leg := legacy(encode(t, m))
		head, body := leg[:12], leg[12:]
		p := bodySplit(t, m)
		common, payload, rest := body[:p.nameAt], body[p.payloadAt+8:p.trailerAt], body[p.trailerAt:]
		build := func(nameBytes, sec []byte) []byte {
			return bytes.Join([][]byte{head, common, str(nameBytes), str(sec), rest}, nil)
		}
		if _, err := Decode(bytes.NewReader(build([]byte(name), payload))); err != nil {
			t.Fatalf("%s: the rebuilt intact model: %v", name, err)
		}
		for what, tc := range map[string]struct {
			b    []byte
			want string
		}{
			"cut short":         {build([]byte(name), payload[:len(payload)-8]), "posterior"},
			"cut to nothing":    {build([]byte(name), nil), "posterior"},
			"a byte more":       {build([]byte(name), append(append([]byte(nil), payload...), 'x')), "bytes after the " + name + " posterior"},
			"unknown name":      {build([]byte("nosuch"), payload), `unknown posterior "nosuch"`},
			"empty name":        {build(nil, payload), `unknown posterior ""`},
			"length past body":  {bytes.Join([][]byte{head, common, str([]byte(name)), u64(1 << 30), payload}, nil), "exceeds"},
			"no trailer count":  {build([]byte(name), payload)[:12+p.trailerAt], "truncated"},
			"another's section": {build([]byte(otherPosterior(name)), payload), "posterior"},
		} {
			got, panicked, err := decodeSafely(tc.b)
			if panicked != nil || got != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: panic %v, error %v, want one containing %q", name, what, panicked, err, tc.want)
			}
		}
		for i := 0; i < len(payload); i += 3 {
			c := append([]byte(nil), payload...)
			c[i] ^= 0xa5
			got, panicked, err := decodeSafely(build([]byte(name), c))
			if panicked != nil {
				t.Fatalf("%s, byte %d of the section changed: Decode panicked: %v", name, i, panicked)
			}
			if err != nil {
				continue
			}
			if _, pp, _ := predictSafely(got, testRows(got, 3, 1), 3); pp != nil {
				t.Fatalf("%s, byte %d of the section changed: accepted, and Predict panics: %v", name, i, pp)
			}
			if _, err := got.Bytes(); err != nil {
				t.Fatalf("%s, byte %d of the section changed: accepted, and does not encode: %v", name, i, err)
			}
		}
	}
}

// otherPosterior is a registered posterior other than name.
func otherPosterior(name string) string {
	for _, n := range PosteriorNames() {
		if n != name {
			return n
		}
	}
	return "nosuch"
}

// unregistered is a posterior whose name is not in the registry.
type unregistered struct{ *GLPosterior }

func (unregistered) Name() string { return "unregistered" }

func TestEncodeNeedsARegisteredPosterior(t *testing.T) {
	for what, tc := range map[string]struct {
		p    Posterior
		want string
	}{
		"no posterior": {nil, "no posterior"},
		"unregistered": {unregistered{glOf(glModel())}, `"unregistered" is not registered`},
	} {
		m := glModel()
		m.Posterior = tc.p
		if _, err := m.Bytes(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Encode error %v, want one containing %q", what, err, tc.want)
		}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate error %v, want one containing %q", what, err, tc.want)
		}
	}
}

func TestRegisterPosteriorRefusesDuplicates(t *testing.T) {
	for what, name := range map[string]string{"duplicate": "gl", "empty": ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s name %q: RegisterPosterior did not panic", what, name)
				}
			}()
			RegisterPosterior(name, func(*Decoder) Posterior { return nil })
		}()
	}
}

// TestDescribe: the common fields in order, in original units, then the posterior's.
func TestDescribe(t *testing.T) {
	m := glModel() // XScale 3, YScale 4, lengthscale 0.7, signal 1.3, noise 0.05
	m.Warn(WarnBound, "lengthscale on its bound")
	m.LogLikSE = 0.5
	m.Domain = &Domain{Lo: []float64{-1}, Hi: []float64{1}}
	m.Choice = &MethodChoice{Requested: "auto", Reason: "small d"}
	got := m.Describe()
	checkFields(t, got)
	l, sf, sn, xs, ys := 0.7, 1.3, 0.05, 3.0, 4.0 // at run time, as Original computes them
	want := []Field{
		{"method", "gl"}, {"method_requested", "auto"}, {"method_reason", "small d"},
		{"kernel", "rbf"}, {"d", 1}, {"columns", []string{"t"}}, {"target", "co2"}, {"n_train", 40},
		{"lengthscales", []float64{l * xs}}, {"signal_variance", sf * (ys * ys)}, {"noise_variance", sn * (ys * ys)},
		{"log_likelihood", -12.5}, {"log_likelihood_se", 0.5}, {"iterations", 3},
		{"domain", "t in [-1, 5]"}, {"warnings", []string{"hyperparameter_on_bound: lengthscale on its bound"}},
		{"posterior", "gl"}, {"features", 8}, {"nodes_per_dim", []int{8}}, {"box_half_widths", []float64{5}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Describe\n got %v\nwant %v", got, want)
	}
	// Optional fields are left out of a model without them.
	e := exactModel()
	var names []string
	for _, f := range e.Describe() {
		names = append(names, f.Name)
	}
	if w := "method kernel d n_train lengthscales signal_variance noise_variance log_likelihood iterations posterior stored_rows"; strings.Join(names, " ") != w {
		t.Errorf("exact model fields %v, want %s", names, w)
	}
}
